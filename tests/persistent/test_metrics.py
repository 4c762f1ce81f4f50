"""The metrics a job serves for Prometheus, without Spark: the figures of progress
records written by the real stores (``jobwriter.JobWriter``), published as the driver
publishes each committed micro-batch, read back over HTTP."""

from __future__ import annotations

import dataclasses
import socket
import sys
import time
import urllib.error

import pytest

from persistent import GeneratorSource, Job, SQLiteSink
from persistent.core.errors import ConfigError, SetupError
from persistent.examples.count import VectorizedCount
from persistent.runtime.metrics import COUNTERS, GAUGES, SPARK_HALF, TIMES, JobMetrics

from prometheus_scrape import samples, scrape


@pytest.fixture
def metrics(free_port):
    port = free_port()
    served = JobMetrics(port, "count", address="127.0.0.1")
    yield served, port
    served.close()


def test_the_endpoint_serves_the_last_batchs_figures_and_the_totals_of_the_batches_published(metrics, counting_job):
    served, port = metrics
    progress = counting_job.directory.read_progress(4)  # what persistent status shows
    progress[-1] = dataclasses.replace(progress[-1], decoded_groups=2)  # as if served by other workers
    for batch in progress:
        served.publish(batch)
    figures, last = scrape(port, "count"), progress[-1]
    assert figures["persistent_batch_rows"] == last.rows == 13
    assert figures["persistent_batch_results"] == last.results
    assert figures["persistent_batch_late_rows"] == last.late
    assert figures["persistent_batch_dead_letters"] == last.dead_letters == 1
    assert figures["persistent_batch_duration_seconds"] == last.seconds == 0.125
    assert figures["persistent_batch_commit_seconds"] == last.commit_seconds == 0.0625
    assert figures["persistent_batch_checkpoints"] == last.checkpoints == 3
    assert figures["persistent_batch_checkpoint_bytes"] == last.checkpoint_bytes > 0
    assert figures["persistent_batch_checkpoint_seconds"] == last.checkpoint_seconds == 0.06
    assert figures["persistent_batch_state_keys"] == sum(last.keys.values()) > 0
    assert figures["persistent_batch_worker_peak_bytes"] == last.worker_peak_bytes > 0
    assert figures["persistent_batch_groups_decoded"] == last.decoded_groups == 2
    assert figures["persistent_watermark_seconds"] == 0.409
    assert figures["persistent_clock_seconds"] == 0.4
    assert figures["persistent_clock_lag_seconds"] == pytest.approx(0.009)
    assert figures["persistent_last_commit_timestamp_seconds"] == last.finished_at_ms / 1000
    assert figures["persistent_batches_total"] == 4
    assert figures["persistent_rows_total"] == sum(p.rows for p in progress) == len(counting_job.sent)
    assert figures["persistent_dead_letters_total"] == 3
    assert figures["persistent_checkpoints_total"] == 9
    assert figures["persistent_checkpoint_bytes_total"] == sum(p.checkpoint_bytes for p in progress)
    names = {name for name, _, _ in GAUGES} | {f"{name}_total" for name, _, _ in COUNTERS}
    assert names <= set(figures)


def test_before_the_first_batch_the_totals_and_the_batch_figures_are_zero_and_no_time_is_served(metrics):
    _, port = metrics
    assert scrape(port, "count") == (
        {f"{name}_total": 0.0 for name, _, _ in COUNTERS}
        | {f"{name}_created": pytest.approx(time.time(), abs=60) for name, _, _ in COUNTERS}
        | {name: 0.0 for name, _, _ in GAUGES if name not in TIMES}
    )
    assert TIMES == {"persistent_watermark_seconds", "persistent_clock_seconds", "persistent_clock_lag_seconds",
                     "persistent_last_commit_timestamp_seconds"}


@pytest.mark.parametrize("loaded", [True, False])
def test_a_started_job_serves_whether_sparks_half_of_the_fold_runs(metrics, loaded):
    served, port = metrics
    served.started(spark_half=loaded)
    assert scrape(port, "count")[SPARK_HALF] == int(loaded)


