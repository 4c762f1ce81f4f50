"""A job directory's lease (``persistent.storage.lease``), on the local file system and
on a real HDFS (``hdfs_dir``, over WebHDFS): a second holder is refused at once, naming
the first; a dead holder's lease is taken over at once on its machine, an unrenewed
one anywhere once it expires; of many starts at the same moment exactly one wins.
Other holders are real processes (``HOLD``), killed or stopped for real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

from persistent.core.errors import JobDirectoryInUseError
from persistent.storage.filesystems import filesystem_for
from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.storage.lease import EXPIRES_AFTER_MS, RENEW_EVERY_MS, JobLease, check_free, holder

#: Another process that takes the lease of the directory argv[1] (over WebHDFS at
#: argv[2] when given), renewing every argv[3] ms, expiring after argv[4] ms; prints
#: its pid once it holds it, then waits for a line: "release", or "exit" (without releasing).
HOLD = """
import os, sys
from persistent.storage.filesystems import filesystem_for
from persistent.storage.job_directory import JobDirectory
from persistent.storage.lease import JobLease
root, http, renew, expiry = sys.argv[1], sys.argv[2] or None, int(sys.argv[3]), int(sys.argv[4])
directory = JobDirectory(filesystem_for(root, http), root)
lease = JobLease.acquire(directory, "Spark application app-holder", renew, expiry,
                         report=lambda message: print(message, flush=True))
lease.when_lost(lambda reason: print("lost:", reason, flush=True))
print(os.getpid(), flush=True)
for line in sys.stdin:
    if line.strip() == "release":
        lease.close()
        print("released", flush=True)
    elif line.strip() == "exit":
        os._exit(0)
"""


@pytest.fixture(params=["local", "hdfs"])
def place(request, tmp_path) -> tuple[str, str | None]:
    """A job directory's URI, and the WebHDFS address it is reached at (None: local)."""
    if request.param == "local":
        return str(tmp_path / "job"), None
    hdfs_dir = request.getfixturevalue("hdfs_dir")
    return hdfs_dir.uri, hdfs_dir.http


def job_directory(place: tuple[str, str | None]) -> JobDirectory:
    root, http = place
    return JobDirectory(filesystem_for(root, http), root)


