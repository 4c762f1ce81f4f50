"""docs/performance.md's figures are those of the committed ``bench/results/results.json``
and ``bench/results/scale/results.json`` (``python -m bench.report`` writes them; ``make
bench`` runs it after the benchmark)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import report  # noqa: E402


def test_the_documents_figures_are_those_of_the_committed_results():
    document = report.DOC.read_text(encoding="utf-8")
    assert document == report.with_all_figures(document), \
        "docs/performance.md's figures are out of date: run 'python -m bench.report'"
