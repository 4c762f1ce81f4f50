"""setup.cfg names every package of the checkout, and ships examples/ as ``persistent.examples``
(``tests/spark/test_wheel.py`` installs the wheel and runs them)."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_setup_cfg_lists_every_package_and_maps_the_examples():
    setup = configparser.ConfigParser(interpolation=None)
    setup.read(ROOT / "setup.cfg")
    listed = set(setup["options"]["packages"].split())
    found = {".".join(init.parent.relative_to(ROOT).parts)
             for top in ("monoids", "state", "persistent") for init in (ROOT / top).rglob("__init__.py")}
    assert listed == found | {"persistent.examples"}
    assert setup["options"]["package_dir"].split() == ["persistent.examples", "=", "examples"]
    assert (ROOT / "examples" / "__init__.py").is_file()
