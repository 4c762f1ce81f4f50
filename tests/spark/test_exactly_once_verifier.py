"""An exactly-once verifier for a pipeline of two stateful stages, in the manner of
Kafka Streams' EOS system test, against the real broker.

A producer writes keyed integers to the input topic at a steady rate while the
pipeline (``eos_pipeline.py``: per-window count, sum, least and greatest value per key,
then the same four of all windows) runs without end. It is SIGKILLed again and again:
at every crash point, each at a random arrival (counted over both stages, which run in
one Spark application), and once at a random moment; each restart takes, in turn,
path A, path B for stage 1, path B for stage 2 and path B for both (their Spark
checkpoints deleted). Then the producer stops, a last record per partition far ahead
in event time lets the watermark close every window, and a last run reads to the end.

A reader with ``isolation.level=read_committed`` then checks the topic between the
stages (each key's window once, with the four figures of its messages) and the output
(no key twice in one micro-batch, and each key's newest figures those of all its
messages): nothing lost, nothing doubled.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from crash_harness import Crasher, stop_standbys
from kafka_topics import committed, new_topic
from persistent.storage.faults import CrashPoint
from test_kafka import SUBMIT

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

SCRIPT = Path(__file__).with_name("eos_pipeline.py")
KEYS, PARTITIONS, RATE_PER_S, WINDOW_MS = 10, 3, 300, 1_000


class SteadyProducer(threading.Thread):
    """Writes ``RATE_PER_S`` records a second to ``topic`` until ``finish``: key
    k{i % KEYS}, an integer value from ``seed``, partition i % PARTITIONS, the time of
    writing as timestamp (never back)."""

    def __init__(self, bootstrap: str, topic: str, seed: int):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.topic, self.random = topic, random.Random(seed)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.written: list[tuple[str, int, int]] = []  # key, value, timestamp
        self.failures: list = []
        self._finishing = threading.Event()

    def _produce(self, partition: int, key: str, value: int, timestamp: int) -> None:
        self.producer.produce(self.topic, key=key.encode(), value=str(value).encode(), partition=partition,
                              timestamp=timestamp, on_delivery=lambda error, _: error and self.failures.append(error))

    def run(self) -> None:
        started, newest = time.monotonic(), 0
        while not self._finishing.is_set():
            due = int((time.monotonic() - started) * RATE_PER_S)
            newest = max(newest, int(time.time() * 1000))
            for i in range(len(self.written), due):
                key, value = f"k{i % KEYS}", self.random.randint(-1_000, 1_000)
                self._produce(i % PARTITIONS, key, value, newest)
                self.written.append((key, value, newest))
            self.producer.poll(0)
            time.sleep(0.02)

    def finish(self) -> None:
        """Stops writing, then writes one record per partition a minute of event time
        after the last, which moves the watermark past every window of the others."""
        self._finishing.set()
        self.join()
        end = self.written[-1][2] + 60_000
        for partition in range(PARTITIONS):
            self._produce(partition, "end", 0, end)
        assert self.producer.flush(30) == 0 and not self.failures, self.failures


def figures(values: list[int]) -> list[int]:
    return [len(values), sum(values), min(values), max(values)]


def test_a_pipeline_killed_at_random_in_both_stages_on_paths_a_and_b_gives_every_result_once(
        tmp_path, kafka_broker):
    bootstrap = kafka_broker.bootstrap
    source = new_topic(bootstrap, "eos-in", PARTITIONS)
    between, output = new_topic(bootstrap, "eos-between", 2), new_topic(bootstrap, "eos-out", 2)
    checkpoint = tmp_path / "ck"
    args = ["--kafka", bootstrap, "--topic", source, "--between", between, "--checkpoint", str(checkpoint),
            "--output", f"kafka://{bootstrap}/{output}", "--key-groups", "2", "--max-offsets-per-batch", "2000",
            "--interval-ms", "2500"]  # checkpoints behind the windows closed: path B closes some again
    crasher = Crasher(SCRIPT, args, tmp_path, submit=SUBMIT)
    producer = SteadyProducer(bootstrap, source, crasher.seed)
    producer.start()
    try:
        kills = [*((point, crasher.random.randint(2, 5)) for point in CrashPoint), None]
        crasher.random.shuffle(kills)
        restarts = itertools.cycle([(), ("stage-1",), ("stage-2",), ("stage-1", "stage-2")])
        from_clock = 0
        for kill, restart in zip(kills, restarts):
            if kill is None:
                crasher.crash_after_random_delay(10, 30)
            else:
                crasher.crash_at(*kill)
            for stage in restart:
                if (checkpoint / stage / "clock").exists():
                    shutil.rmtree(checkpoint / stage / "spark")
                    from_clock += 1
    finally:
        producer.finish()
    stop_standbys()  # the last kill's standby runs without --available-now
    (tmp_path / "final").mkdir()
    final = Crasher(SCRIPT, [*args, "--available-now"], tmp_path / "final", seed=crasher.seed, submit=SUBMIT).run()
    assert final.returncode == 0, final.log
    assert from_clock >= 2, f"seed {crasher.seed}: only {from_clock} restarts from the clock"

    by_window, by_key = defaultdict(list), defaultdict(list)
    for key, value, timestamp in producer.written:
        by_window[key, timestamp // WINDOW_MS * WINDOW_MS].append(value)
        by_key[key].append(value)
    windows = committed(bootstrap, between)
    seen = [(key, int(headers["window_start"])) for key, _, _, headers, _ in windows]
    assert len(seen) == len(set(seen)), f"seed {crasher.seed}: a window written twice between the stages"
    assert {(key, int(headers["window_start"])): json.loads(value) for key, value, _, headers, _ in windows} == {
        window: figures(values) for window, values in by_window.items()}, f"seed {crasher.seed}"

    results = committed(bootstrap, output)
    batches = [(headers["generation"], headers["batch"], key) for key, _, _, headers, _ in results]
    assert len(batches) == len(set(batches)), f"seed {crasher.seed}: a micro-batch's result read twice"
    newest = {key: json.loads(value) for key, value, _, _, _ in results}  # by generation, micro-batch: newest last
    assert newest == {key: figures(values) for key, values in by_key.items()}, f"seed {crasher.seed}"