def test_a_jobs_metrics_serve_its_settings_from_the_start_and_no_sink_uri(tmp_path, free_port):
    port = free_port()
    job = Job(VectorizedCount(), GeneratorSource(), SQLiteSink(str(tmp_path / "o.db")), str(tmp_path / "ck"),
              checkpoint_interval_ms=250, key_groups=3, metrics_port=port)
    served = job.serve_metrics("count")
    try:
        (info,) = [sample for sample in samples(port) if sample.name == "persistent_job_info"]
        assert (info.value, info.labels) == (1.0, {
            "app": "count", "task": "VectorizedCount", "source": "GeneratorSource", "sink": "SQLiteSink",
            "checkpoint_dir": str(tmp_path / "ck"), "delivery": "exactly-once", "checkpoint_interval_ms": "250",
            "watermark_delay_ms": "0", "key_groups": "3", "bad_records": "fail", "late_records": "drop",
        })
        assert str(tmp_path / "o.db") not in str(samples(port))
    finally:
        served.close()


def test_a_job_serves_its_metrics_on_the_loopback_interface_unless_given_another_host(tmp_path, free_port):
    port = free_port()
    job = Job(VectorizedCount(), GeneratorSource(), SQLiteSink(str(tmp_path / "o.db")), str(tmp_path / "ck"),
              metrics_port=port)
    served = job.serve_metrics("count")
    try:
        assert served.address == f"127.0.0.1:{port}" and scrape(port, "count")
        with pytest.raises(urllib.error.URLError):  # 127.0.0.2 is this host too, but not the address served
            scrape(port, "count", host="127.0.0.2")
    finally:
        served.close()
    served = dataclasses.replace(job, metrics_host="0.0.0.0").serve_metrics("count")
    try:
        assert served.address == f"0.0.0.0:{port}" and scrape(port, "count", host="127.0.0.2")
    finally:
        served.close()


def test_figures_a_batch_lacks_leave_their_gauges_as_they_were(metrics, counting_job):
    served, port = metrics
    first, second = counting_job.directory.read_progress(3)[:2]
    served.publish(dataclasses.replace(first, clock_ms=None, commit_seconds=None))
    figures = scrape(port, "count")
    assert "persistent_clock_seconds" not in figures and "persistent_clock_lag_seconds" not in figures
    assert figures["persistent_batch_commit_seconds"] == 0
    assert figures["persistent_batch_rows"] == first.rows
    served.publish(second)
    served.publish(dataclasses.replace(second, clock_ms=None, commit_seconds=None, rows=1))
    figures = scrape(port, "count")
    assert figures["persistent_clock_seconds"] == second.clock_ms / 1000
    assert figures["persistent_batch_commit_seconds"] == second.commit_seconds and figures["persistent_batch_rows"] == 1


def test_two_jobs_in_one_process_serve_their_own_figures(metrics, counting_job, free_port):
    served, port = metrics
    first, second = counting_job.directory.read_progress(3)[:2]
    other_port = free_port()
    other = JobMetrics(other_port, "count", address="127.0.0.1")
    try:
        served.publish(first)
        other.publish(second)
        assert scrape(port, "count")["persistent_batch_rows"] == first.rows
        assert scrape(other_port, "count")["persistent_batch_rows"] == second.rows
    finally:
        other.close()


def test_a_port_in_use_is_an_error_naming_it_and_a_closed_server_frees_its_port(metrics):
    served, port = metrics
    with pytest.raises(OSError, match=f"cannot serve metrics on 127.0.0.1 port {port}: "):
        JobMetrics(port, "count", address="127.0.0.1")
    served.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_without_prometheus_client_the_error_names_the_extra(monkeypatch, free_port):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails
    port = free_port()
    with pytest.raises(ImportError, match=rf"metrics port {port} needs prometheus_client, which is not installed: "
                                          r"pip install 'persistent-state\[metrics\]'") as missing:
        JobMetrics(port, "count")
    assert isinstance(missing.value, SetupError)


def test_a_job_refuses_a_metrics_port_that_is_no_tcp_port(tmp_path):
    with pytest.raises(ConfigError, match="metrics_port must be a TCP port, 1 to 65535, got 70000"):
        Job(VectorizedCount(), GeneratorSource(), SQLiteSink(str(tmp_path / "o.db")), str(tmp_path / "ck"),
            metrics_port=70000)
