"""Runs an example with ``spark-submit`` and kills it for real.

A run is started in a session of its own, so SIGKILL reaches every process of the
job: the driver JVM, its Python driver, PySpark's worker daemon (which moves into a
process group of its own) and the Python workers, and on a ``local-cluster`` master
the executor JVMs. Kills happen at a named crash point (``persistent.storage.faults``) or
after a random delay; the seed of the random choices is printed, and setting
``PERSISTENT_CRASH_SEED`` replays them.

A kill is followed by a restart, so while a run that is to be killed runs, the next
run is started as a standby (``persistent.tools.standby``): its JVM and Spark session
start, and it waits for its gate file before it looks at the job. The next run opens
the gate, writing its crash point into the file. A standby no run took is killed after
its test (``stop_standbys``, an autouse fixture of ``conftest``).

Each run's JVM keeps its temporary files (``java.io.tmpdir``: Spark's local directories
with the jars of ``--packages``, 60 MB with Kafka's) in a directory of the run's own,
removed once the run has ended: a killed JVM cannot remove its own.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pyspark.find_spark_home import _find_spark_home

from persistent.storage.faults import CrashPoint
from persistent.storage.checkpoint_store import CheckpointStore
from persistent.storage.fs import FileSystem, LocalFileSystem

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def checkpoints_of_changes(directory: Path, at_ms: int | None = None) -> int:
    """How many key group checkpoints in job directory ``directory`` (those at ``at_ms``,
    if given) hold the changes to an earlier one: a test's runs restored from chains."""
    fs, root = LocalFileSystem(), str(directory / "checkpoints")
    stores = [CheckpointStore(fs, root, task) for task in fs.list_names(root)]
    return sum(store.read(time_ms).base is not None
               for store in stores for time_ms in store.times() if at_ms in (None, time_ms))


@dataclass(frozen=True)
class Outcome:
    """How one run of the job ended."""

    killed: bool
    returncode: int
    log: str


