"""One Spark session on a local-cluster master for the whole run (Spark is heavy on 2 cores).

The session holds an exclusive lock on ``PERSISTENT_SPARK_LOCK`` (default
``/tmp/persistent-spark.lock``) while it lives, so two test runs on one machine
take turns instead of starving each other.

Jobs serve Spark's web UI; the Spark applications of the tests do not
(``without_spark_ui``).
"""

from __future__ import annotations

import fcntl
import os
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")
sys.path.insert(0, EXAMPLES)  # the tests import the examples' jobs and helpers


@pytest.fixture(scope="session", autouse=True)
def without_spark_ui():
    """Turns Spark's web UI off in every Spark application the tests start: this
    process's session and the spark-submit runs, whose driver JVMs take
    ``SPARK_SUBMIT_OPTS`` as system properties (``spark.*`` ones are settings)."""
    options = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Dspark.ui.enabled=false".strip()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_SUBMIT_OPTS", options)
        yield


@pytest.fixture(scope="session")
def spark_lock():
    with open(os.environ.get("PERSISTENT_SPARK_LOCK", "/tmp/persistent-spark.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def spark(spark_lock):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from persistent.tools.session import spark_session

    session = spark_session(
        "persistent-tests",
        os.environ.get("PERSISTENT_TEST_MASTER", "local-cluster[2,1,1024]"),
        **{"spark.sql.shuffle.partitions": "2", "spark.executor.memory": "768m"},
    )
    yield session
    session.stop()
