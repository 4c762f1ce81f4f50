"""Benchmark: keyed count and sum over the same events, native Spark against this
project's tasks (and a Python peer), with checkpointing on and a no-op sink.

    python bench/run.py [--events N] [--keys 1000,100000] [--batch-rows N] [--only NAME,...] [--out DIR]

The input is generated once (Parquet, one file per micro-batch) and every
implementation reads it with Spark's file source, one file per trigger, in this
one process and SparkSession. Prints a table and writes ``DIR/results.json``,
``DIR/throughput.png`` and ``DIR/latency.png``. Spark runs hold the machine-wide
lock ``$PERSISTENT_SPARK_LOCK`` (default ``/tmp/persistent-spark.lock``).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import peer, report  # noqa: E402
from bench.data import BATCH_SPAN_MS, ZIPF_EXPONENT, Dataset, generate  # noqa: E402
from bench.measure import RunResult, pool, ratio_spread  # noqa: E402

#: Implementations, in the order they run over each data set.
NAMES = ("native", "per-key", "per-message", "vectorized", "no-checkpoints", "folded", "window", "folded-window",
         "native-window", "recovery", "small", "kafka", "latency", "scale", "demo", "bytewax")
#: Implementations that also run over skewed keys.
SKEWED = ("native", "vectorized", "folded", "bytewax")
#: Key counts at which the restart of the vectorized job is timed.
RECOVERY_KEYS = (100_000, 1_000_000)
#: What each implementation is compared with (itself: nothing; else native over the same data set).
BASELINES = {"window": "native-window", "folded-window": "native-window", "vectorized-small": "native-small",
             "vectorized-kafka": "native-kafka", "vectorized-kafka-out": "native-kafka-out",
             "native-scale": "native-rocksdb-scale", "native-rocksdb-scale": "native-rocksdb-scale",
             "vectorized-scale": "native-rocksdb-scale"}
#: Rows of a micro-batch in the small-batch case (``small``).
SMALL_BATCH_ROWS = 1_000
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_600_000, help="events per data set (default %(default)s)")
    p.add_argument("--keys", default="1000,100000,1000000", help="distinct key counts, comma-separated")
    p.add_argument("--skewed-keys", default="100000",
                   help=f"key counts that also run with skewed keys ({', '.join(SKEWED)}); empty for none")
    p.add_argument("--batch-rows", type=int, default=200_000, help="events per micro-batch (one file)")
    p.add_argument("--small-batches", type=int, default=20,
                   help=f"micro-batches of {SMALL_BATCH_ROWS:,} rows that native and vectorized run in the small-batch case")
    p.add_argument("--small-keys", type=int, default=10_000, help="distinct keys of the small-batch case")
    p.add_argument("--kafka-keys", default="100000",
                   help="key counts whose events native and vectorized also read from a real Kafka topic "
                        "(the case 'kafka'); empty for none")
    p.add_argument("--latency-rate", type=int, default=20_000,
                   help="records a second the latency case writes to its topic (default %(default)s)")
    p.add_argument("--latency-seconds", type=int, default=60,
                   help="seconds the latency case writes for, in each of its runs (default %(default)s)")
    p.add_argument("--latency-rounds", type=int, default=2,
                   help="runs of each implementation and trigger in the latency case, taking turns "
                        "(default %(default)s)")
    p.add_argument("--scale-keys", default="100000,10000000",
                   help="key counts of the case whose state grows (the case 'scale': native with Spark's "
                        "default state store and with RocksDB's and vectorized over --scale-events events each, "
                        "then restarts after a SIGKILL at the most keys); the growth of a batch's time is from the fewest keys "
                        "to the most; empty for none")
    p.add_argument("--scale-events", default="4000000",
                   help="events of each data set of the case 'scale', one number for all or one for each of "
                        "--scale-keys (default %(default)s)")
    p.add_argument("--scale-heap-keys", type=int, default=10_000_000,
                   help="the most keys at which the case 'scale' runs native Spark with its default state store, "
                        "which holds the state on the driver's heap here (default %(default)s)")
    p.add_argument("--per-key-batches", type=int, default=2,
                   help="micro-batches the per-key applyInPandasWithState runs (it is slow)")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs of native, vectorized, no-checkpoints and folded, taking turns, and of the windowed "
                        "jobs, taking turns, whose batches are pooled: the ratio of vectorized and no-checkpoints is "
                        "the cost of checkpoints, smaller than the machine's noise (default %(default)s)")
    p.add_argument("--only", help=f"comma-separated subset of: {', '.join(NAMES)}")
    p.add_argument("--out", default="bench/results", help="directory for results.json and the plots")
    p.add_argument("--work", help="directory for input and checkpoints (default: a temporary one, removed)")
    p.add_argument("--master", default="local[2]", help="Spark master (default %(default)s)")
    return p


def _int_list(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def _versions() -> dict:
    import numpy
    import pandas
    import pyarrow
    import pyspark

    versions = {"python": platform.python_version(), "pyspark": pyspark.__version__,
                "pandas": pandas.__version__, "pyarrow": pyarrow.__version__, "numpy": numpy.__version__}
    if peer.available():
        from importlib.metadata import version

        versions["bytewax"] = version("bytewax")
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    versions["java"] = java[0] if java else "?"
    return versions


def _machine() -> dict:
    model = "?"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    import psutil

    return {"cpu": model, "cores": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "system": platform.platform()}


def _targets(results: list[RunResult], demo_seconds: float | None, latency: list[dict],
             recovery: list[dict]) -> list[dict]:
    """The project's targets, as measured (reported, not asserted)."""
    targets = _Targets(results)
    targets.throughput()
    targets.checkpoints_and_windows()
    targets.scale(recovery)
    targets.kafka(latency)
    targets.small_batches()
    targets.add("make demo: seconds of examples/demo.py", demo_seconds, 30, higher_is_better=False)
    return targets.out


