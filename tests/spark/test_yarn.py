"""YARN for real: the count example submitted with ``spark-submit --master yarn``, as
docs/deploy.md's YARN section shows, to a MiniYARNCluster (``yarn_cluster``: a
ResourceManager and one NodeManager) whose file system is the tests' HDFS
(``hdfs_cluster``), with its checkpoint and a Parquet output on ``hdfs://`` and one
executor.

- Client mode, an executor's container SIGKILLed mid-run: YARN starts another executor
  for the application, Spark runs the lost tasks again, and the counts are exact.
- Cluster mode, the application master (the driver's JVM) SIGKILLed once a micro-batch
  has committed: YARN's second attempt starts the driver again, which continues on
  Spark's checkpoint (path A), and the counts are exact.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from pyspark.find_spark_home import _find_spark_home

from crash_harness import Crasher, jvm_processes
from persistent.sinks.parquet import ParquetSink
from persistent.storage.job_directory import JobDirectory
from persistent.storage.webhdfs import WebHdfsFileSystem

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

TOTAL, KEYS, ROWS_PER_BATCH = 4_000, 5, 500  # 8 micro-batches
EXPECTED = {f"k{k}": len(range(k, TOTAL, KEYS)) for k in range(KEYS)}

EXECUTOR = "org.apache.spark.executor.YarnCoarseGrainedExecutorBackend"
APPLICATION_MASTER = "org.apache.spark.deploy.yarn.ApplicationMaster"


@pytest.fixture
def on_yarn(yarn_cluster, monkeypatch):
    """docs/deploy.md's environment of a submit to YARN: ``HADOOP_CONF_DIR`` names the
    cluster, ``PYSPARK_ARCHIVES_PATH`` the installed pyspark's zips, which every node has
    (``local:``). Kills what the test's applications left running."""
    lib = Path(_find_spark_home()) / "python" / "lib"
    monkeypatch.setenv("HADOOP_CONF_DIR", str(yarn_cluster.conf_dir))
    monkeypatch.setenv("PYSPARK_ARCHIVES_PATH", ",".join(f"local:{path}" for path in sorted(lib.glob("*.zip"))))
    yield yarn_cluster
    yarn_cluster.end_applications()


def count(workdir: Path, hdfs_dir, deploy_mode: str, *submit: str) -> Crasher:
    """The count example on YARN in ``deploy_mode``, with docs/deploy.md's options and
    ``submit``: one executor, Spark's jars from the nodes' own pyspark (nothing uploaded
    but the application), its checkpoint and a Parquet output on HDFS."""
    options = ("--deploy-mode", deploy_mode, "--num-executors", "1",
               "--conf", f"spark.yarn.jars=local:{_find_spark_home()}/jars/*", *submit)
    args = ["--checkpoint", f"{hdfs_dir.uri}/ck", "--webhdfs-address", hdfs_dir.http, "--output", f"{hdfs_dir.uri}/out",
            "--total", str(TOTAL), "--keys", str(KEYS), "--rows-per-batch", str(ROWS_PER_BATCH), "--available-now",
            "--key-groups", "2", "--interval-ms", "500"]
    return Crasher("count", args, workdir, master="yarn", submit=options, standby=False)


def kill_in_container(yarn_cluster, main_class: str) -> str:
    """SIGKILLs the JVM that runs ``main_class`` in a container of the application that
    runs; returns the application's id."""
    [application] = yarn_cluster.running_applications()
    pids = jvm_processes(main_class, application)
    assert len(pids) == 1, f"{main_class} of {application}: pids {pids}"
    os.kill(pids[0], signal.SIGKILL)
    return application


def counted(hdfs_dir, workdir: Path) -> dict[str, int]:
    """The final counts of the Parquet output on HDFS, read from a copy."""
    copy = hdfs_dir.download("out", str(workdir / "out"))
    final = ParquetSink(copy, value_column="count").read()
    return dict(zip(final["key"], final["count"].tolist()))


def logs_end(logs: dict[str, str]) -> str:
    """The end of each container's output, for a failure message."""
    return "\n".join(f"--- {container}\n{text[-3000:]}" for container, text in logs.items())


def test_client_mode_counts_exactly_through_the_loss_of_an_executors_container(tmp_path, hdfs_dir, on_yarn):
    crasher = count(tmp_path, hdfs_dir, "client")
    killed = []
    outcome = crasher.disturb_after("batch 0.1:", lambda _: killed.append(kill_in_container(on_yarn, EXECUTOR)))
    [application] = killed
    logs = on_yarn.container_logs(application)
    assert outcome.returncode == 0, f"{outcome.log}\n{logs_end(logs)}"
    # The application master, the executor killed and the one YARN started in its place.
    assert len(logs) >= 3, sorted(logs)
    assert counted(hdfs_dir, tmp_path) == EXPECTED


def test_cluster_mode_counts_exactly_after_yarn_restarts_the_killed_application_master(tmp_path, hdfs_dir, on_yarn):
    job = JobDirectory(WebHdfsFileSystem(hdfs_dir.uri, http_address=hdfs_dir.http), f"{hdfs_dir.uri}/ck")
    crasher = count(tmp_path, hdfs_dir, "cluster", "--conf", "spark.yarn.maxAppAttempts=2",
                    "--conf", f"spark.yarn.appMasterEnv.PYSPARK_PYTHON={sys.executable}")
    killed = []

    def committed() -> bool:
        """A micro-batch has committed: its progress record is in the job directory."""
        return bool(job.read_progress(1))

    outcome = crasher.disturb_after(committed, lambda _: killed.append(kill_in_container(on_yarn, APPLICATION_MASTER)))
    [application] = killed
    logs = on_yarn.container_logs(application)
    assert outcome.returncode == 0, f"{outcome.log}\n{logs_end(logs)}"
    assert len(on_yarn.attempts(application)) == 2
    [second] = [text for container, text in logs.items() if container.endswith("_02_000001")]
    assert "recovery path A" in second, second[-3000:]
    assert counted(hdfs_dir, tmp_path) == EXPECTED
