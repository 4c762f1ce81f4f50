"""The committed picture of the documentation is what ``docs/diagrams.py`` draws now,
and the scenario it draws keeps every count through both recovery paths."""

from __future__ import annotations

import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

DIAGRAMS = Path(__file__).resolve().parents[2] / "docs" / "diagrams.py"


def load_diagrams():
    spec = importlib.util.spec_from_file_location("diagrams", DIAGRAMS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_the_committed_timeline_equals_what_the_script_draws_now():
    diagrams = load_diagrams()
    committed = diagrams.TIMELINE.read_text(encoding="utf-8")
    assert committed == diagrams.render(), "docs/timeline.svg is out of date: run 'make docs' and commit it"


def test_the_timeline_is_well_formed_svg():
    root = ET.fromstring(load_diagrams().render())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_the_drawn_scenario_checkpoints_idle_groups_and_recovers_every_count():
    s = load_diagrams().simulate()
    # Both groups checkpoint at the same boundaries, the idle one included, so the
    # clock advances with them.
    assert s.checkpoints[2] == {0: 2000, 1: 2000} and s.checkpoints[3] == {0: 3000, 1: 3000}
    assert s.clocks == [None, None, 2000, 3000, 3000]
    assert s.counts == {"a": 11, "b": 5} == s.path_b_counts
    assert s.floor_ms == 3000 and s.dropped == [2400, 2800]
