"""Reads a job's metrics as Prometheus does: an HTTP GET of ``/metrics``."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(port: int, app: str) -> dict[str, float]:
    """Each sample at ``http://127.0.0.1:PORT/metrics`` by name; all must be of Spark application ``app``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]
    assert all(sample.labels == {"app": app} for sample in samples), text
    return {sample.name: sample.value for sample in samples}