class _Targets:
    """The targets measured in ``results``, in the order of ``_targets``' sections."""

    def __init__(self, results: list[RunResult]):
        self.results = results
        self.out: list[dict] = []

    def find(self, name: str, keys: int, distribution: str = "uniform") -> RunResult | None:
        return next((r for r in self.results if r.name == name and r.keys == keys and r.distribution == distribution),
                    None)

    def add(self, what: str, value: float | None, goal: float, higher_is_better: bool = True, runs=None) -> None:
        """A target, unless its value was not measured."""
        if value is not None:
            met = value >= goal if higher_is_better else value <= goal
            self.out.append({"target": what, "measured": round(value, 3), "goal": goal, "met": met, "runs": runs})

    @staticmethod
    def ratio(a: RunResult | None, b: RunResult | None) -> float | None:
        return a.rows_per_s / b.rows_per_s if a and b and a.rows_per_s and b.rows_per_s else None

    def throughput(self) -> None:
        """Rows a second against native Spark's, and how batch times grow with the keys."""
        find, ratio = self.find, self.ratio
        for distribution, goal in (("uniform", 1.0), ("skewed", 0.9)):
            for keys in sorted({r.keys for r in self.results if r.distribution == distribution}):
                for name in ("vectorized", "folded"):
                    r = find(name, keys, distribution)
                    where = f"{keys:,} keys" + (", skewed" if distribution == "skewed" else "")
                    self.add(f"{name} / native rows/s at {where}", ratio(r, find("native", keys, distribution)),
                             goal, runs=r.ratio_spread if r else None)  # over native's runs (``run``)
        v, n = find("vectorized", 100_000), find("native", 100_000)
        self.add("vectorized / native rows/s at 100,000 keys, at the very least", ratio(v, n), 0.8,
                 runs=v.ratio_spread if v else None)
        m, k = find("per-message", 100_000), find("per-key", 100_000)
        self.add("per-message / native rows/s at 100,000 keys", ratio(m, n), 0.3)
        self.add("per-message / per-key applyInPandasWithState rows/s at 100,000 keys", ratio(m, k), 10)
        for name in ("vectorized", "native"):
            self.add(f"{name}: median batch time at 1,000,000 keys / at 100,000 keys",
                     _growth(find(name, 100_000), find(name, 1_000_000)), 1.5, higher_is_better=False)

    def checkpoints_and_windows(self) -> None:
        """What checkpoints cost, and the windowed jobs against native Spark's windows."""
        keys_run = sorted({r.keys for r in self.results})
        for keys in keys_run:
            cost = self.ratio(self.find("no-checkpoints", keys), self.find("vectorized", keys))
            self.add(f"cost of checkpoints and clock at {keys:,} keys (rows/s off / on - 1)",
                     None if cost is None else cost - 1, 0.10, higher_is_better=False)
        for keys in keys_run:
            for name in ("window", "folded-window"):
                r = self.find(name, keys)
                self.add(f"{name} / native window rows/s at {keys:,} keys",
                         self.ratio(r, self.find("native-window", keys)), 1.5 if keys >= 1_000_000 else 1.0,
                         runs=r.ratio_spread if r else None)

    def scale(self, recovery: list[dict]) -> None:
        """The scale case at its most keys: rows a second, batch growth, checkpoint bytes,
        memory a key and the restarts from a SIGKILL."""
        scale = sorted({r.keys for r in self.results if r.name == "vectorized-scale"})
        if not scale:
            return
        fewest, most = scale[0], scale[-1]
        native, v = self.find("native-rocksdb-scale", most), self.find("vectorized-scale", most)
        self.add(f"vectorized / native RocksDB rows/s at {most:,} keys", self.ratio(v, native), 1.0,
                 runs=v.ratio_spread if v else None)
        self.add(f"vectorized: median batch time at {most:,} keys / at {fewest:,} keys",
                 _growth(self.find("vectorized-scale", fewest), v), 1.3, higher_is_better=False)
        if v and native and v.checkpoint_bytes_per_batch and native.checkpoint_bytes_per_batch:
            self.add(f"checkpoint bytes a micro-batch at {most:,} keys, vectorized / native RocksDB's",
                     v.checkpoint_bytes_per_batch / native.checkpoint_bytes_per_batch, 1.0, higher_is_better=False)
        if v and native and report.memory_bytes_per_key(native):
            self.add(f"resident memory a key at {most:,} keys (JVM and Python workers), vectorized / native "
                     f"RocksDB's", report.memory_bytes_per_key(v) / report.memory_bytes_per_key(native), 1.0,
                     higher_is_better=False)
        restarts = {(r.get("implementation"), r["path"]): r["seconds"] for r in recovery if r["keys"] == most}
        native_a, a, b = (restarts.get(("native-rocksdb-scale", "A")), restarts.get(("vectorized-scale", "A")),
                          restarts.get(("vectorized-scale", "B")))
        if native_a and a:
            self.add(f"restart after a SIGKILL to the first micro-batch at {most:,} keys, path A / native RocksDB's",
                     a / native_a, 1.0, higher_is_better=False)
        if a and b:
            self.add(f"restart after a SIGKILL to the first micro-batch at {most:,} keys, path B / path A", b / a,
                     2.0, higher_is_better=False)

    def kafka(self, latency: list[dict]) -> None:
        """Kafka in and out: rows a second, and p99 latency per trigger."""
        for keys in sorted({r.keys for r in self.results if r.name == "native-kafka-out"}):
            r = self.find("vectorized-kafka-out", keys)
            self.add(f"vectorized / native rows/s, Kafka in and out, at {keys:,} keys",
                     self.ratio(r, self.find("native-kafka-out", keys)), 0.9, runs=r.ratio_spread if r else None)
        for trigger_ms in dict.fromkeys(r["trigger_ms"] for r in latency):
            p99 = {r["implementation"]: r["p99_ms"] for r in latency if r["trigger_ms"] == trigger_ms}
            if {"native", "persistent"} <= p99.keys():
                when = report.trigger({"trigger_ms": trigger_ms})
                self.add(f"p99 latency, Kafka in and out, trigger {when}, ours / native's",
                         p99["persistent"] / p99["native"], 1.2, higher_is_better=False)

    def small_batches(self) -> None:
        """The median small batch against native Spark's."""
        small = next((r for r in self.results if r.name == "vectorized-small"), None)
        native_small = next((r for r in self.results if r.name == "native-small"), None)
        if small and native_small and native_small.median_batch_ms:
            self.add(f"median {SMALL_BATCH_ROWS:,}-row batch, vectorized / native",
                     small.median_batch_ms / native_small.median_batch_ms, 1.1, higher_is_better=False)


