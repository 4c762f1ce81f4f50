"""The latency case (``latency``): a producer writes records to a topic of a real broker
at a steady rate (``--latency-rate`` a second for ``--latency-seconds``), each key's
count runs without end, and a reader with ``isolation.level=read_committed`` notes when
each result becomes readable. A record's latency is the time from its produce to the
first result of its key that counts it: key k{i % keys} gets record i, so that result is
the first whose count reaches i // keys + 1.

Native Spark (``groupBy(key).count()`` in update mode to Spark's Kafka sink,
at-least-once) and this project's count (a ``MonoidTask``, the Kafka sink, a
transaction per micro-batch) take turns, ``--latency-rounds`` runs each, with Spark's
default trigger (the next micro-batch as soon as the last ends) and with a trigger of
``TRIGGER_MS``; the first ``WARM_UP_S`` seconds of records of a run are not counted.
The percentiles are over the records of all runs of one implementation and trigger (a
single run's p99 is a handful of micro-batches, and moves by a quarter from one run to
the next); each run's p99 is kept beside them, with the median of what Spark's progress
says the micro-batches' time went to.

The producer runs in a process of its own (``python -m bench.latency``), so that the
driver's Python does not slow it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.kafka import new_topic
from persistent import Job
from persistent.examples.count import FoldedCount
from persistent.sinks.kafka import KafkaSink
from persistent.sources.kafka import KafkaSource

__all__ = ["KEYS", "TRIGGER_MS", "Taken", "measure", "pooled"]

KEYS = 1_000
TRIGGER_MS = 1_000
WARM_UP_S = 10
#: Seconds the results may take to catch up once the producer has stopped.
CATCH_UP_S = 120
ROOT = Path(__file__).resolve().parent.parent


class Readable(threading.Thread):
    """Reads ``topic`` read_committed from its start until ``stop``, noting each result's
    key, count and the wall-clock ms it was read at."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{topic}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
        partitions = self.consumer.list_topics(topic, timeout=30).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        self.seen: list[tuple[int, int, int]] = []  # key number, count, ms
        self.counts: dict[int, int] = {}
        self._finishing = threading.Event()

    def run(self) -> None:
        try:
            while not self._finishing.is_set():
                for message in self.consumer.consume(10_000, 0.1):
                    if message.error() is None:
                        now = int(time.time() * 1000)
                        key, count = int(message.key()[1:]), _count(message.value())
                        self.seen.append((key, count, now))
                        self.counts[key] = max(self.counts.get(key, 0), count)
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self._finishing.set()
        self.join()


def _count(value: bytes) -> int:
    """A result's count: native's value is JSON (``{"count": N}``), this project's the number."""
    text = value.decode()
    return int(json.loads(text)["count"]) if text.startswith("{") else int(text)


def latencies_ms(produced_ms: np.ndarray, seen: list[tuple[int, int, int]], keys: int, skip: int) -> np.ndarray:
    """Each record's latency (from its produce to the first result counting it), but the
    first ``skip`` records'. A record no result counts is an error."""
    by_key: dict[int, list[tuple[int, int]]] = {}
    for key, count, ms in seen:
        by_key.setdefault(key, []).append((count, ms))
    out = np.empty(len(produced_ms), dtype=np.int64)
    for key in range(min(keys, len(produced_ms))):
        rows = np.array(by_key.get(key, [(0, 0)]), dtype=np.int64)
        counts, times = np.maximum.accumulate(rows[:, 0]), rows[:, 1]
        needed = np.arange(1, len(produced_ms[key::keys]) + 1)
        first = np.searchsorted(counts, needed)
        if first[-1] >= len(counts):
            raise RuntimeError(f"latency: key k{key} was never counted up to {needed[-1]} (at most {counts[-1]})")
        out[key::keys] = times[first] - produced_ms[key::keys]
    return out[skip:]


@dataclass
class Taken:
    """One run's latencies (ms, a record each) and its micro-batches' ``durationMs``."""

    latencies_ms: np.ndarray
    batches: list[dict]


