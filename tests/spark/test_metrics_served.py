"""A job with a metrics port serves each committed micro-batch's figures over HTTP
while it runs, and stops serving when it ends. Jobs have Spark's web UI too; the
tests' Spark applications do not."""

from __future__ import annotations

import urllib.error
from dataclasses import replace

import pytest

from prometheus_scrape import scrape

pytestmark = pytest.mark.spark


def test_the_metrics_endpoint_serves_the_rows_each_batch_read(spark, tmp_path, free_port):
    import count

    total, port = 3_000, free_port()
    args = count.parser().parse_args(
        ["--checkpoint", str(tmp_path / "ck"), "--output", f"sqlite://{tmp_path / 'out.db'}", "--total", str(total),
         "--keys", "5", "--rows-per-batch", "1000", "--available-now", "--key-groups", "2", "--interval-ms", "200",
         "--metrics-port", str(port)]
    )
    job = count.build_job(args)
    scraped = []
    # Runs on the driver right after each micro-batch committed, while the query runs.
    job = replace(job, on_progress=lambda batch: scraped.append((batch, scrape(port, spark.sparkContext.appName))))
    job.run(spark)

    assert sum(batch.rows for batch, _ in scraped) == total
    for batch, figures in scraped:
        assert figures["persistent_batch_rows"] == batch.rows
        assert figures["persistent_batch_checkpoint_bytes"] == batch.checkpoint_bytes
        assert figures["persistent_watermark_seconds"] == batch.watermark_ms / 1000
        if batch.clock_ms is not None:
            assert figures["persistent_clock_lag_seconds"] == pytest.approx(batch.clock_lag_ms / 1000)
    last_batch, last = scraped[-1]
    assert last["persistent_rows_total"] == total and last["persistent_batches_total"] == len(scraped)
    assert last["persistent_checkpoints_total"] > 0 and last["persistent_clock_seconds"] > 0
    assert last["persistent_batch_commit_seconds"] == last_batch.commit_seconds > 0
    assert last["persistent_spark_half_loaded"] == 1 and last_batch.spark_half
    with pytest.raises(urllib.error.URLError):  # the server stopped with the job
        scrape(port, spark.sparkContext.appName)


def test_the_tests_spark_session_has_no_web_ui(spark):
    assert spark.sparkContext.uiWebUrl is None