def _growth(fewer: RunResult | None, more: RunResult | None) -> float | None:
    """How many times a median batch grew from ``fewer`` keys to ``more``."""
    if fewer and more and fewer.median_batch_ms and more.median_batch_ms:
        return more.median_batch_ms / fewer.median_batch_ms
    return None


def run(args) -> int:
    # Spark's shutdown warnings (state store maintenance after the context stopped) are noise here.
    os.environ.setdefault("PERSISTENT_LOG_LEVEL", "ERROR")
    only = set(args.only.split(",")) if args.only else set(NAMES)
    unknown = only - set(NAMES)
    if unknown:
        raise SystemExit(f"bench: unknown implementation(s) {sorted(unknown)}; choose from {', '.join(NAMES)}")
    if "bytewax" in only and not peer.available():
        print("bench: Bytewax is not installed (pip install -e '.[bench]'): skipping it", file=sys.stderr)
        only.discard("bytewax")
    keys = _int_list(args.keys)
    skewed = [k for k in _int_list(args.skewed_keys) if k in keys]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="persistent-bench-"))
    started = time.monotonic()
    try:
        results, recovery, latency = _run_all(args, only, keys, skewed, work)
        demo_seconds = _time_demo(work) if "demo" in only else None
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    for r in results:
        baseline = BASELINES.get(r.name, "native")
        base = next((b for b in results if b.name == baseline and b.keys == r.keys
                     and b.distribution == r.distribution), None)
        if base is not None and base is not r and base.rows_per_s:
            r.ratio, r.baseline = r.rows_per_s / base.rows_per_s, baseline
            r.ratio_spread = ratio_spread(r, base)
    targets = _targets(results, demo_seconds, latency, recovery)
    extra = {
        "machine": _machine(), "versions": _versions(), "master": args.master, "events": args.events,
        "batch_rows": args.batch_rows, "batch_span_ms": BATCH_SPAN_MS, "zipf_exponent": ZIPF_EXPONENT,
        "seconds": round(time.monotonic() - started, 1), "recovery": recovery, "latency": latency,
        "targets": targets,
        "demo_seconds": demo_seconds, "small_batch": {"rows": SMALL_BATCH_ROWS, "keys": args.small_keys},
        "scale": {"events": _int_list(args.scale_events), "keys": _int_list(args.scale_keys),
                  "heap_keys": args.scale_heap_keys},
    }
    report.write_json(out / "results.json", results, extra)
    plots = report.plot(out, results)
    print(report.table(results))
    print(report.cpu_table(results))
    for r in recovery:
        print(f"recovery {r.get('implementation', 'vectorized')} path {r['path']} at {r['keys']:,} keys: "
              f"{r['seconds']:.1f} s to the first micro-batch")
    for r in latency:
        print(f"latency {r['implementation']}, trigger {report.trigger(r)}, {r['rate']:,} records/s: "
              f"p50 {r['p50_ms']:,.0f} ms, p99 {r['p99_ms']:,.0f} ms; {r['batches']} micro-batches, "
              f"median ms: {report.by_part(r['median_ms'])}")
    for r in results:
        if r.name in ("native-small", "vectorized-small"):
            print(f"{r.name}: {SMALL_BATCH_ROWS:,}-row micro-batches, median {r.median_batch_ms:,.0f} ms, "
                  f"p99 {r.p99_batch_ms:,.0f} ms")
    if demo_seconds is not None:
        print(f"make demo: {demo_seconds:.1f} s (examples/demo.py, a fresh checkpoint)")
    for t in targets:
        runs = f" (runs {report.spread(t['runs'])}: lowest/median/highest)" if t["runs"] else ""
        print(f"{'met   ' if t['met'] else 'missed'} {t['target']}: {t['measured']}{runs} (target {t['goal']})")
    print(f"{extra['seconds']:.0f} s; wrote {', '.join(str(path) for path in [out / 'results.json', *plots])}")
    return 0