def measure(spark, work: Path, bootstrap: str, implementation: str, trigger_ms: int | None, rate: int,
            seconds: int) -> Taken:
    """One run of ``implementation`` (``native`` or ``persistent``) with the trigger
    ``trigger_ms`` (None: Spark's default) over ``rate`` records a second for ``seconds``."""
    source_topic, output = new_topic(bootstrap, "latency-in"), new_topic(bootstrap, "latency-out")
    source = KafkaSource(bootstrap, source_topic, max_offsets_per_batch=10 * rate)
    directory = work / "latency" / output
    if implementation == "native":
        stop, query = _native(spark, source, bootstrap, output, directory, trigger_ms)
    else:
        job = Job(task=FoldedCount(), source=source, sink=KafkaSink(bootstrap, output),
                  checkpoint_dir=str(directory / "checkpoint"), checkpoint_interval_ms=1_000, on_progress=None)
        running = job.start(spark, trigger_ms=trigger_ms)
        stop, query = running.stop, running.query
    reader = Readable(bootstrap, output)
    reader.start()
    try:
        while query.lastProgress is None:  # its first micro-batch (of nothing) has run
            time.sleep(0.1)
        produced = directory / "produced.npy"
        subprocess.run([sys.executable, "-m", "bench.latency", bootstrap, source_topic, str(rate), str(seconds),
                        str(KEYS), str(produced)], check=True, cwd=ROOT)
        produced_ms = np.load(produced)
        expected = len(produced_ms) // KEYS
        deadline = time.monotonic() + CATCH_UP_S
        while min(reader.counts.get(k, 0) for k in range(KEYS)) < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency: {implementation} did not catch up within {CATCH_UP_S} s")
            time.sleep(0.2)
        progress = query.recentProgress
    finally:
        stop()
        reader.stop()
    return Taken(latencies_ms(produced_ms, reader.seen, KEYS, WARM_UP_S * rate),
                 [p["durationMs"] for p in progress if p["numInputRows"]])


def pooled(implementation: str, trigger_ms: int | None, rate: int, seconds: int, runs: list[Taken]) -> dict:
    """The figures of ``runs`` of one implementation and trigger: percentiles over the
    latencies of all of them, each run's p99, and the median of each part of Spark's
    ``durationMs`` over their micro-batches."""
    lat = np.concatenate([run.latencies_ms for run in runs])
    batches = [parts for run in runs for parts in run.batches]
    names = sorted({name for parts in batches for name in parts})
    return {"implementation": implementation, "trigger_ms": trigger_ms, "rate": rate, "seconds": seconds,
            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
            "p99_by_run_ms": [float(np.percentile(run.latencies_ms, 99)) for run in runs], "batches": len(batches),
            "median_ms": {name: float(np.median([parts.get(name, 0) for parts in batches])) for name in names}}


def _native(spark, source, bootstrap: str, topic: str, directory: Path, trigger_ms: int | None):
    from pyspark.sql import functions as F

    counts = source.stream(spark).groupBy("key").count()
    records = counts.select(F.col("key").cast("string").alias("key"), F.to_json(F.struct("count")).alias("value"))
    writer = (records.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
              .outputMode("update").option("checkpointLocation", str(directory / "checkpoint")))
    if trigger_ms is not None:
        writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
    query = writer.start()
    return query.stop, query


def produce(bootstrap: str, topic: str, rate: int, seconds: int, keys: int, out: Path) -> None:
    """Writes ``rate * seconds`` records at ``rate`` a second, record i with key
    k{i % keys} and the time of its produce as timestamp; saves those times (ms) to ``out``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    total = rate * seconds
    produced = np.empty(total, dtype=np.int64)
    names = [f"k{k}".encode() for k in range(keys)]
    started = time.monotonic()
    for i in range(total):
        if i % 100 == 0:
            ahead = started + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            producer.poll(0)
        now = int(time.time() * 1000)
        produced[i] = now
        while True:
            try:
                producer.produce(topic, key=names[i % keys], value=b"1", timestamp=now)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(60):
        raise SystemExit("latency producer: records not delivered within 60 s")
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, produced)


if __name__ == "__main__":
    bootstrap_, topic_, rate_, seconds_, keys_, out_ = sys.argv[1:]
    produce(bootstrap_, topic_, int(rate_), int(seconds_), int(keys_), Path(out_))
