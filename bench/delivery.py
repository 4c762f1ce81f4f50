"""The delivery settings side by side: the count example over the same generated input,
with each setting, in one SparkSession.

    python bench/delivery.py [--total N] [--keys N] [--rows-per-batch N] [--repeats N] [--json FILE]

For each setting it measures

- after a warm-up run, clean runs (``--repeats``, the settings taking turns): input
  rows per second of batch time and the median per-batch latency over all their
  micro-batches (Spark's ``triggerExecution``; each run's first batch with input is
  left out), and what the checkpoint directory and the sink hold after one of them;
- a run that fails twice (an exception from the sink: on its third write instead of
  writing, and right after its sixth write; a replay is a write too), restarted after
  each failure: the time from each restart to its first committed micro-batch, and the
  effects lost and duplicated at the end against the counts of one clean pass;
- the same failures with Spark's checkpoint deleted before each restart.

Holds the machine-wide Spark lock ``$PERSISTENT_SPARK_LOCK`` (default
``/tmp/persistent-spark.lock``) while it runs: start it without ``flock``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import count  # noqa: E402

from bench.measure import batches_of, directory_bytes  # noqa: E402
from bench.spark_runs import delete_spark_checkpoint  # noqa: E402
from persistent.runtime.delivery import Delivery, Effects  # noqa: E402
from persistent.sinks.base import Sink  # noqa: E402
from persistent.tools.session import spark_session  # noqa: E402

#: The sink's writes that fail (counted from 1, replays too): instead of writing, and after writing.
FAIL_INSTEAD_OF = 3
FAIL_AFTER = 6


class FailingSink(Sink):
    """The job's sink, failing once instead of its ``FAIL_INSTEAD_OF``-th write and once
    right after its ``FAIL_AFTER``-th."""

    def __init__(self, sink: Sink):
        self.sink, self.calls = sink, 0
        self.reads_once = sink.reads_once

    def write(self, results, batch, windowed):
        self._call(self.sink.write, results, batch, windowed)

    def append(self, results, batch, windowed):
        self._call(self.sink.append, results, batch, windowed)

    def _call(self, write, *args):
        self.calls += 1
        if self.calls == FAIL_INSTEAD_OF:
            raise RuntimeError(f"injected failure instead of writing batch {args[1]}")
        write(*args)
        if self.calls == FAIL_AFTER:
            raise RuntimeError(f"injected failure after writing batch {args[1]}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--total", type=int, default=600_000, help="generated messages (default %(default)s)")
    p.add_argument("--keys", type=int, default=10_000, help="distinct keys (default %(default)s)")
    p.add_argument("--rows-per-batch", type=int, default=50_000, help="messages per micro-batch (default %(default)s)")
    p.add_argument("--key-groups", type=int, default=16, help="key groups (default %(default)s)")
    p.add_argument("--master", default="local[2]", help="Spark master (default %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="clean runs per setting, taking turns (default %(default)s)")
    p.add_argument("--json", help="also write the results to this file")
    return p


def build(args, workdir: Path, delivery: Delivery):
    job = count.build_job(count.parser().parse_args([
        "--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}",
        "--total", str(args.total), "--keys", str(args.keys), "--rows-per-batch", str(args.rows_per_batch),
        "--key-groups", str(args.key_groups), "--delivery", delivery.value,
    ]))
    job = replace(job, on_progress=None)
    return job


def stored(workdir: Path) -> dict[str, int]:
    """Bytes by part of the checkpoint directory, and the sink's rows and bytes."""
    parts = {name: size for name, size in sorted(directory_bytes(str(workdir / "ck")).items())
             if not name.startswith(".")}
    with sqlite3.connect(workdir / "out.db") as db:
        parts["sink rows"] = db.execute("SELECT COUNT(*) FROM counts").fetchone()[0]
    parts["sink bytes"] = (workdir / "out.db").stat().st_size
    return parts


def totals(workdir: Path) -> dict[str, int]:
    with sqlite3.connect(workdir / "out.db") as db:
        return dict(db.execute("SELECT key, SUM(count) FROM counts GROUP BY key").fetchall())


def clean_run(spark, args, workdir: Path, delivery: Delivery) -> list:
    """One run without failures: its micro-batches with input but the first (it starts
    the Python workers)."""
    with_input = [b for b in batches_of(build(args, workdir, delivery).run(spark).query) if b.rows]
    return with_input[1:] or with_input


def summarize(batches: list, workdir: Path) -> dict:
    return {
        "rows_per_s": sum(b.rows for b in batches) / (sum(b.ms for b in batches) / 1000),
        "median_batch_ms": statistics.median(b.ms for b in batches),
        "batches": len(batches),
        "stored": stored(workdir),
    }