def _run_all(args, only: set[str], keys: list[int], skewed: list[int], work: Path):
    """Runs the implementations ``only`` over the data sets of ``keys`` (and of skewed
    keys, for the counts in ``skewed``); returns the runs, the restarts and the latencies."""
    datasets: list[Dataset] = []
    for k in keys:
        datasets.append(generate(work / "input", "uniform", k, args.events, args.batch_rows))
        if k in skewed:
            datasets.append(generate(work / "input", "skewed", k, args.events, args.batch_rows))
    print(f"bench: generated {len(datasets)} data sets of {args.events:,} events", file=sys.stderr)
    measured = _Measured()
    spark_names = only - {"bytewax", "demo"}
    if spark_names:
        _run_spark(args, spark_names, datasets, work, measured)
    if "bytewax" in only:
        for dataset in datasets:
            if dataset.distribution == "uniform" or "bytewax" in SKEWED:
                measured.record(peer.run_bytewax(dataset, work))
    return measured.results, measured.recovery, measured.latency


class _Measured:
    """What a bench run measured: the runs, the restarts and the latencies."""

    def __init__(self) -> None:
        self.results: list[RunResult] = []
        self.recovery: list[dict] = []
        self.latency: list[dict] = []

    def record(self, result: RunResult) -> None:
        self.results.append(result)
        print(f"bench: {result.name} {result.distribution} {result.keys:,} keys: {result.rows_per_s:,.0f} rows/s, "
              f"median batch {result.median_batch_ms:,.0f} ms ({result.wall_s:.1f} s)", file=sys.stderr)

    def pooled(self, turns) -> None:
        """Records each implementation's runs of ``turns`` pooled, those that ran."""
        for taken in turns:
            if taken:
                self.record(pool(taken))


