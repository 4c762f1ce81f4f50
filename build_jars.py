"""Builds Spark's half of the fold (``persistent/jvm/Fold.scala``) with Maven: one jar per
Spark minor version that ``pom.xml`` has a profile for, beside it, where the wheel ships them
and ``persistent.runtime.fold`` loads the one of the running Spark. A jar newer than the
sources and the pom is kept.

What the two halves agree on is defined once, in ``persistent/runtime/fold_wire.py``;
``wire()`` writes it into ``Wire.scala`` beside ``Fold.scala`` (not kept in the
repository) before Maven compiles them.

A build step, not part of the package: the wheel's build (``setup.py``) and ``make`` run
it as a script, before the project is installed, so it uses the standard library only.
It needs Maven (``mvn``) and a JDK 17 or newer.
"""

from __future__ import annotations

import re
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "persistent" / "jvm"
WIRE = HERE.parent / "runtime" / "fold_wire.py"
SOURCES = (HERE / "Fold.scala", HERE / "pom.xml", WIRE)


def wire() -> Path:
    """Writes ``Wire.scala``: ``object Wire`` with each upper-case string of ``fold_wire.py``
    under its name (rewritten only when that changes it)."""
    constants = {name: value for name, value in runpy.run_path(str(WIRE)).items()
                 if name.isupper() and isinstance(value, str)}
    lines = [f"// Written by build_jars.py from {WIRE.parent.name}/{WIRE.name}: change that file, not this one.",
             "package org.apache.spark.sql.persistent", "", "object Wire {",
             *(f"  val {name} = {_scala_string(value)}" for name, value in constants.items()), "}", ""]
    path, text = HERE / "Wire.scala", "\n".join(lines)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def _scala_string(value: str) -> str:
    if not value.isprintable() or '"' in value or "\\" in value:
        raise SystemExit(f"{WIRE}: {value!r} cannot be a Scala string as it is")
    return f'"{value}"'


def minors() -> list[str]:
    """The Spark minor versions ``pom.xml`` builds a jar for (its ``spark-X.Y`` profiles)."""
    return re.findall(r"<id>spark-(\d+\.\d+)</id>", (HERE / "pom.xml").read_text())


def jar(minor: str) -> Path:
    """Where the jar for Spark ``minor`` (``"4.2"``) is kept."""
    return HERE / f"persistent-fold-spark-{minor}.jar"


def build() -> list[Path]:
    """Builds each minor version's jar unless it is newer than the sources; the jars."""
    wire()
    newest = max(source.stat().st_mtime for source in SOURCES)
    stale = [minor for minor in minors() if not jar(minor).is_file() or jar(minor).stat().st_mtime < newest]
    if stale and shutil.which("mvn") is None:
        raise SystemExit("building Spark's half of the fold needs Maven: install mvn (and a JDK 17), "
                         "or install a built wheel")
    with tempfile.TemporaryDirectory() as target:
        for minor in stale:
            print(f"building {jar(minor).name} with Maven", file=sys.stderr)
            done = subprocess.run(["mvn", "-q", "-B", "-f", str(HERE / "pom.xml"), "-P", f"spark-{minor}",
                                   f"-Dtarget.root={target}", "package"], capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"mvn -P spark-{minor} package failed:\n{done.stdout[-4000:]}{done.stderr[-2000:]}")
            shutil.copyfile(Path(target, f"spark-{minor}", jar(minor).name), jar(minor))
    return [jar(minor) for minor in minors()]


if __name__ == "__main__":
    build()
