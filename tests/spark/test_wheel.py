"""The wheel is the product: built from the checkout as a release is (the sdist, then the
wheel from it), installed in a new virtual environment outside the checkout, it runs
the count example with ``persistent run`` and with ``spark-submit``.

The new environment gets the wheel alone (``--no-deps``). Its dependencies come from
this test's environment through a ``.pth`` file, which puts that site-packages
directory on ``sys.path`` without running the ``.pth`` files in it, so the editable
install of the checkout stays out. The example is a copy outside the checkout (the
examples put the checkout first on ``sys.path``), and every command runs there. That
the wheel requires what its modules import is checked on the wheel's metadata.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.spark.conftest import EXAMPLES

CHECKOUT = Path(__file__).resolve().parents[2]
TOTAL, KEYS = 3_000, 5


def run(command: list, **options) -> str:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, **options)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A new virtual environment holding the wheel of the checkout."""
    root = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "build", "--outdir", root / "dist", CHECKOUT])
    (wheel,) = (root / "dist").glob("persistent_state-*.whl")
    environment = root / "venv"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    ours = sysconfig.get_paths()
    Path(site, "dependencies.pth").write_text("\n".join(sorted({ours["purelib"], ours["platlib"]})) + "\n")
    run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel])
    return environment


def outside(directory: Path, **variables: str) -> dict:
    """``run``'s options for a command in ``directory``, outside the checkout, with this
    process's environment less the variables naming its Python or the checkout, plus ``variables``."""
    assert not directory.is_relative_to(CHECKOUT)
    hidden = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    return {"cwd": directory, "env": {**{k: v for k, v in os.environ.items() if k not in hidden}, **variables}}


def test_the_new_environment_imports_the_installed_packages_and_their_spark_defaults(installed, tmp_path):
    paths = run(
        [installed / "bin" / "python", "-c",
         "import monoids, state, persistent.tools.session as s\n"
         "print(monoids.__file__, state.__file__, s.__file__, s.DEFAULTS_FILE, s.LOGGING_FILE, sep='\\n')"],
        **outside(tmp_path),
    ).splitlines()
    assert len(paths) == 5 and all(Path(path).is_file() and Path(path).is_relative_to(installed) for path in paths)
    assert run([installed / "bin" / "persistent", "--help"], **outside(tmp_path)).startswith("usage: persistent")


def test_the_wheel_requires_every_package_its_modules_import_when_loaded(installed):
    """Each third-party module the wheel's modules import at load time comes from a
    distribution the wheel requires (not as an extra), or one of theirs: installed with
    its dependencies, the wheel imports. Lazy imports inside functions belong to extras."""
    (wheel,) = (installed.parent / "dist").glob("persistent_state-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        requires = [line.split(":", 1)[1] for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
        sources = {name: archive.read(name).decode() for name in archive.namelist() if name.endswith(".py")}
    core = {_distribution(r) for r in requires if "extra ==" not in r}
    provided = core | {_distribution(r) for d in core for r in importlib.metadata.requires(d) or ()
                       if "extra ==" not in r}
    owners = importlib.metadata.packages_distributions()
    ours = {name.split("/")[0] for name in sources}
    imported = {
        (name.split(".")[0], path)
        for path, text in sources.items() for node in ast.parse(text).body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
    }
    third_party = {(top, path) for top, path in imported if top and top not in sys.stdlib_module_names | ours}
    assert {"pyspark", "pandas", "numpy", "pyarrow"} <= {top for top, _ in third_party}
    unprovided = {(top, path) for top, path in third_party
                  if not {_distribution(d) for d in owners.get(top, [top])} & provided}
    assert not unprovided, f"imported at load time but not required by the wheel: {sorted(unprovided)}"


def _distribution(requirement: str) -> str:
    """The normalized distribution name a requirement (or a name) starts with."""
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9._-]+)", requirement).group(1)).lower()


@pytest.mark.spark
@pytest.mark.parametrize("launcher", ["persistent run", "spark-submit"])
def test_the_installed_package_counts_the_generated_messages_exactly(installed, spark_lock, tmp_path, launcher):
    from pyspark.find_spark_home import _find_spark_home

    app = tmp_path / "app" / "count.py"
    app.parent.mkdir()
    shutil.copy(Path(EXAMPLES) / "count.py", app)
    if launcher == "persistent run":  # it names its own Python for the workers
        command, options = [installed / "bin" / "persistent", "run"], outside(tmp_path)
    else:
        command = [Path(_find_spark_home()) / "bin" / "spark-submit"]
        options = outside(tmp_path, PYSPARK_PYTHON=str(installed / "bin" / "python"))
    run([*command, "--master", "local[2]", app, "--checkpoint", tmp_path / "ck", "--output",
         f"sqlite://{tmp_path / 'out.db'}", "--total", TOTAL, "--keys", KEYS, "--rows-per-batch", 1000,
         "--available-now", "--key-groups", 2, "--interval-ms", 500],
        timeout=300, **options)
    with sqlite3.connect(tmp_path / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == {f"k{k}": len(range(k, TOTAL, KEYS)) for k in range(KEYS)}