def _run_spark(args, names: set[str], datasets: list[Dataset], work: Path, measured: _Measured) -> None:
    """Runs the Spark implementations ``names`` in one session; the restarts from a
    SIGKILL of the scale case after it stopped."""
    from bench.spark_runs import SparkRuns

    spark = _session(args, names)
    runs = SparkRuns(spark, work)
    largest = None
    try:
        if names - {"native", "native-window"}:
            runs.warm_up(datasets[0])
        if "small" in names and args.small_batches:
            small = generate(work / "input-small", "uniform", args.small_keys,
                             args.small_batches * SMALL_BATCH_ROWS, SMALL_BATCH_ROWS)
            measured.record(runs.native(small, "native-small"))
            measured.record(runs.vectorized(small, "vectorized-small")[0])
        for dataset in datasets:
            _run_dataset(runs, dataset, names, args, measured)
        if "latency" in names:
            measured.latency = _latency_turns(spark, work, args)
        if "scale" in names:
            turns, largest = _scale_turns(runs, work, args)
            measured.pooled(turns)
    finally:
        spark.stop()
    if largest is not None:
        measured.recovery += _scale_restarts(work, largest, args.master)


def _session(args, names: set[str]):
    """The bench's Spark session, with Kafka's connector where a case reads Kafka."""
    from persistent import spark_session

    settings = {"spark.driver.memory": "6g"}
    if names & {"kafka", "latency"}:
        from importlib.metadata import version

        from persistent.sources.kafka import KAFKA_PACKAGE

        settings["spark.jars.packages"] = f"{KAFKA_PACKAGE}:{version('pyspark')}"
    return spark_session("bench", args.master, **settings)


