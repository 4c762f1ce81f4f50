"""A job directory's lease: one job at a time on a checkpoint directory.

A job takes its directory's lease before it writes there (``JobLease.acquire``),
renews it every ``RENEW_EVERY_MS`` from a daemon thread while it runs, and releases it
when it stops (``JobLease.close``). A second job on the directory is refused at once
(``JobDirectoryInUseError``, naming the holder), before it writes anything. As Kafka
Streams locks its state directory, so that two instances never write one state.

The lease is a record per **term**, ``DIR/lease/<term>`` (``records.Lease``); the
newest term's record says who holds the directory. A lease is **live** while it is
not released, was renewed within its ``expires_after_ms`` (``EXPIRES_AFTER_MS``) by
the reader's clock, and, when the reader runs on the holder's machine
(``machine``), the holder's process is alive. So a crashed job's restart on the same
machine takes the directory over at once, and a restart anywhere else once the lease
has expired.

Taking the lease: when the newest term ``n`` is not live, create term ``n + 1`` with
``FileSystem.create_new``: of two starts at the same moment, one creates it and the
other finds it there, live, and is refused. The winner then reads its record back
(on an object store, whose create is not atomic, the later write wins, and the
earlier writer sees another token) and lists the terms (a newer one means another
start won); then it deletes the older terms. The newest term is never deleted
(releasing marks it released), so terms only grow: a start that looked long ago and
creates a term deleted since loses to the newer term it then lists. A holder that
finds a newer term, or another token, when it renews has lost the lease (it stopped
renewing for longer than the expiry): it stops renewing and reports it.
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from persistent.core.errors import JobDirectoryInUseError
from persistent.storage.job_directory import JobDirectory
from persistent.storage.records import Lease
from state.errors import StateError

__all__ = ["JobLease", "RENEW_EVERY_MS", "EXPIRES_AFTER_MS", "holder", "machine", "process_start", "describe",
           "check_free"]

#: How often a job renews its lease.
RENEW_EVERY_MS = 10_000
#: How long an unrenewed lease stays live: six renewals missed.
EXPIRES_AFTER_MS = 60_000
#: How often an acquirer looks again when starts at the same moment keep taking new terms.
_ATTEMPTS = 3


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _iso(timestamp_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="seconds")


def _read_first_line(path: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def machine() -> str:
    """Where this process's pid means this process: the host name, the boot (Linux's
    boot id) and the pid namespace (a container's own). Equal for two processes
    exactly when one can look the other's pid up."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}/{_read_first_line('/proc/sys/kernel/random/boot_id')}/{namespace}"


def process_start(pid: int) -> int | None:
    """When process ``pid`` of this machine started (clock ticks after boot), None when
    it is not running (or a zombie: killed, not yet reaped) or cannot be looked up."""
    stat = _read_first_line(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


def _live(lease: Lease, now_ms: int) -> bool:
    if lease.released_at_ms is not None or now_ms - lease.renewed_at_ms >= lease.expires_after_ms:
        return False
    # On the holder's machine its process tells: a crashed job's restart takes over at
    # once. Its pid taken by a later process counts as gone.
    return lease.machine != machine() or process_start(lease.pid) == lease.pid_started


def holder(directory: JobDirectory, now_ms: int | None = None) -> Lease | None:
    """The live lease of ``directory`` (at wall time ``now_ms``), None when it is free."""
    return _newest_live(directory, now_ms or _now_ms())[1]


def _newest_live(directory: JobDirectory, now_ms: int) -> tuple[int, Lease | None]:
    """The newest term (0 for none) and its lease when it is live."""
    terms = directory.lease_terms()
    if not terms:
        return 0, None
    lease = directory.read_lease(terms[-1])
    if lease is None:  # deleted since the listing: a newer term took over
        return _newest_live(directory, now_ms)
    return terms[-1], lease if _live(lease, now_ms) else None


def describe(lease: Lease, now_ms: int) -> str:
    """Who holds the lease and how fresh it is, for messages and ``persistent status``."""
    return (
        f"{lease.holder} on host {lease.host}, pid {lease.pid}, running since {_iso(lease.started_at_ms)}, "
        f"lease last renewed {_iso(lease.renewed_at_ms)} ({(now_ms - lease.renewed_at_ms) / 1000:.0f} s ago)"
    )


def _in_use(directory: JobDirectory, lease: Lease, now_ms: int) -> JobDirectoryInUseError:
    return JobDirectoryInUseError(
        f"{directory.root} is in use by another job: {describe(lease, now_ms)}. Only one job may run on a "
        f"checkpoint directory: stop that one first. A running job renews its lease every "
        f"{lease.renew_every_ms / 1000:g} s; if that one has died, a start on {lease.host} takes the directory "
        f"over at once, a start elsewhere once the lease has not been renewed for "
        f"{lease.expires_after_ms / 1000:g} s (at {_iso(lease.renewed_at_ms + lease.expires_after_ms)})"
    )


def check_free(directory: JobDirectory) -> None:
    """Raises ``JobDirectoryInUseError`` naming the holder when ``directory``'s lease is live."""
    now_ms = _now_ms()
    lease = holder(directory, now_ms)
    if lease is not None:
        raise _in_use(directory, lease, now_ms)


class JobLease:
    """The lease a process holds on a job directory (``acquire``), renewed from a daemon
    thread until ``close`` releases it. Use it as a context manager, or close it."""

    def __init__(self, directory: JobDirectory, term: int, record: Lease,
                 report: Callable[[str], None]):
        self.directory, self.term, self.record = directory, term, record
        self._report = report
        #: Why the lease was lost to another holder, None while held.
        self.lost: str | None = None
        self._on_lost: Callable[[str], None] | None = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._renew_until_closed, daemon=True,
                                        name=f"lease of {directory.root}")

    @classmethod
    def acquire(cls, directory: JobDirectory, holder: str, renew_every_ms: int = RENEW_EVERY_MS,
                expires_after_ms: int = EXPIRES_AFTER_MS,
                report: Callable[[str], None] = lambda message: None) -> JobLease:
        """Takes ``directory``'s lease for ``holder`` (what the messages call this
        process: the Spark application, the command) and starts renewing it every
        ``renew_every_ms``; ``report`` hears when a renewal fails. Raises
        ``JobDirectoryInUseError`` naming the holder while another holds it live."""
        now_ms = _now_ms()
        record = Lease(token=uuid.uuid4().hex, host=socket.gethostname(), machine=machine(), pid=os.getpid(),
                       pid_started=process_start(os.getpid()), holder=holder, started_at_ms=now_ms, renewed_at_ms=now_ms,
                       renew_every_ms=renew_every_ms, expires_after_ms=expires_after_ms)
        for _ in range(_ATTEMPTS):
            newest, live = _newest_live(directory, _now_ms())
            if live is not None:
                raise _in_use(directory, live, _now_ms())
            term = newest + 1
            try:
                directory.create_lease(term, record)
            except FileExistsError:
                continue  # another start took this term: look at it
            if cls._won(directory, term, record):
                for older in directory.lease_terms():
                    if older < term:
                        directory.delete_lease(older)
                lease = cls(directory, term, record, report)
                lease._thread.start()
                return lease
        newest, live = _newest_live(directory, _now_ms())
        if live is not None:
            raise _in_use(directory, live, _now_ms())
        raise JobDirectoryInUseError(
            f"{directory.root}: {_ATTEMPTS} starts at the same moment took the lease from under this one; try again"
        )

    @staticmethod
    def _won(directory: JobDirectory, term: int, record: Lease) -> bool:
        """Whether ``term``, just created with ``record``, holds: its record is ours and no
        newer term exists. A lost term is deleted (a newer one exists, so it is not the newest)."""
        written = directory.read_lease(term)
        newest = directory.lease_terms()[-1]
        if written is not None and written.token == record.token and newest == term:
            return True
        if written is not None and written.token == record.token:
            directory.delete_lease(term)
        return False

    def when_lost(self, callback: Callable[[str], None]) -> None:
        """Calls ``callback`` with the reason when a renewal finds the lease taken over
        (at once if it already was)."""
        with self._lock:
            self._on_lost = callback
            lost = self.lost
        if lost is not None:
            callback(lost)

    def renew(self) -> None:
        """Renews the lease now; finds out whether it was lost (``lost``)."""
        terms = self.directory.lease_terms()
        current = self.directory.read_lease(self.term)
        if current is None or current.token != self.record.token or terms[-1] != self.term:
            self._lose()
            return
        self.record = replace(self.record, renewed_at_ms=_now_ms())
        self.directory.record_lease(self.term, self.record)

    def _lose(self) -> None:
        now_ms = _now_ms()
        taker = holder(self.directory, now_ms)
        by = describe(taker, now_ms) if taker is not None else "no live holder now"
        reason = (
            f"the lease of {self.directory.root} is no longer this job's ({by}): a lease not renewed for "
            f"{self.record.expires_after_ms / 1000:g} s is free to take, and another job may write there now"
        )
        with self._lock:
            self.lost, callback = reason, self._on_lost
        self._stopped.set()
        if callback is not None:
            callback(reason)

    def _renew_until_closed(self) -> None:
        failing = False
        while not self._stopped.wait(self.record.renew_every_ms / 1000):
            try:
                self.renew()
                failing = False
            except (OSError, StateError) as exc:
                if not failing:  # once per spell of failures
                    self._report(f"cannot renew the lease of {self.directory.root} (trying again): {exc}")
                failing = True

    def close(self) -> None:
        """Stops renewing and releases the lease (unless it was lost); again, nothing."""
        if self._stopped.is_set():  # closed, or lost
            return
        self._stopped.set()
        self._thread.join()
        self.directory.record_lease(self.term, replace(self.record, released_at_ms=_now_ms()))

    def __enter__(self) -> JobLease:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
