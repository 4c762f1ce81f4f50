"""docs/deploy.md's "Metrics" names every metric a job serves, and no other."""

from __future__ import annotations

import re
from pathlib import Path

from persistent.runtime.metrics import COUNTERS, GAUGES, INFO, SPARK_HALF

DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def test_the_metrics_section_names_exactly_the_metrics_served():
    section = DEPLOY.read_text(encoding="utf-8").split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(persistent_\w+)`", section))
    assert named == ({name for name, _, _ in GAUGES} | {f"{name}_total" for name, _, _ in COUNTERS}
                     | {f"{INFO}_info", SPARK_HALF})
