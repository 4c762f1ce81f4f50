"""docs/monoids.md, "Writing your own monoid", runs as written: its monoid passes the law
check and its task a ``TaskTester`` run. Without hypothesis the law check names the
extra that brings it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from monoids import Sum
from monoids.laws import check_monoid_laws

DOC = Path(__file__).resolve().parents[2] / "docs" / "monoids.md"


def readme_example() -> str:
    """The first Python block of docs/monoids.md, "Writing your own monoid"."""
    section = DOC.read_text(encoding="utf-8").split("# Writing your own monoid\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_example_checks_the_laws_and_runs_the_task():
    code = readme_example()
    assert "check_monoid_laws(" in code and "TaskTester(" in code
    exec(compile(code, f"{DOC} (Writing your own monoid)", "exec"), {"__name__": "readme_example"})


def test_without_hypothesis_the_law_check_names_the_laws_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    with pytest.raises(ImportError, match=r"pip install 'persistent-state\[laws\]'"):
        check_monoid_laws(Sum(), values=None)
