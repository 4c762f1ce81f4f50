"""What a run measures: per-batch times from Spark's query progress, peak memory,
and the bytes a checkpoint directory holds."""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime


__all__ = ["Batch", "RunResult", "MemorySampler", "batches_of", "directory_bytes", "summarize", "pool",
           "CpuSnapshot", "cpu_snapshot", "cpu_used", "thread_kind", "CPU_KINDS"]

_MB = 1024 * 1024


@dataclass
class Batch:
    """One micro-batch (or Bytewax epoch): its input rows, its time and where it went."""

    rows: int
    ms: float
    #: Spark's ``durationMs`` parts (addBatch, getBatch, queryPlanning, walCommit, ...).
    parts: dict[str, float] = field(default_factory=dict)
    #: Wall-clock end of the batch (seconds since the epoch).
    end_s: float = 0.0


@dataclass
class RunResult:
    """One implementation run over one data set."""

    name: str
    distribution: str
    keys: int
    batch_rows: int
    rows: int = 0
    rows_per_s: float = 0.0
    median_batch_ms: float = 0.0
    #: The 99th percentile of the measured batches' times (nearest rank).
    p99_batch_ms: float = 0.0
    peak_driver_mb: float | None = None
    #: The JVM's peak RSS (``MemorySampler.jvm_rss_mb``); None in older results.
    peak_jvm_rss_mb: float | None = None
    peak_worker_mb: float | None = None
    checkpoint_bytes_per_batch: float | None = None
    #: Bytes on disk by part of the checkpoint directory (``spark``, ``checkpoints``, ``clock``, ...);
    #: for this project's jobs, ``checkpoints`` counts every checkpoint the key groups wrote.
    checkpoint_bytes: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    ratio: float | None = None
    #: The run this one is compared with (``ratio``).
    baseline: str | None = None
    batches: list[Batch] = field(default_factory=list)
    #: Mean of each ``durationMs`` part over the measured batches.
    mean_parts_ms: dict[str, float] = field(default_factory=dict)
    #: The machine's 1-minute load average at the end of the run (other processes count too).
    load_average: float = 0.0
    #: CPU seconds the run used, by kind (``cpu_used``); empty where ``/proc`` is not.
    cpu_s: dict[str, float] = field(default_factory=dict)
    #: Of a pooled result (``pool``): each run's rate, median batch, wall and CPU seconds.
    runs: list[dict] = field(default_factory=list)
    #: The lowest, median and highest of the per-run ratios behind ``ratio`` (``ratio_spread``).
    ratio_spread: tuple[float, float, float] | None = None
    #: Key groups of this project's job that decoded their table, over its micro-batches
    #: (``BatchProgress.decoded_groups``: a Python worker took over a group another one
    #: served last); None for native runs and in older results.
    decoded_groups: int | None = None
    note: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def batches_of(query) -> list[Batch]:
    """The micro-batches of a finished Spark query, from its recent progress."""
    out = []
    for progress in query.recentProgress:
        durations = dict(progress.durationMs)
        total = float(durations.pop("triggerExecution", 0))
        start = datetime.fromisoformat(progress.timestamp.replace("Z", "+00:00")).timestamp()
        parts = {k: float(v) for k, v in durations.items()}
        for operator in progress.stateOperators:
            # Inside addBatch: the stateful operator's state updates and state store commit.
            parts["state update"] = parts.get("state update", 0.0) + operator.allUpdatesTimeMs
            parts["state commit"] = parts.get("state commit", 0.0) + operator.commitTimeMs
        out.append(Batch(int(progress.numInputRows), total, parts, start + total / 1000))
    return out


def summarize(result: RunResult, batches: list[Batch]) -> RunResult:
    """Fills the rates of ``result``: the first batch with input (start-up, Python
    workers, code generation) is left out unless it is the only one."""
    result.batches = batches
    result.rows = sum(b.rows for b in batches)
    result.load_average = round(os.getloadavg()[0], 2)
    return _rates(result, _measured(batches))


def pool(results: list[RunResult]) -> RunResult:
    """One result of repeated runs of one implementation over one data set: the rates
    over the measured batches of all of them (each run's own rate in ``note``)."""
    pooled = dataclasses.replace(results[-1], batches=[b for r in results for b in r.batches])
    pooled.rows = sum(r.rows for r in results)
    pooled.wall_s = sum(r.wall_s for r in results)
    pooled.cpu_s = {kind: round(sum(r.cpu_s.get(kind, 0.0) for r in results), 2)
                    for kind in dict.fromkeys(k for r in results for k in r.cpu_s)}
    pooled.runs = [{"rows_per_s": round(r.rows_per_s), "median_batch_ms": r.median_batch_ms,
                    "wall_s": round(r.wall_s, 1), "cpu_s": r.cpu_s} for r in results]
    each = ", ".join(f"{r.rows_per_s:,.0f}" for r in results)
    pooled.note = f"{len(results)} runs pooled ({each} rows/s)"
    decoded = [r.decoded_groups for r in results]
    pooled.decoded_groups = None if None in decoded else sum(decoded)
    return _rates(pooled, [b for r in results for b in _measured(r.batches)])


