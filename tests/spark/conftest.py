"""One Spark session on a local-cluster master for the whole run (Spark is heavy on 2 cores)."""

from __future__ import annotations

import os
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


@pytest.fixture(scope="session")
def spark():
    sys.path.insert(0, EXAMPLES)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from persistent.session import spark_session

    session = spark_session(
        "persistent-tests",
        os.environ.get("PERSISTENT_TEST_MASTER", "local-cluster[2,1,1024]"),
        **{"spark.sql.shuffle.partitions": "2", "spark.executor.memory": "768m"},
    )
    yield session
    session.stop()
