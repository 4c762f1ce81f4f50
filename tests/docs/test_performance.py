"""docs/performance.md's figures are those of the committed results, block by block:
``bench/results/results.json`` and ``bench/results/scale/results.json``
(``python -m bench.report`` writes them; ``make bench`` runs it after the benchmark)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import report  # noqa: E402


@pytest.mark.parametrize("block", sorted(report.BLOCKS))
def test_the_documents_figures_are_those_of_the_committed_results(block):
    results, sections = report.BLOCKS[block]
    document = report.DOC.read_text(encoding="utf-8")
    expected = report.with_figures(document, report.figures(report.read_json(results), sections), block)
    assert document == expected, f"docs/performance.md's figures are out of date: run 'python -m bench.report --block {block}'"
