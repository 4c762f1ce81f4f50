"""Reads a job's metrics as Prometheus does: an HTTP GET of ``/metrics``."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


def samples(port: int, host: str = "127.0.0.1") -> list[Sample]:
    """The samples at ``http://HOST:PORT/metrics``."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def scrape(port: int, app: str, host: str = "127.0.0.1") -> dict[str, float]:
    """Each sample at ``http://HOST:PORT/metrics`` by name; all must be of Spark
    application ``app`` (the job's settings, ``persistent_job_info``, carry more labels)."""
    found = samples(port, host)
    assert all(sample.labels.get("app") == app for sample in found), found
    return {sample.name: sample.value for sample in found}