def _run_dataset(runs, dataset: Dataset, names: set[str], args, measured: _Measured) -> None:
    """Runs the implementations ``names`` over one data set, those that take turns in turns."""
    single = {
        "native": runs.native,
        "per-key": lambda d: runs.per_key(d, args.per_key_batches),
        "per-message": runs.per_message,
    }
    windows = {"window": runs.window, "folded-window": runs.folded_window, "native-window": runs.native_window}
    windows = {name: run for name, run in windows.items() if name in names}
    uniform = dataset.distribution == "uniform"
    job = None
    for name in NAMES:
        if name not in names or (not uniform and name not in SKEWED):
            continue
        if name == "native" and "vectorized" in names:
            continue  # it takes turns with vectorized, below
        if name in single:
            measured.record(single[name](dataset))
        elif name == "vectorized":
            job = _vectorized_turns(runs, dataset, names, args.repeats, measured)
        elif name == next(iter(windows), None):
            # The windowed jobs take turns too, each compared with native's windows.
            turns = {window: [] for window in windows}
            for _ in range(args.repeats):
                for window, run in windows.items():
                    turns[window].append(run(dataset))
            measured.pooled(turns.values())
        elif name == "folded" and "vectorized" not in names:
            measured.record(pool([runs.folded(dataset) for _ in range(args.repeats)]))
        elif name == "no-checkpoints" and "vectorized" not in names:
            measured.record(pool([runs.vectorized(dataset, name, checkpoints=False)[0]
                                  for _ in range(args.repeats)]))
        elif name == "kafka" and dataset.keys in _int_list(args.kafka_keys) and uniform:
            measured.pooled(_kafka_turns(runs, dataset, args))
        elif name == "recovery" and dataset.keys in RECOVERY_KEYS and uniform:
            _restarts(runs, job or runs.vectorized(dataset)[1], dataset, measured)


def _vectorized_turns(runs, dataset: Dataset, names: set[str], repeats: int, measured: _Measured):
    """Native, vectorized with checkpoints and without, and folded, taking turns, so that
    none of them gets the machine's quieter moments (or a JIT compiler further on) more
    often; returns the last vectorized job."""
    native, on, off, fold = [], [], [], []
    for _ in range(repeats):
        if "native" in names:
            native.append(runs.native(dataset))
        if "no-checkpoints" in names and dataset.distribution == "uniform":
            off.append(runs.vectorized(dataset, "no-checkpoints", checkpoints=False)[0])
        result, job = runs.vectorized(dataset)
        on.append(result)
        if "folded" in names:
            fold.append(runs.folded(dataset))
    measured.pooled((native, on, off, fold))
    return job


def _restarts(runs, job, dataset: Dataset, measured: _Measured) -> None:
    """Times the vectorized ``job``'s restarts on path A and path B."""
    for path, lose in (("A", False), ("B", True)):
        seconds = runs.restart(job, dataset, lose_spark_checkpoint=lose)
        measured.recovery.append({"implementation": "vectorized", "path": path, "keys": dataset.keys,
                                  "seconds": round(seconds, 2)})
        print(f"bench: recovery path {path} at {dataset.keys:,} keys: {seconds:.1f} s", file=sys.stderr)


def _kafka_turns(runs, dataset: Dataset, args) -> tuple[list[RunResult], ...]:
    """Native and vectorized runs, taking turns, over the data set's events written to a
    topic of a real Kafka broker, ``args.batch_rows`` records a micro-batch: their
    results dropped, then written to a new topic each run (``-kafka-out``)."""
    from bench import kafka
    from persistent.sinks.kafka import KafkaSink
    from persistent.sources.kafka import KafkaSource

    native, vectorized, native_out, vectorized_out = [], [], [], []
    with kafka.broker() as broker:
        topic = kafka.write_topic(broker.bootstrap, dataset)
        source = KafkaSource(broker.bootstrap, topic, max_offsets_per_batch=args.batch_rows)
        for _ in range(args.repeats):
            native.append(runs.native(dataset, "native-kafka", source=source))
            vectorized.append(runs.vectorized(dataset, "vectorized-kafka", source=source)[0])
            native_out.append(runs.native(dataset, "native-kafka-out", source=source,
                                          to=(broker.bootstrap, kafka.new_topic(broker.bootstrap, "bench-out"))))
            sink = KafkaSink(broker.bootstrap, kafka.new_topic(broker.bootstrap, "bench-out"))
            vectorized_out.append(runs.vectorized(dataset, "vectorized-kafka-out", source=source, sink=sink)[0])
    return native, vectorized, native_out, vectorized_out