def interrupt_when(job: subprocess.Popen, log: Path, ready, timeout_s: float = 180) -> int:
    """Sends SIGINT to the process group of ``job`` (started in a session of its own,
    writing ``log``), as a terminal's Ctrl-C does, once ``ready()``; returns its exit
    status. A job that ends first, or does not end within 60 s of the signal, fails the
    test (the group killed)."""
    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert job.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
        os.killpg(job.pid, signal.SIGINT)
        return job.wait(60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def _pids() -> Iterator[int]:
    """The pids /proc lists now."""
    return (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())


def session_processes(session: int) -> list[int]:
    """The live pids whose session id is ``session``."""
    pids = []
    for pid in _pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":  # zombies are dead, only unreaped
            pids.append(pid)
    return pids



def python_workers(session: int) -> list[int]:
    """The PySpark worker daemons of ``session`` and the Python workers they forked."""
    return [pid for pid in session_processes(session) if b"pyspark.daemon" in _cmdline(pid)]

def jvm_processes(main_class: str, mark: str) -> list[int]:
    """The live JVMs that run ``main_class`` with ``mark`` in their command line (within
    any argument): a YARN container's, by its application's id."""
    return [pid for pid in _pids() if main_class.encode() in (arguments := _cmdline(pid).split(b"\0"))
            and any(mark.encode() in argument for argument in arguments)]


#: The standbys started and not yet taken by a run.
_STANDBYS: set[subprocess.Popen] = set()

#: The temporary directory of each run's JVM, by the run's session.
_TEMPORARY: dict[int, Path] = {}


def stop_standbys() -> None:
    """Kills every standby no run took."""
    while _STANDBYS:
        _end_run(_STANDBYS.pop().pid)


def _end_run(session: int) -> None:
    """Kills what is left of the run of ``session`` and removes its JVM's temporary files."""
    kill_session(session)
    shutil.rmtree(_TEMPORARY.pop(session), ignore_errors=True)


def kill_session(session: int) -> None:
    """SIGKILL to every process of ``session`` until none is left."""
    for _ in range(50):
        pids = session_processes(session)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    raise RuntimeError(f"processes of session {session} survive SIGKILL: {session_processes(session)}")


class Crasher:
    """Runs ``examples/EXAMPLE.py ARGS`` (or the script at the path ``example``) again and
    again in ``workdir``; ``submit`` holds more spark-submit options. With ``standby``,
    a run to be killed, or one started with ``standby_next``, has the next one start as
    its standby."""

    def __init__(self, example: str | Path, args: list[str], workdir: Path, master: str = "local[2]",
                 seed: int | None = None, submit: tuple[str, ...] = (), standby: bool = True):
        script = example if isinstance(example, Path) else EXAMPLES / f"{example}.py"
        self.command = [os.path.join(_find_spark_home(), "bin", "spark-submit"), "--master", master, *submit,
                        str(script), *args]
        self.workdir = workdir
        self.seed = int(os.environ.get("PERSISTENT_CRASH_SEED", seed if seed is not None else random.randrange(2**32)))
        self.random = random.Random(self.seed)
        self.runs = 0
        self.standby = standby
        #: The next run's standby: its process, log and gate.
        self._next: tuple[subprocess.Popen, Path, Path] | None = None
        print(f"crash harness: seed {self.seed} (PERSISTENT_CRASH_SEED={self.seed} replays it)", file=sys.stderr)

    def _launch(self, log: Path, env: dict[str, str]) -> subprocess.Popen:
        temporary = Path(tempfile.mkdtemp(prefix=f"{log.stem}-tmp-", dir=log.parent))
        options = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Djava.io.tmpdir={temporary}".strip()
        environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                       "SPARK_SUBMIT_OPTS": options, **env}
        with open(log, "wb") as out:
            process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT, env=environment,
                                       start_new_session=True)
        _TEMPORARY[process.pid] = temporary
        return process

    def _start(self, env: dict[str, str], standby_next: bool = False) -> tuple[subprocess.Popen, Path]:
        """Starts the next run with ``env`` (its standby's gate opened, if it has one);
        with ``standby_next`` also the standby of the run after it."""
        self.runs += 1
        if self._next is None:
            log = self.workdir / f"run-{self.runs:02d}.log"
            process = self._launch(log, env)
        else:
            process, log, gate = self._next
            self._next = None
            _STANDBYS.discard(process)
            if process.poll() is not None:
                raise AssertionError(f"the standby of run {self.runs} ended (exit {process.returncode}) before "
                                     f"its gate opened: does the application use run_app? log: {log}")
            spec = dict(env)
            written = gate.with_name(f"{gate.name}.tmp")
            written.write_text(spec.pop("PERSISTENT_CRASH_POINT", ""))
            assert not spec, f"a standby learns only its crash point, not {sorted(spec)}"
            written.rename(gate)
        if standby_next and self.standby:
            log_next, gate = self.workdir / f"run-{self.runs + 1:02d}.log", self.workdir / f"gate-{self.runs + 1:02d}"
            standby = self._launch(log_next, {"PERSISTENT_STANDBY": str(gate), "PERSISTENT_CRASH_POINT": f"@{gate}"})
            _STANDBYS.add(standby)
            self._next = (standby, log_next, gate)
        return process, log

    def _finish(self, process: subprocess.Popen, log: Path, kill: bool) -> Outcome:
        if kill:
            kill_session(process.pid)
        returncode = process.wait()
        _end_run(process.pid)  # also workers left behind by a job that ended on its own
        return Outcome(kill, returncode, log.read_text(errors="replace"))

    def _to_the_end(self, process: subprocess.Popen, log: Path, timeout_s: float) -> Outcome:
        """Lets the run end; fails the test when it does not in ``timeout_s``."""
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._finish(process, log, kill=True)
            raise AssertionError(f"run {self.runs} did not finish in {timeout_s} s (seed {self.seed}); log: {log}")
        return self._finish(process, log, kill=False)

    def run(self, timeout_s: float = 300, standby_next: bool = False) -> Outcome:
        """One run to its end. With ``standby_next`` (a test that runs the job again after)
        the next run starts meanwhile as its standby."""
        process, log = self._start({}, standby_next=standby_next)
        return self._to_the_end(process, log, timeout_s)

    def crash_at(self, point: CrashPoint, arrival: int, timeout_s: float = 300) -> Outcome:
        """Runs until the ``arrival``-th arrival at crash point ``point``, then kills the job.

        A run that ends before reaching the point fails the test: a crash test names
        points its runs reach.
        """
        marker = self.workdir / f"crashed-{self.runs + 1:02d}"
        process, log = self._start({"PERSISTENT_CRASH_POINT": f"{point}:{arrival}:{marker}"}, standby_next=True)
        if not self._wait(process, log, marker.exists, timeout_s):
            ended = self._finish(process, log, kill=False)
            raise AssertionError(f"run {self.runs} ended (exit {ended.returncode}) before crash point "
                                 f"{point}:{arrival} (seed {self.seed}); log: {log}")
        return self._finish(process, log, kill=True)

    def standby_waiting(self, timeout_s: float = 120) -> str:
        """The log of the next run's standby once it waits at its gate, Spark started."""
        assert self._next is not None, "no standby: only a run that was killed has one"
        process, log, gate = self._next
        deadline = time.monotonic() + timeout_s
        while "[persistent] standby: Spark started, waiting" not in log.read_text(errors="replace"):
            assert process.poll() is None and time.monotonic() < deadline, f"the standby does not wait; log: {log}"
            time.sleep(0.1)
        return log.read_text(errors="replace")

    def crash_and_lose_sparks_checkpoint(self, checkpoint: Path | str, points: list[tuple[CrashPoint, int]],
                                         fs: FileSystem | None = None) -> int:
        """``crash_at`` each ``(point, arrival)``; after a kill once the clock exists, deletes
        Spark's checkpoint (``CHECKPOINT/spark``, on ``fs``: by default the local file
        system) so the next start takes path B. Returns how many restarts are from the clock."""
        fs = fs or LocalFileSystem()
        from_clock = 0
        for point, arrival in points:
            self.crash_at(point, arrival)
            if fs.exists(f"{checkpoint}/clock"):
                fs.delete(f"{checkpoint}/spark")
                from_clock += 1
        return from_clock

    def crash_after_random_delay(self, low_s: float, high_s: float) -> Outcome:
        """Kills the job after a delay drawn from the seeded random source."""
        delay = self.random.uniform(low_s, high_s)
        process, log = self._start({}, standby_next=True)
        deadline = time.monotonic() + delay
        return self._finish(process, log, kill=self._wait(process, log, lambda: time.monotonic() >= deadline, delay + 5))

    def disturb_after(self, needle: str | Callable[[], bool], disturb, timeout_s: float = 300,
                      standby_next: bool = False) -> Outcome:
        """Once the log shows ``needle`` (or, a function, once ``needle()`` is true: for a
        driver that logs elsewhere), calls ``disturb(pid)`` with the job's process id (a
        fault outside the job: a server restarted, a process killed) and lets the job run
        to its end, whichever way it ends. With ``standby_next`` (a test that restarts the
        job after) the next run starts meanwhile as its standby."""
        process, log = self._start({}, standby_next=standby_next)
        ready = needle if callable(needle) else lambda: needle in log.read_text(errors="replace")
        if not self._wait(process, log, ready, timeout_s):
            self._finish(process, log, kill=False)
            raise AssertionError(f"the job ended before {needle!r} {'held' if callable(needle) else 'appeared'}; "
                                 f"log: {log}")
        try:
            disturb(process.pid)
        except BaseException:
            self._finish(process, log, kill=True)
            raise
        return self._to_the_end(process, log, timeout_s)

    def kill_one_executor_after(self, needle: str, timeout_s: float = 300) -> Outcome:
        """Once the log shows ``needle``, SIGKILLs one executor JVM (``local-cluster``
        masters) and lets the job run to its end: Spark must retry the lost tasks."""

        def kill_an_executor(job: int) -> None:
            executors = [pid for pid in session_processes(job) if b"CoarseGrainedExecutorBackend" in _cmdline(pid)]
            if not executors:
                raise AssertionError("no executor process found: is the master local-cluster?")
            os.kill(executors[0], signal.SIGKILL)

        return self.disturb_after(needle, kill_an_executor, timeout_s)

    def kill_executor_at(self, point: CrashPoint, arrival: int, timeout_s: float = 300) -> Outcome:
        """Runs until the ``arrival``-th arrival at crash point ``point`` in a Python worker
        (``local-cluster`` masters), SIGKILLs the executor JVM that runs it and the worker,
        and lets the job run to its end: Spark must retry the lost task elsewhere."""
        marker = self.workdir / f"crashed-{self.runs + 1:02d}"
        process, log = self._start({"PERSISTENT_CRASH_POINT": f"{point}:{arrival}:{marker}"})
        if not self._wait(process, log, lambda: marker.exists() and marker.read_text(), timeout_s):
            raise AssertionError(f"the job ended before crash point {point}:{arrival}; log: {log}")
        worker = int(marker.read_text())
        executor = next((pid for pid in _ancestors(worker) if b"CoarseGrainedExecutorBackend" in _cmdline(pid)), None)
        if executor is None:
            self._finish(process, log, kill=True)
            raise AssertionError(f"process {worker} at {point} runs in no executor: is the master local-cluster?")
        os.kill(executor, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # it may end with its executor first
            os.kill(worker, signal.SIGKILL)
        return self._to_the_end(process, log, timeout_s)

    def _wait(self, process: subprocess.Popen, log: Path, condition, timeout_s: float) -> bool:
        """True when ``condition`` came true while the process ran; False when it ended
        first. When neither happens in ``timeout_s``, kills the job and fails the test."""
        deadline = time.monotonic() + timeout_s
        while process.poll() is None:
            if condition():
                return True
            if time.monotonic() > deadline:
                self._finish(process, log, kill=True)
                raise AssertionError(f"run {self.runs} neither ended nor got there in {timeout_s} s "
                                     f"(seed {self.seed}); log: {log}")
            time.sleep(0.1)
        return False


def _ancestors(pid: int) -> list[int]:
    """``pid``'s parent, its parent, and so on."""
    found = []
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        found.append(pid)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