class Holder:
    """A process of its own holding the lease (``HOLD``)."""

    def __init__(self, place: tuple[str, str | None], renew_every_ms: int = RENEW_EVERY_MS,
                 expires_after_ms: int = EXPIRES_AFTER_MS):
        root, http = place
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLD, root, http or "", str(renew_every_ms), str(expires_after_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=os.getcwd(),
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        self.pid = int(self.line())
        assert self.pid == self.process.pid

    def line(self) -> str:
        line = self.process.stdout.readline()
        assert line, f"the holder ended (exit {self.process.wait()})"
        return line.strip()

    def say(self, word: str) -> None:
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def holders():
    started: list[Holder] = []
    yield lambda *args, **kwargs: started.append(Holder(*args, **kwargs)) or started[-1]
    for each in started:
        each.end()


def test_a_second_start_is_refused_at_once_naming_the_holder_and_writing_nothing(place, holders):
    first = holders(place)
    directory = job_directory(place)
    before = {term: directory.fs.read_bytes(directory.fs.join(directory.root, "lease", f"{term:012d}"))
              for term in directory.lease_terms()}
    began = time.monotonic()
    with pytest.raises(JobDirectoryInUseError) as refused:
        JobLease.acquire(directory, "Spark application app-second")
    assert time.monotonic() - began < 2
    message = str(refused.value)
    for part in (directory.root, "Spark application app-holder", f"pid {first.pid}", "running since",
                 "last renewed", "every 10 s", "60 s", "on host"):
        assert part in message
    assert "app-second" not in message
    assert {term: directory.fs.read_bytes(directory.fs.join(directory.root, "lease", f"{term:012d}"))
            for term in directory.lease_terms()} == before
    with pytest.raises(JobDirectoryInUseError, match=f"pid {first.pid}"):
        check_free(directory)


def test_a_start_in_the_holders_own_process_is_refused_too(place):
    directory = job_directory(place)
    with JobLease.acquire(directory, "first"):
        with pytest.raises(JobDirectoryInUseError, match="first on host"):
            JobLease.acquire(directory, "second")


def test_a_released_lease_is_taken_at_once(place, holders):
    first = holders(place)
    first.say("release")
    assert first.line() == "released"
    directory = job_directory(place)
    assert holder(directory) is None
    with JobLease.acquire(directory, "next") as lease:
        assert holder(directory).token == lease.record.token
        assert directory.lease_terms() == [lease.term]  # the older term is gone
    assert holder(directory) is None
    assert directory.read_lease(lease.term).released_at_ms is not None


def test_a_dead_holders_lease_is_taken_over_at_once_on_its_machine(place, holders):
    first = holders(place, expires_after_ms=3_600_000)
    os.kill(first.pid, signal.SIGKILL)
    first.process.wait()
    began = time.monotonic()
    with JobLease.acquire(job_directory(place), "restart") as lease:
        assert time.monotonic() - began < 2
        assert lease.lost is None


def test_a_holder_that_exits_without_releasing_is_taken_over_at_once(place, holders):
    first = holders(place, expires_after_ms=3_600_000)
    first.say("exit")
    first.process.wait()
    JobLease.acquire(job_directory(place), "restart").close()


def test_a_lease_from_another_machine_is_live_until_it_expires(place):
    directory = job_directory(place)
    with JobLease.acquire(directory, "here") as mine:
        elsewhere = replace(mine.record, machine="elsewhere/boot/ns", host="elsewhere", pid=1)
    # A record as a job on another machine leaves it when it dies: unreleased, its pid meaningless here.
    now_ms = time.time_ns() // 1_000_000
    directory.create_lease(mine.term + 1, replace(elsewhere, renewed_at_ms=now_ms, expires_after_ms=1_500))
    with pytest.raises(JobDirectoryInUseError, match="on host elsewhere, pid 1,.* not been renewed for 1.5 s"):
        JobLease.acquire(directory, "restart")
    time.sleep(1.6)
    with JobLease.acquire(directory, "restart") as lease:
        assert lease.term == mine.term + 2


def test_a_stalled_holder_loses_its_lease_once_it_expires_and_finds_out(place, holders):
    first = holders(place, renew_every_ms=200, expires_after_ms=1_500)
    directory = job_directory(place)
    os.kill(first.pid, signal.SIGSTOP)  # alive, but renews no more
    try:
        with pytest.raises(JobDirectoryInUseError):
            JobLease.acquire(directory, "too early")
        time.sleep(1.6)
        lease = JobLease.acquire(directory, "takeover")
    finally:
        os.kill(first.pid, signal.SIGCONT)
    with lease:
        assert first.line().startswith(f"lost: the lease of {directory.root} is no longer this job's (takeover on ")
        assert holder(directory).token == lease.record.token


def test_renewal_keeps_the_lease_live_past_its_expiry(place, holders):
    first = holders(place, renew_every_ms=200, expires_after_ms=1_000)
    directory = job_directory(place)
    renewed = holder(directory).renewed_at_ms
    time.sleep(1.5)
    lease = holder(directory)
    assert lease is not None and lease.pid == first.pid and lease.renewed_at_ms > renewed
    with pytest.raises(JobDirectoryInUseError):
        JobLease.acquire(directory, "second")


def test_stopping_renewal_and_releasing_happen_on_close(place):
    directory = job_directory(place)
    lease = JobLease.acquire(directory, "job", renew_every_ms=50)
    time.sleep(0.3)
    lease.close()
    released = directory.read_lease(lease.term)
    assert released.released_at_ms is not None and not lease._thread.is_alive()
    time.sleep(0.2)
    assert directory.read_lease(lease.term) == released  # no renewal after the release
    lease.close()  # again: nothing
    assert directory.read_lease(lease.term) == released


@pytest.mark.parametrize("round_", range(3))
def test_of_starts_at_the_same_moment_exactly_one_wins(place, round_):
    directory = job_directory(place)
    starts, barrier = 6, threading.Barrier(6)
    won, refused = [], []

    def start(i: int) -> None:
        own = JobDirectory(filesystem_for(*place), place[0])  # a file system (client) of its own
        barrier.wait()
        try:
            won.append(JobLease.acquire(own, f"start {i}"))
        except JobDirectoryInUseError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=start, args=(i,)) for i in range(starts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(won) == 1 and len(refused) == starts - 1
        assert all(f"{won[0].record.holder} on host" in message for message in refused)
        assert holder(directory).token == won[0].record.token
    finally:
        for lease in won:
            lease.close()


def test_a_directory_holding_only_its_lease_is_empty(tmp_path):
    directory = JobDirectory(LocalFileSystem(), str(tmp_path / "job"))
    with JobLease.acquire(directory, "job"):
        assert directory.is_empty() and not directory.holds_a_job()


def test_create_new_refuses_an_existing_file_and_leaves_it(place):
    directory = job_directory(place)
    fs, path = directory.fs, directory.fs.join(directory.root, "x", "file")
    fs.create_new(path, b"first")
    with pytest.raises(FileExistsError, match="exists"):
        fs.create_new(path, b"second")
    assert fs.read_bytes(path) == b"first"
    assert fs.list_names(fs.join(directory.root, "x")) == ["file"]  # no temporary file left