def ratio_spread(result: RunResult, baseline: RunResult) -> tuple[float, float, float] | None:
    """The lowest, median and highest ratio of a run of ``result`` to the run of
    ``baseline`` it took turns with (run ``i`` of each pool); None unless both are pools
    of as many runs."""
    pairs = list(zip(result.runs, baseline.runs))
    if len(pairs) < 2 or len(result.runs) != len(baseline.runs) or not all(b["rows_per_s"] for _, b in pairs):
        return None
    ratios = [a["rows_per_s"] / b["rows_per_s"] for a, b in pairs]
    return round(min(ratios), 3), round(statistics.median(ratios), 3), round(max(ratios), 3)


def _measured(batches: list[Batch]) -> list[Batch]:
    first = next((i for i, b in enumerate(batches) if b.rows), None)
    if first is None:
        return []
    return batches[first + 1:] if any(b.rows for b in batches[first + 1:]) else batches[first:]


def _rates(result: RunResult, measured: list[Batch]) -> RunResult:
    if not measured:
        return result
    rows, ms = sum(b.rows for b in measured), sum(b.ms for b in measured)
    result.rows_per_s = rows / ms * 1000 if ms else 0.0
    with_rows = [b for b in measured if b.rows]
    result.median_batch_ms = statistics.median(b.ms for b in with_rows)
    times = sorted(b.ms for b in with_rows)
    result.p99_batch_ms = times[math.ceil(0.99 * len(times)) - 1]
    parts = sorted({p for b in with_rows for p in b.parts})
    result.mean_parts_ms = {p: statistics.fmean(b.parts.get(p, 0.0) for b in with_rows) for p in parts}
    return result


def directory_bytes(root: str) -> dict[str, int]:
    """Bytes of the files under each top-level entry of ``root``."""
    sizes: dict[str, int] = {}
    if not os.path.isdir(root):
        return sizes
    for entry in os.scandir(root):
        total = 0
        if entry.is_dir():
            for folder, _, names in os.walk(entry.path):
                total += sum(os.path.getsize(os.path.join(folder, n)) for n in names)
        else:
            total = entry.stat().st_size
        sizes[entry.name] = total
    return sizes


#: What uses the CPU in a Spark run (``cpu_used``): the JVM's threads by the first
#: characters of their names (Linux keeps 15), then the Python processes.
_JVM_THREADS = (("jit", ("C1 CompilerThre", "C2 CompilerThre")),
                ("gc", ("GC Thread", "G1 ", "VM Thread")),
                ("tasks", ("Executor task",)))
CPU_KINDS = ("jit", "gc", "tasks", "jvm other", "jvm commands", "python workers", "python driver")


@dataclass
class CpuSnapshot:
    """CPU seconds used so far by the benchmark's process and what runs under it."""

    #: Each live thread of the JVM: ``tid -> (kind, seconds)``.
    threads: dict[int, tuple[str, float]] = field(default_factory=dict)
    #: The JVM's own seconds, its ended threads' included.
    jvm: float = 0.0
    #: Processes the JVM ran and reaped: Hadoop's local file system runs ``chmod`` and
    #: ``readlink`` for files of Spark's checkpoint, dozens a micro-batch.
    commands: float = 0.0
    #: Spark's Python processes, live ones and those the JVM or they reaped.
    python_workers: float = 0.0
    #: The benchmark's own process.
    python_driver: float = 0.0


def cpu_snapshot(process) -> CpuSnapshot | None:
    """What ``process`` (a ``psutil.Process``, the benchmark's own) and the processes
    under it used so far (``CpuSnapshot``); None without ``/proc`` (Linux)."""
    import psutil

    if not os.path.isdir("/proc/self/task"):
        return None
    times = process.cpu_times()
    snapshot = CpuSnapshot(python_driver=times.user + times.system)
    for child in process.children(recursive=True):
        try:
            times = child.cpu_times()
            if child.name() == "java":
                snapshot.threads.update(_jvm_threads(child.pid))
                snapshot.jvm += times.user + times.system
                snapshot.commands += times.children_user + times.children_system
            elif child.name().startswith("python"):
                snapshot.python_workers += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass  # a process that ended meanwhile: its parent's children times hold it
    return snapshot


