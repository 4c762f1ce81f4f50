"""The benchmark's pure-Python parts: generated input, its copy in a Kafka topic (on the
real broker), batch statistics, the tables, and docs/performance.md's figures from a
``results.json``."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import numpy as np
import pytest
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.data import BATCH_SPAN_MS, first_timestamp, generate  # noqa: E402
from bench.measure import (  # noqa: E402
    Batch,
    CpuSnapshot,
    RunResult,
    cpu_snapshot,
    cpu_used,
    pool,
    ratio_spread,
    summarize,
    thread_kind,
)
from bench import report  # noqa: E402
from bench.report import cpu_table, table  # noqa: E402


def test_generated_files_hold_the_events_in_time_order_one_batch_each(tmp_path):
    dataset = generate(tmp_path, "uniform", 50, 2_500, 1_000)
    assert len(dataset.files) == 3  # ceil(2500 / 1000), plus the extra file
    tables = [pq.read_table(p) for p in dataset.files + (dataset.extra,)]
    assert [t.num_rows for t in tables] == [1_000] * 4
    stamps = np.concatenate([t.column("timestamp").to_numpy() for t in tables])
    assert (np.diff(stamps) >= 0).all()
    assert stamps[0] == 1 and stamps[-1] == 1 + (4_000 - 1) * BATCH_SPAN_MS // 1_000
    assert [first_timestamp(p) for p in dataset.files] == [1, 1 + BATCH_SPAN_MS, 1 + 2 * BATCH_SPAN_MS]
    assert [os.path.getmtime(p) for p in dataset.files] == sorted(os.path.getmtime(p) for p in dataset.files)
    keys = set(np.concatenate([t.column("key").to_numpy(zero_copy_only=False) for t in tables]))
    assert keys <= {f"k{i}" for i in range(50)} and len(keys) == 50


def test_a_topic_holds_every_event_once_in_event_time_order_in_each_partition(tmp_path, kafka_broker):
    from confluent_kafka import Consumer, TopicPartition

    from bench.kafka import PARTITIONS, write_topic

    dataset = generate(tmp_path, "uniform", 20, 1_500, 500)
    topic = write_topic(kafka_broker.bootstrap, dataset)
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "bench-test",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read = []
        while len(read) < 1_500 and (records := consumer.consume(1_000, timeout=10)):
            read += records
    finally:
        consumer.close()
    by_partition = {}
    for r in read:
        by_partition.setdefault(r.partition(), []).append(r.timestamp()[1])
    assert sorted(by_partition) == list(range(PARTITIONS))
    assert all(times == sorted(times) for times in by_partition.values())
    events = sorted((r.key().decode(), r.timestamp()[1], int(r.value())) for r in read)
    tables = [pq.read_table(path) for path in dataset.files]
    expected = sorted(e for t in tables for e in zip(*(t.column(c).to_pylist() for c in ("key", "timestamp", "value"))))
    assert events == expected


def test_skewed_keys_concentrate_on_few_keys(tmp_path):
    def top_share(distribution):
        frame = pq.read_table(generate(tmp_path, distribution, 1_000, 20_000, 20_000).files[0]).to_pandas()
        return frame["key"].value_counts().iloc[0] / len(frame)

    assert top_share("skewed") > 0.05
    assert top_share("uniform") < 0.005


def test_rates_leave_out_the_first_batch_with_input():
    result = summarize(
        RunResult("x", "uniform", 10, 100),
        [Batch(100, 5_000.0), Batch(100, 1_000.0), Batch(100, 3_000.0), Batch(0, 1_000.0)],
    )
    assert result.rows == 300
    assert result.rows_per_s == 200 / 5.0
    assert result.median_batch_ms == 2_000.0
    assert result.p99_batch_ms == 3_000.0  # nearest rank: the slowest of two


def test_the_table_has_one_row_per_run_with_its_ratio():
    run = summarize(RunResult("vectorized", "skewed", 100_000, 10), [Batch(10, 10.0), Batch(10, 10.0)])
    run.ratio, run.baseline = 0.5, "native"
    lines = table([run]).splitlines()
    assert len(lines) == 3
    assert "vectorized (skewed)" in lines[2] and "100,000" in lines[2] and "0.50" in lines[2]


def test_the_jvm_threads_are_told_apart_by_their_names():
    names = ("C2 CompilerThre", "C1 CompilerThre", "G1 Conc#0", "GC Thread#1", "VM Thread", "Executor task l",
             "Executor task i", "dag-scheduler-e", "main")
    assert [thread_kind(name) for name in names] == [
        "jit", "jit", "gc", "gc", "gc", "tasks", "tasks", "jvm other", "jvm other"]


def test_cpu_used_counts_threads_that_came_and_gives_the_jvm_the_rest():
    before = CpuSnapshot(threads={1: ("jit", 2.0), 2: ("tasks", 1.0), 3: ("tasks", 4.0), 4: ("jvm other", 1.0)},
                         jvm=10.0, commands=0.5, python_workers=3.0, python_driver=1.0)
    # Thread 3 ended (its seconds since the first snapshot are in the JVM's own, not in a
    # thread's); thread 5 started; thread 4 gave the driver's threads some work.
    after = CpuSnapshot(threads={1: ("jit", 2.5), 2: ("tasks", 2.0), 4: ("jvm other", 1.5), 5: ("tasks", 0.75),
                                 6: ("gc", 0.25)}, jvm=16.0, commands=1.75, python_workers=7.5,
                        python_driver=1.5)
    used = cpu_used(before, after)
    assert used == {"jit": 0.5, "gc": 0.25, "tasks": 1.75, "jvm other": 3.5, "jvm commands": 1.25,
                    "python workers": 4.5, "python driver": 0.5}
    assert sum(used[k] for k in ("jit", "gc", "tasks", "jvm other")) == after.jvm - before.jvm
    assert cpu_used(None, after) == {}


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc (Linux)")
def test_a_snapshot_counts_this_process_as_the_python_driver():
    import psutil

    process = psutil.Process()
    snapshot = cpu_snapshot(process)
    times = process.cpu_times()
    assert 0 < snapshot.python_driver <= times.user + times.system
    # The thread table as a JVM's is read: this process's own threads, by /proc.
    from bench.measure import _jvm_threads

    threads = _jvm_threads(os.getpid())
    assert os.getpid() in threads and all(kind == "jvm other" for kind, _ in threads.values())
    assert 0 < sum(seconds for _, seconds in threads.values()) <= times.user + times.system + 0.02


def test_pooled_runs_add_their_wall_and_cpu_seconds_and_the_cpu_table_shows_them():
    runs = [summarize(RunResult("native", "uniform", 1_000, 10, wall_s=wall, cpu_s={"jit": jit, "tasks": 2.0}),
                      [Batch(10, 10.0), Batch(10, 10.0)]) for wall, jit in ((3.0, 1.5), (2.0, 0.25))]
    pooled = pool(runs)
    assert pooled.wall_s == 5.0 and pooled.cpu_s == {"jit": 1.75, "tasks": 4.0}
    # Each run's own figures stay, so a pooled figure's outlier run can be told.
    assert [run["cpu_s"]["jit"] for run in pooled.runs] == [1.5, 0.25]
    assert [run["wall_s"] for run in pooled.runs] == [3.0, 2.0]
    assert [run["rows_per_s"] for run in pooled.runs] == [1000, 1000]
    assert pooled.decoded_groups is None  # runs that are not this project's jobs
    decoding = [dataclasses.replace(run, decoded_groups=n) for run, n in zip(runs, (3, 5))]
    assert pool(decoding).decoded_groups == 8
    lines = cpu_table([pooled, RunResult("bytewax", "uniform", 1_000, 10)]).splitlines()
    assert len(lines) == 3  # the header, its rule, one row: a run without CPU seconds has none
    assert "native" in lines[2] and "5.0" in lines[2] and "1.8" in lines[2] and "4.0" in lines[2]


def test_a_ratio_of_pools_that_took_turns_states_the_lowest_median_and_highest_run_ratio():
    def pooled(name, rates):
        return pool([summarize(RunResult(name, "uniform", 1_000, 10), [Batch(10, 10.0), Batch(rate // 100, 10.0)])
                     for rate in rates])

    native, vectorized = pooled("native", [1_000, 1_200, 1_000]), pooled("vectorized", [900, 1_200, 700])
    assert ratio_spread(vectorized, native) == (0.7, 0.9, 1.0)
    assert ratio_spread(vectorized, pooled("native", [1_000, 1_000])) is None  # not run in turns
    vectorized.ratio, vectorized.ratio_spread = 0.9, ratio_spread(vectorized, native)
    assert "0.90 [0.70/0.90/1.00]" in table([vectorized]).splitlines()[2]


def test_the_scale_case_reports_against_native_rocksdb_its_rate_growth_checkpoints_memory_and_restarts():
    from bench.run import _targets

    def result(name, keys, rows_per_s, batch_ms, checkpoint_kb, memory_mb=(0, 0)):
        return RunResult(name, "uniform", keys, 10, rows_per_s=rows_per_s, median_batch_ms=batch_ms,
                         checkpoint_bytes_per_batch=checkpoint_kb * 1024, peak_jvm_rss_mb=memory_mb[0],
                         peak_worker_mb=memory_mb[1])

    results = [result("native-rocksdb-scale", 1_000_000, 400, 500, 1_400),
               result("vectorized-scale", 1_000_000, 380, 520, 2_000),
               result("native-scale", 50_000_000, 140, 1_300, 3_000, (8_000, 0)),
               result("native-rocksdb-scale", 50_000_000, 150, 1_250, 3_300, (4_000, 1_000)),
               result("vectorized-scale", 50_000_000, 165, 1_080, 6_600, (5_000, 1_000))]
    recovery = [{"implementation": "vectorized", "path": "A", "keys": 1_000_000, "seconds": 1.0},
                {"implementation": "native-rocksdb-scale", "path": "A", "keys": 50_000_000, "seconds": 4.0},
                {"implementation": "vectorized-scale", "path": "A", "keys": 50_000_000, "seconds": 5.0},
                {"implementation": "vectorized-scale", "path": "B", "keys": 50_000_000, "seconds": 9.0}]
    measured = {t["target"]: (t["measured"], t["met"]) for t in _targets(results, None, [], recovery)}
    assert measured == {
        "vectorized / native RocksDB rows/s at 50,000,000 keys": (1.1, True),
        "vectorized: median batch time at 50,000,000 keys / at 1,000,000 keys": (2.077, False),  # 1,080 / 520
        "checkpoint bytes a micro-batch at 50,000,000 keys, vectorized / native RocksDB's": (2.0, False),
        "resident memory a key at 50,000,000 keys (JVM and Python workers), vectorized / native "
        "RocksDB's": (1.2, False),
        "restart after a SIGKILL to the first micro-batch at 50,000,000 keys, path A / native RocksDB's": (1.25, False),
        "restart after a SIGKILL to the first micro-batch at 50,000,000 keys, path B / path A": (1.8, True),
    }


def test_the_small_batch_case_compares_the_median_batch_with_natives_plus_a_tenth():
    from bench.run import _targets

    results = [RunResult("native-small", "uniform", 10_000, 1_000, median_batch_ms=500),
               RunResult("vectorized-small", "uniform", 10_000, 1_000, median_batch_ms=560)]
    assert [(t["target"], t["measured"], t["met"]) for t in _targets(results, None, [], [])] == [
        ("median 1,000-row batch, vectorized / native", 1.12, False)]


def test_a_records_latency_runs_from_its_produce_to_the_first_result_that_counts_it():
    from bench.latency import latencies_ms

    produced = np.array([1_000, 1_001, 1_010, 1_011, 1_020])  # keys 0, 1, 0, 1, 0 of two
    seen = [(0, 1, 1_100), (1, 1, 1_105), (1, 1, 1_106), (0, 3, 1_150), (1, 2, 1_200)]  # a result read twice
    assert latencies_ms(produced, seen, 2, 0).tolist() == [100, 104, 140, 189, 130]
    assert latencies_ms(produced, seen, 2, 3).tolist() == [189, 130]
    with pytest.raises(RuntimeError, match="key k1 was never counted up to 2"):
        latencies_ms(produced, seen[:4], 2, 0)


def test_the_latency_of_several_runs_is_taken_over_all_their_records():
    from bench.latency import Taken, pooled

    runs = [Taken(np.arange(1, 101), [{"addBatch": 10}, {"addBatch": 30}]),
            Taken(np.arange(101, 201), [{"addBatch": 20, "walCommit": 4}])]
    figures = pooled("persistent", None, 100, 1, runs)
    assert (figures["p50_ms"], figures["p99_ms"]) == (100.5, 198.01)  # of 1..200
    assert figures["p99_by_run_ms"] == [99.01, 199.01]
    assert (figures["batches"], figures["median_ms"]) == (3, {"addBatch": 20.0, "walCommit": 0.0})


def test_the_latency_case_compares_each_triggers_p99_with_natives():
    from bench.run import _targets

    latency = [{"implementation": "native", "trigger_ms": None, "p99_ms": 1_000.0},
               {"implementation": "persistent", "trigger_ms": None, "p99_ms": 1_100.0},
               {"implementation": "native", "trigger_ms": 1_000, "p99_ms": 1_500.0},
               {"implementation": "persistent", "trigger_ms": 1_000, "p99_ms": 2_000.0}]
    measured = {t["target"]: (t["measured"], t["met"]) for t in _targets([], None, latency, [])}
    assert measured == {"p99 latency, Kafka in and out, trigger default, ours / native's": (1.1, True),
                        "p99 latency, Kafka in and out, trigger 1,000 ms, ours / native's": (1.333, False)}


def _results(tmp_path, runs, **extra):
    """A ``results.json`` of ``runs`` and ``extra`` as ``bench/run.py`` writes it, read back."""
    path = tmp_path / "results.json"
    report.write_json(path, runs, {"machine": {"cpu": "CPU", "cores": 2, "memory_gb": 8.0, "system": "Linux"},
                                   "versions": {"python": "3.11.7", "java": 'openjdk version "17"'},
                                   "master": "local[2]", "events": 1_000, "batch_rows": 100, "seconds": 12.3,
                                   **extra})
    return path


def test_results_read_back_as_written_and_keys_an_older_benchmark_did_not_write_take_their_defaults(tmp_path):
    run = RunResult("native-small", "uniform", 10, 100, median_batch_ms=2_000.0, p99_batch_ms=3_000.0,
                    ratio_spread=(0.5, 0.6, 0.7), batches=[Batch(0, 50.0), Batch(100, 9_000.0)])
    path = _results(tmp_path, [run])
    data = json.loads(path.read_text())
    del data["runs"][0]["load_average"]  # written before the benchmark measured it
    path.write_text(json.dumps(data))
    (read,) = report.read_json(path)["runs"]
    assert read == dataclasses.replace(run, load_average=0.0)


def test_the_figures_give_each_case_its_section_and_say_which_did_not_run(tmp_path):
    def run(name, keys=100, **fields):
        return RunResult(name, "uniform", keys, 100, rows_per_s=1_000.0, median_batch_ms=300.0, **fields)

    pooled = {"runs": [{"rows_per_s": 1_200}, {"rows_per_s": 1_300}], "note": "2 runs pooled (1,200, 1,300 rows/s)"}
    runs = [run("native"), run("vectorized", ratio=1.25, baseline="native", ratio_spread=(1.2, 1.25, 1.3), **pooled),
            run("native-small", 10, p99_batch_ms=410.0, mean_parts_ms={"walCommit": 33.3, "addBatch": 256.7, "x": 0.2}),
            run("vectorized-small", 10, p99_batch_ms=320.0),
            run("native-kafka-out"), run("vectorized-kafka-out", ratio=0.95, baseline="native-kafka-out")]
    latency = [{"implementation": "persistent", "trigger_ms": 1_000, "rate": 20_000, "p50_ms": 1_234.4,
                "p99_ms": 2_500.0, "p99_by_run_ms": [2_400.0, 2_600.0], "batches": 60,
                "median_ms": {"addBatch": 900.0, "walCommit": 0.0, "triggerExecution": 1_000.0}},
               {"implementation": "native", "trigger_ms": None, "rate": 20_000, "p50_ms": 800.0, "p99_ms": 1_900.0,
                "batches": 70, "median_ms": {}}]
    targets = [{"target": "vectorized / native rows/s at 100 keys", "measured": 1.25, "goal": 1.0, "met": True,
                "runs": [1.2, 1.25, 1.3]},
               {"target": "p99 latency, ours / native's", "measured": 1.316, "goal": 1.2, "met": False, "runs": None},
               {"target": "make demo", "measured": 12.0, "goal": 30, "met": True, "runs": None}]
    recovery = [{"path": "A", "keys": 100, "seconds": 1.26}, {"path": "B", "keys": 100, "seconds": 0.5},
                {"implementation": "vectorized-scale", "path": "A", "keys": 200, "seconds": 30.04, "killed": True}]
    text = report.figures(report.read_json(_results(tmp_path, runs, latency=latency, targets=targets,
                                                    recovery=recovery)))
    sections = {part.split("\n", 1)[0]: part.split("\n", 1)[1].strip() for part in text.split("\n### ")[1:]}

    def cells(section: str, first: int = 1) -> list[list[str]]:
        return [[cell.strip() for cell in line.split("|")[first:-1]] for line in sections[section].splitlines()[2:]]

    assert text.startswith("One run of `bench/run.py`, 12 s: 2 cores (CPU), 8.0 GB, Linux; python 3.11.7, "
                           'java `openjdk version "17"`; master `local[2]`, 1,000 events a data set, '
                           "100 a micro-batch.")
    throughput = cells("Throughput")
    assert [row[0] for row in throughput] == ["native", "vectorized"]  # without each pooled run's rows/s
    assert throughput[1][-1] == "1.25 [1.20/1.25/1.30]"
    assert sections["State that grows (the case `scale`)"] == "Not run."
    kafka = sections["Kafka in, and in and out (the case `kafka`)"].splitlines()
    assert len(kafka) == 4 and "0.95 (native-kafka-out)" in kafka[3]
    assert cells("Small micro-batches (the case `small`)") == [
        ["native-small", "10", "100", "300", "410", "addBatch 257, walCommit 33"],
        ["vectorized-small", "10", "100", "300", "320", "-"]]
    assert cells("Latency, Kafka in and out (the case `latency`)") == [
        ["persistent", "1,000 ms", "20,000", "60", "1,234", "2,500 [2,400/2,600]",
         "triggerExecution 1,000, addBatch 900"],
        ["native", "default", "20,000", "70", "800", "1,900", "-"]]
    assert cells("Recovery (the case `recovery`)") == [["vectorized", "100", "1.3", "0.5"],
                                                        ["vectorized-scale, killed", "200", "30.0", "-"]]
    # The goal's direction is the one in which the figure met it or missed it.
    assert cells("Targets", 2) == [[">= 1.0", "1.25 [1.20/1.25/1.30]", "met"], ["<= 1.2", "1.316", "missed"],
                                   ["<= 30", "12.0", "met"]]


def test_the_document_takes_the_figures_between_its_markers_and_the_check_tells_a_stale_one(tmp_path, capsys):
    results = _results(tmp_path, [RunResult("native", "uniform", 100, 100, rows_per_s=1_000.0)])
    (tmp_path / "scale").mkdir()
    scale = _results(tmp_path / "scale", [RunResult("native-rocksdb-scale", "uniform", 1_000, 100, rows_per_s=500.0)],
                     scale={"events": [2_000]})
    begin, end = report.markers("scale-results")
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Performance\n\nBefore.\n\n{report.BEGIN}\nold figures\n{report.END}\n\nBetween.\n\n"
                   f"{begin}\nold scale\n{end}\n\nAfter.\n")
    arguments = ["--results", str(results), "--scale-results", str(scale), "--doc", str(doc)]
    assert report.main([*arguments, "--check"]) == 1
    assert "its figures are not those of" in capsys.readouterr().err
    assert report.main(arguments) == 0
    written = doc.read_text()
    assert written.startswith(f"# Performance\n\nBefore.\n\n{report.BEGIN}\nOne run of ")
    assert f"\n{report.END}\n\nBetween.\n\n{begin}\nOne run of " in written
    assert written.endswith(f"\n{end}\n\nAfter.\n") and "old" not in written
    # The scale block has the sections its run ran, and its run no events of the main cases.
    scale_block = written.split(begin)[1]
    assert "### State that grows (the case `scale`, 2,000 events a data set)" in scale_block
    assert "Not run." not in scale_block and "events a data set, 100 a micro-batch" not in scale_block
    assert report.main([*arguments, "--check"]) == 0
    assert report.main(arguments) == 0 and doc.read_text() == written  # nothing to change
    doc.write_text(written.split("Between.")[0])
    assert report.main([*arguments, "--check"]) == 1
    assert "has no lines <!-- scale-results:begin --> and <!-- scale-results:end -->" in capsys.readouterr().err
    doc.write_text("# Performance\n")
    assert report.main([*arguments, "--check"]) == 1
    assert "has no lines <!-- results:begin --> and <!-- results:end -->" in capsys.readouterr().err


def test_the_delivery_table_shows_a_restart_that_committed_no_micro_batch_as_a_dash():
    from bench import delivery

    def failures(*restarts):
        return {"restarts": [{"path": "A", "to_first_batch_s": s} for s in restarts], "lost": 0, "duplicated": 0,
                "accuracy": 1.0}

    clean = {"rows_per_s": 1_000.0, "median_batch_ms": 300.0, "stored": {"spark": 10, "sink rows": 5, "sink bytes": 50}}
    results = {d.value: {"clean": clean, "failures": failures(1.25, None),
                         "failures, Spark checkpoint lost": failures(None)} for d in delivery.Delivery}
    rows = delivery.table(results).splitlines()[2:]
    assert [row.split(" | ")[3] for row in rows] == ["1.2 / - / -"] * len(delivery.Delivery)