def _latency_turns(spark, work: Path, args) -> list[dict]:
    """The latency case (``bench.latency``): native and this project's count in turn, with
    Spark's default trigger and with ``TRIGGER_MS``."""
    from bench import kafka, latency

    runs = []
    with kafka.broker() as broker:
        for trigger_ms in (None, latency.TRIGGER_MS):
            taken = {"native": [], "persistent": []}
            for _ in range(args.latency_rounds):
                for implementation, theirs in taken.items():
                    theirs.append(latency.measure(spark, work, broker.bootstrap, implementation, trigger_ms,
                                                  args.latency_rate, args.latency_seconds))
                    one = latency.pooled(implementation, trigger_ms, args.latency_rate, args.latency_seconds,
                                         theirs[-1:])
                    print(f"bench: latency {implementation}, trigger {report.trigger(one)}: "
                          f"p50 {one['p50_ms']:,.0f} ms, p99 {one['p99_ms']:,.0f} ms", file=sys.stderr)
            runs += [latency.pooled(implementation, trigger_ms, args.latency_rate, args.latency_seconds, theirs)
                     for implementation, theirs in taken.items()]
    return runs


def _scale_turns(runs, work: Path, args) -> tuple[list[list[RunResult]], Dataset]:
    """Runs taking turns over ``args.scale_events`` uniform events at each of
    ``args.scale_keys``, the state growing to millions of keys: native with Spark's
    default state store (up to ``args.scale_heap_keys``) and with RocksDB's, and
    vectorized. Returns the turns and the data set of the most keys."""
    from bench.spark_runs import ROCKSDB

    turns = []
    counts, events = _int_list(args.scale_keys), _int_list(args.scale_events)
    if len(events) not in (1, len(counts)):
        raise SystemExit(f"bench: --scale-events gives {len(events)} numbers for {len(counts)} key counts")
    for keys, each in zip(counts, events * len(counts) if len(events) == 1 else events):
        dataset = generate(work / "input-scale", "uniform", keys, each, args.batch_rows)
        taken = {"native-scale": [], "native-rocksdb-scale": [], "vectorized-scale": []}
        for _ in range(args.repeats):
            if keys <= args.scale_heap_keys:
                taken["native-scale"].append(runs.native(dataset, "native-scale"))
            taken["native-rocksdb-scale"].append(runs.native(dataset, "native-rocksdb-scale", conf=ROCKSDB))
            taken["vectorized-scale"].append(runs.vectorized(dataset, "vectorized-scale")[0])
        turns += [runs_of_one for runs_of_one in taken.values() if runs_of_one]
        if keys == max(counts):
            largest = dataset
    return turns, largest


def _scale_restarts(work: Path, dataset: Dataset, master: str) -> list[dict]:
    """The last runs of the case ``scale`` (over ``dataset``, the most keys), each killed
    in a micro-batch and started again in processes of their own (``bench.killed``),
    once the bench's session has stopped and freed their memory: native on its
    checkpoint, vectorized on path A and on path B. Returns the restarts as the case
    ``recovery`` has them, with the implementation, marked killed."""
    from bench.killed import killed_restart

    restarts = []
    for name, path in (("native-rocksdb-scale", "A"), ("vectorized-scale", "A"), ("vectorized-scale", "B")):
        seconds = killed_restart(work, name, dataset, master, lose=path == "B",
                                 log=work / "killed.log")
        restarts.append({"implementation": name, "path": path, "keys": dataset.keys, "killed": True,
                         "seconds": round(seconds, 2)})
        print(f"bench: restart of {name} on path {path} at {dataset.keys:,} keys after a SIGKILL: {seconds:.1f} s",
              file=sys.stderr)
    return restarts


def _time_demo(work: Path) -> float:
    """Seconds ``examples/demo.py`` takes (what ``make demo`` runs once its environment
    exists), with a checkpoint of its own: the word count demo from a fresh start."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(EXAMPLES / "demo.py"), "--out", str(work / "demo")],
                          capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"examples/demo.py failed ({done.returncode}): {done.stderr[-2000:]}")
    print(f"bench: make demo {seconds:.1f} s", file=sys.stderr)
    return round(seconds, 1)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    with open(os.environ.get("PERSISTENT_SPARK_LOCK", "/tmp/persistent-spark.lock"), "w") as lock:
        print("bench: waiting for the Spark lock", file=sys.stderr)
        fcntl.flock(lock, fcntl.LOCK_EX)
        return run(args)


if __name__ == "__main__":
    sys.exit(main())