def failing_run(spark, args, workdir: Path, delivery: Delivery, lose_spark_checkpoint: bool) -> dict:
    """Runs until the input is consumed, restarting after each failure. Besides the
    effects lost and duplicated, it reports the messages the key groups took as late
    (dropped: they say where a loss came from)."""
    job = build(args, workdir, delivery)
    job = replace(job, sink=FailingSink(job.sink))
    committed: list[float] = []
    late: list[int] = []

    def on_progress(progress):
        committed.append(time.monotonic())
        late.append(progress.late)

    job = replace(job, on_progress=on_progress)
    restarts = []
    while True:
        started, before = time.monotonic(), len(committed)
        running = job.start(spark, available_now=True)
        try:
            failed = _fails(running)
        finally:
            running.stop()  # releases the job directory's lease for the restart
        if restarts or failed:
            restarts.append({"path": running.recovery.path.value,
                             "to_first_batch_s": committed[before] - started if len(committed) > before else None})
        if not failed:
            break
        if lose_spark_checkpoint:
            delete_spark_checkpoint(job.checkpoint_dir)
    expected = {f"k{k}": len(range(k, args.total, args.keys)) for k in range(args.keys)}
    effects = Effects(expected, totals(workdir))
    # The first start is no restart: each entry describes the start after a failure.
    return {"restarts": restarts[1:], "lost": effects.lost, "duplicated": effects.duplicated, "late": sum(late),
            "accuracy": effects.accuracy}


def _fails(running) -> bool:
    """Waits for the job (``RunningJob.wait``); True when it stopped on an injected failure."""
    try:
        running.wait()
    except Exception as exc:  # noqa: BLE001 - anything but the injected failure is raised again
        if "injected failure" not in str(exc):
            raise
        return True
    return False


def table(results: dict) -> str:
    """The results as a Markdown table, one row per setting."""
    lines = [
        "| setting | rows/s | median batch ms | restart to first batch, s | lost / duplicated / accuracy "
        "| same, Spark checkpoint lost | checkpoint directory, bytes | sink |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for delivery in Delivery:
        r = results[delivery.value]
        clean, failures, lost = r["clean"], r["failures"], r["failures, Spark checkpoint lost"]
        # A restart that committed no micro-batch (it failed again first, or found nothing left) has no time.
        restarts = " / ".join("-" if x["to_first_batch_s"] is None else f"{x['to_first_batch_s']:.1f}"
                              for x in failures["restarts"] + lost["restarts"])
        parts = {k: v for k, v in clean["stored"].items() if not k.startswith("sink")}
        lines.append(
            f"| {delivery.value} | {clean['rows_per_s']:,.0f} | {clean['median_batch_ms']:,.0f} | {restarts} "
            + "".join(f"| {f['lost']:,} / {f['duplicated']:,} / {f['accuracy']:.1%} " for f in (failures, lost))
            + f"| {sum(parts.values()):,} ({', '.join(f'{k} {v:,}' for k, v in parts.items())}) "
            f"| {clean['stored']['sink rows']:,} ({clean['stored']['sink bytes']:,} bytes) |"
        )
    return "\n".join(lines)


def machine() -> dict:
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": java[0] if java else "?",
        "os": platform.platform(),
    }


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    lock_path = os.environ.get("PERSISTENT_SPARK_LOCK", "/tmp/persistent-spark.lock")
    results = {"machine": machine(), "input": {k: getattr(args, k) for k in ("total", "keys", "rows_per_batch",
                                                                              "key_groups", "master", "repeats")}}
    with open(lock_path, "w") as lock, tempfile.TemporaryDirectory(prefix="bench-delivery-") as work:
        fcntl.flock(lock, fcntl.LOCK_EX)
        spark = spark_session("bench-delivery", args.master, **{"spark.sql.shuffle.partitions": "2"})
        # Warm-up (JVM, Python workers), so that the first setting measured pays no more than the others.
        warm = argparse.Namespace(**{**vars(args), "total": 2 * args.rows_per_batch})
        clean_run(spark, warm, Path(work) / "warm-up", Delivery.EXACTLY_ONCE)
        # Clean runs take turns, so that other load on the machine falls on every setting alike.
        batches = {delivery: [] for delivery in Delivery}
        for turn in range(args.repeats):
            for delivery in Delivery:
                batches[delivery] += clean_run(spark, args, Path(work) / delivery.value / f"clean-{turn}", delivery)
        for delivery in Delivery:
            base = Path(work) / delivery.value
            results[delivery.value] = {
                "clean": summarize(batches[delivery], base / f"clean-{args.repeats - 1}"),
                "failures": failing_run(spark, args, base / "failures", delivery, lose_spark_checkpoint=False),
                "failures, Spark checkpoint lost": failing_run(spark, args, base / "lost", delivery,
                                                               lose_spark_checkpoint=True),
            }
            print(json.dumps({delivery.value: results[delivery.value]}, indent=2), flush=True)
        results["load_average"] = os.getloadavg()[0]
        spark.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(json.dumps(results["machine"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
