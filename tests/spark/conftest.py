"""One Spark session on a local-cluster master for the whole run (Spark is heavy on 2 cores).

The session holds an exclusive lock on ``PERSISTENT_SPARK_LOCK`` (default
``/tmp/persistent-spark.lock``) while it lives, so two test runs on one machine
take turns instead of starving each other.

Jobs serve Spark's web UI; the Spark applications of the tests do not, and their JVMs
compile with the JIT's first tier only and keep their temporary files in a directory the
run removes at its end (``test_jvm_options``).
"""

from __future__ import annotations

import fcntl
import os
import sys
import tempfile

import pytest

from crash_harness import stop_standbys
from jvm_servers import spark_class_archive

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")
sys.path.insert(0, EXAMPLES)  # the tests import the examples' jobs and helpers


#: JVM options of the tests' Spark applications: only the JIT's first tier, and the
#: classes of an earlier run mapped from an archive. The tests' JVMs live for seconds on
#: small data, where the optimizing compiler's work never pays off: it took about 45 % of
#: a crash-test run's CPU time.
TEST_JVM = "-XX:TieredStopAtLevel=1"

#: The class data sharing archive ``make test`` recorded (``jvm_servers.spark_class_archive``).
ARCHIVE = spark_class_archive()
if ARCHIVE is not None:
    TEST_JVM += f" -XX:SharedArchiveFile={ARCHIVE}"

#: Hadoop's HDFS client first asks again for a file's completion after 400 ms, each time
#: it closes a file Spark wrote, where the test cluster's DataNode has reported the
#: block within milliseconds: 20 ms makes Spark's checkpoint writes on the test HDFS
#: take tens of milliseconds, not half a second each.
HDFS_CLIENT = "-Dspark.hadoop.dfs.client.block.write.locateFollowingBlock.initial.delay.ms=20"

#: Put on the ``PYTHONPATH`` of every Python process of the tests' Spark applications: its
#: ``sitecustomize`` has them import the installed pyspark, not Spark's zip of it.
PYTHON_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_path")


@pytest.fixture(scope="session", autouse=True)
def test_jvm_options():
    """Applies ``TEST_JVM`` and ``HDFS_CLIENT`` and turns Spark's web UI off in every
    Spark application the tests start: this process's session and the spark-submit
    runs, whose driver JVMs take ``SPARK_SUBMIT_OPTS`` as JVM options and ``-Dspark.*``
    ones as settings; executors of ``local-cluster`` masters get ``TEST_JVM`` as
    ``spark.executor.extraJavaOptions``. All of them keep their temporary files
    (``java.io.tmpdir``, where Spark's local directories are) in one directory, removed
    at the end of the run: JVMs the tests kill leave theirs behind (the crash harness
    gives each of its runs one of their own). Puts ``PYTHON_PATH`` first on the
    ``PYTHONPATH`` their Python processes inherit."""
    temporary = tempfile.TemporaryDirectory(prefix="persistent-tests-jvm-", ignore_cleanup_errors=True)
    jvm = f"{TEST_JVM} -Djava.io.tmpdir={temporary.name}"
    options = (f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {jvm} -Dspark.ui.enabled=false "
               f"'-Dspark.executor.extraJavaOptions={jvm}' {HDFS_CLIENT}").strip()
    with temporary, pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_SUBMIT_OPTS", options)
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [PYTHON_PATH, os.environ.get("PYTHONPATH")])))
        yield


@pytest.fixture(autouse=True)
def no_standby_outlives_its_test():
    """Kills the standby runs (``crash_harness``) a test started and no run took."""
    yield
    stop_standbys()


@pytest.fixture(scope="session")
def spark_lock():
    with open(os.environ.get("PERSISTENT_SPARK_LOCK", "/tmp/persistent-spark.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def spark(spark_lock):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark import SparkContext

    from persistent.tools.session import spark_session

    if SparkContext._active_spark_context is not None:  # it would be reused, on its master and settings
        pytest.fail(f"a SparkContext runs in this process before the tests' session (master "
                    f"{SparkContext._active_spark_context.master}): a test without Spark started one")

    session = spark_session(
        "persistent-tests",
        os.environ.get("PERSISTENT_TEST_MASTER", "local-cluster[2,1,1024]"),
        **{"spark.sql.shuffle.partitions": "2", "spark.executor.memory": "768m"},
    )
    yield session
    session.stop()