def cpu_used(before: CpuSnapshot | None, after: CpuSnapshot | None) -> dict[str, float]:
    """CPU seconds used between two snapshots, by kind (``CPU_KINDS``): of the JVM,
    HotSpot's compilers (``jit``), its garbage collectors (``gc``), Spark's task threads
    (``tasks``) and the rest (``jvm other``: the driver's threads, schedulers, listeners,
    each query's stream execution thread, and whatever threads ended in between); the
    processes the JVM ran and reaped (``jvm commands``); Spark's Python processes, their
    ended workers included (``python workers``); the benchmark's own (``python
    driver``). Empty without snapshots."""
    if before is None or after is None:
        return {}
    used = dict.fromkeys(CPU_KINDS, 0.0)
    for tid, (kind, seconds) in after.threads.items():
        if kind != "jvm other":
            used[kind] += seconds - before.threads.get(tid, (kind, 0.0))[1]
    used["jvm other"] = after.jvm - before.jvm - used["jit"] - used["gc"] - used["tasks"]
    used["jvm commands"] = after.commands - before.commands
    used["python workers"] = after.python_workers - before.python_workers
    used["python driver"] = after.python_driver - before.python_driver
    return {kind: round(seconds, 2) for kind, seconds in used.items()}


def _jvm_threads(pid: int) -> dict[int, tuple[str, float]]:
    """``tid -> (kind, CPU seconds)`` of each live thread of process ``pid``, from
    ``/proc/<pid>/task/<tid>/stat`` (``pid (name) state ...``: user and system time are
    the 12th and 13th fields after the name)."""
    tick = os.sysconf("SC_CLK_TCK")
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # a thread that ended meanwhile
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        threads[int(tid)] = (thread_kind(name), (int(fields[11]) + int(fields[12])) / tick)
    return threads


def thread_kind(name: str) -> str:
    """The kind (``CPU_KINDS``) of the JVM's thread named ``name``."""
    return next((kind for kind, prefixes in _JVM_THREADS if name.startswith(prefixes)), "jvm other")


class MemorySampler:
    """Samples, a few times a second, the JVM's used heap plus this process's RSS
    (``driver``: in local mode the JVM also runs the executors' JVM side), the JVM's
    RSS (``jvm_rss``: its heap as far as it is touched and the memory off the heap,
    RocksDB's among it), and the summed RSS of the Python worker processes under the
    JVM above theirs on entering (``workers``: Spark keeps its Python workers for the
    session, and what they hold of an earlier run is not this one's); and the CPU
    seconds used between entering and leaving, by kind (``cpu_s``, ``cpu_used``)."""

    def __init__(self, spark=None, interval_s: float = 0.2):
        import psutil

        self._psutil = psutil
        self.interval_s = interval_s
        self._runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime() if spark else None
        self._me = self._psutil.Process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.driver_mb = 0.0
        self.jvm_rss_mb = 0.0
        self.workers_mb = 0.0
        self._workers_before_mb = 0.0
        self.cpu_s: dict[str, float] = {}
        self._cpu_before: CpuSnapshot | None = None

    def _jvm_used(self) -> int:
        if self._runtime is None:
            return 0
        return self._runtime.totalMemory() - self._runtime.freeMemory()

    def _rss(self, *names: str) -> list[int]:
        """The summed RSS of the processes under this one whose name starts with each of
        ``names``, in one walk of the process tree."""
        totals = [0] * len(names)
        for child in self._me.children(recursive=True):
            try:
                name = child.name()
                for i, prefix in enumerate(names):
                    if name.startswith(prefix):
                        totals[i] += child.memory_info().rss
            except self._psutil.Error:
                pass
        return totals

    def sample(self) -> None:
        driver = (self._jvm_used() + self._me.memory_info().rss) / _MB
        self.driver_mb = max(self.driver_mb, driver)
        jvm, workers = self._rss("java", "python")
        self.jvm_rss_mb = max(self.jvm_rss_mb, jvm / _MB)
        self.workers_mb = max(self.workers_mb, workers / _MB - self._workers_before_mb)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> MemorySampler:
        if self._runtime is not None:
            self._runtime.gc()
        self._workers_before_mb = self._rss("python")[0] / _MB
        self.sample()
        self._cpu_before = cpu_snapshot(self._me)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
        self.cpu_s = cpu_used(self._cpu_before, cpu_snapshot(self._me))
