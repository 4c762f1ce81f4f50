"""HDFS for real: the examples with their input, Spark's checkpoint, the key groups'
checkpoints and the clock on a MiniDFSCluster (``hdfs_cluster``: a NameNode and one
DataNode, replication 1), killed with SIGKILL, and run through the NameNode's restart
and the DataNode's loss.

Spark reaches the cluster over Hadoop's RPC (``hdfs://``), the key groups and the files
source over WebHDFS (``--webhdfs-address``), as on a cluster.
"""

from __future__ import annotations

import pytest

from crash_harness import Crasher
from persistent.storage.faults import CrashPoint
from persistent.storage.clock_store import verify_clock
from persistent.storage.job_directory import JobDirectory, task_index
from persistent.storage.webhdfs import WebHdfsFileSystem
from test_restore_by_reference import corpus_file, wordcount_sink
from test_window_average import assert_windows_equal_pandas
from test_wordcount import expected_counts

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

FILES = 10
TOTAL, KEYS, SIZE, STEP = 6_000, 3, 2_000, 500


class OnHdfs:
    """A new directory on the cluster (``hdfs_dir``): ``uri`` (``hdfs://``), reached here over WebHDFS."""

    def __init__(self, directory):
        self.cluster, self.uri, self.http = directory.cluster, directory.uri, directory.http
        self.fs = WebHdfsFileSystem(self.uri, http_address=self.http)
        self.job = JobDirectory(self.fs, f"{self.uri}/ck")

    def write_corpus(self, numbers) -> None:
        for number in numbers:
            self.fs.write_atomic(f"{self.uri}/in/{number:03d}.txt", ("\n".join(corpus_file(number)) + "\n").encode())

    def crash_and_lose_sparks_checkpoint(self, crasher: Crasher, points) -> int:
        """``Crasher.crash_and_lose_sparks_checkpoint`` on the cluster."""
        return crasher.crash_and_lose_sparks_checkpoint(f"{self.uri}/ck", points, self.fs)

    def assert_clock_names_durable_checkpoints(self) -> None:
        record = self.job.clock.read()
        assert record is not None and record.clock_ms == min(record.task_clocks.values())
        verify_clock(record, lambda task: self.job.store(task_index(task)))


@pytest.fixture
def on_hdfs(hdfs_dir) -> OnHdfs:
    return OnHdfs(hdfs_dir)


def wordcount(workdir, on_hdfs: OnHdfs) -> Crasher:
    args = ["--input", f"{on_hdfs.uri}/in", "--checkpoint", f"{on_hdfs.uri}/ck", "--webhdfs-address", on_hdfs.http,
            "--output", f"sqlite://{workdir / 'out.db'}", "--available-now", "--key-groups", "4",
            "--files-per-batch", "1"]
    return Crasher("wordcount", args, workdir)


def window_average(workdir, on_hdfs: OnHdfs) -> Crasher:
    args = ["--checkpoint", f"{on_hdfs.uri}/ck", "--webhdfs-address", on_hdfs.http,
            "--output", f"sqlite://{workdir / 'out.db'}", "--available-now", "--total", str(TOTAL),
            "--keys", str(KEYS), "--window-ms", str(SIZE), "--slide-ms", str(STEP), "--rows-per-batch", "1000",
            "--interval-ms", "500", "--key-groups", "3"]
    return Crasher("window_average", args, workdir)


def finish(crasher: Crasher, path: str) -> None:
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert f"recovery path {path}" in final.log, final.log


def test_wordcount_on_hdfs_killed_then_path_a_and_path_b(tmp_path, on_hdfs):
    on_hdfs.write_corpus(range(FILES))
    crasher = wordcount(tmp_path, on_hdfs)
    for point in (CrashPoint.GROUP, CrashPoint.CLOCK):
        crasher.crash_at(point, 2)
    from_clock = on_hdfs.crash_and_lose_sparks_checkpoint(crasher, [(CrashPoint.CHECKPOINTS, 3), (CrashPoint.SINK, 2)])
    assert from_clock >= 1, f"seed {crasher.seed}"
    finish(crasher, "B")
    assert wordcount_sink(tmp_path) == expected_counts(corpus_file(n) for n in range(FILES)), f"seed {crasher.seed}"
    on_hdfs.assert_clock_names_durable_checkpoints()


def test_window_average_on_hdfs_killed_then_path_a_and_path_b(tmp_path, on_hdfs):
    crasher = window_average(tmp_path, on_hdfs)
    for point in (CrashPoint.CHECKPOINTS, CrashPoint.COMMITTED):
        crasher.crash_at(point, 2)
    from_clock = on_hdfs.crash_and_lose_sparks_checkpoint(crasher, [(CrashPoint.CLOCK, 2), (CrashPoint.GROUP, 2)])
    assert from_clock == 2, f"seed {crasher.seed}"
    finish(crasher, "B")
    assert_windows_equal_pandas(tmp_path / "out.db", TOTAL, KEYS, SIZE, STEP)
    on_hdfs.assert_clock_names_durable_checkpoints()


def test_a_namenode_restart_while_the_job_runs_is_ridden_out_or_named_and_a_restart_is_exact(tmp_path, on_hdfs):
    on_hdfs.write_corpus(range(FILES))
    crasher = wordcount(tmp_path, on_hdfs)
    disturbed = crasher.disturb_after("batch 0.3:", lambda _: on_hdfs.cluster.restart_namenode(),
                                      standby_next=True)
    assert disturbed.returncode == 0 or on_hdfs.uri in disturbed.log, disturbed.log
    finish(crasher, "A")
    assert wordcount_sink(tmp_path) == expected_counts(corpus_file(n) for n in range(FILES))
    on_hdfs.assert_clock_names_durable_checkpoints()


def test_a_lost_datanode_fails_the_job_naming_a_file_and_after_its_return_a_restart_is_exact(tmp_path, on_hdfs):
    on_hdfs.write_corpus(range(FILES))
    crasher = wordcount(tmp_path, on_hdfs)
    try:
        failed = crasher.disturb_after("batch 0.3:", lambda _: on_hdfs.cluster.stop_datanode(), standby_next=True)
    finally:
        on_hdfs.cluster.start_datanode()
    assert failed.returncode != 0 and on_hdfs.uri in failed.log, failed.log
    on_hdfs.assert_clock_names_durable_checkpoints()
    finish(crasher, "A")
    assert wordcount_sink(tmp_path) == expected_counts(corpus_file(n) for n in range(FILES))
    on_hdfs.assert_clock_names_durable_checkpoints()
