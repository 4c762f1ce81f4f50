"""The wheel is the product: built from the checkout as a release is (the sdist, then the
wheel from it), installed in a new virtual environment outside the checkout, it runs its
installed examples with ``persistent run`` and with ``spark-submit``, on ``local[2]`` and,
as docs/deploy.md's standalone section shows, on a standalone master and worker bound to
127.0.0.1, with the commands of that section.

The new environment gets the wheel alone (``--no-deps``). Its dependencies come from
this test's environment through a ``.pth`` file, which puts that site-packages
directory on ``sys.path`` without running the ``.pth`` files in it, so the editable
install of the checkout stays out. Every command runs in a directory outside the
checkout, and the examples run from their installed files (``persistent.examples``).
That the wheel requires what its modules import is checked on the wheel's metadata.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest
from jvm_servers import _free_ports

CHECKOUT = Path(__file__).resolve().parents[2]
TOTAL, KEYS = 3_000, 5


def run(command: list, **options) -> str:
    return completed(command, **options).stdout


def completed(command: list, **options) -> subprocess.CompletedProcess:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, **options)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


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
         "import monoids, state, persistent.storage.package_data as s\n"
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


def test_the_installed_examples_answer_help_as_modules(installed, tmp_path):
    shown = run([installed / "bin" / "python", "-m", "persistent.examples.wordcount", "--help"], **outside(tmp_path))
    assert shown.startswith("usage: ") and "Word count over a directory of text files" in shown
    where = run([installed / "bin" / "python", "-c", "import persistent.examples.wordcount as w; print(w.__file__)"],
                **outside(tmp_path)).strip()
    assert Path(where).is_relative_to(installed)


def installed_example(installed: Path, name: str, directory: Path) -> str:
    """The file of the installed example ``name``, as docs/deploy.md finds it."""
    return run([installed / "bin" / "python", "-c", f"import persistent.examples.{name} as app; print(app.__file__)"],
               **outside(directory)).strip()


def spark_home(installed: Path, directory: Path) -> str:
    """docs/deploy.md's ``SPARK_HOME``: the pyspark the environment's Python imports."""
    return run([installed / "bin" / "python", "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
               **outside(directory)).strip()


def count_command(installed: Path, launcher: str, master: str, directory: Path) -> tuple[list, dict]:
    """docs/deploy.md's commands: ``persistent run`` of the example by name, or
    ``spark-submit`` of its installed file with SPARK_HOME and PYSPARK_PYTHON exported."""
    args = ["--checkpoint", directory / "ck", "--output", f"sqlite://{directory / 'out.db'}", "--total", TOTAL,
            "--keys", KEYS, "--available-now"]
    if launcher == "persistent run":  # it names its own Python for the workers
        return [installed / "bin" / "persistent", "run", "--master", master, "count", *args], {}
    home = spark_home(installed, directory)
    return ([Path(home) / "bin" / "spark-submit", "--master", master, installed_example(installed, "count", directory),
             *args], {"SPARK_HOME": home, "PYSPARK_PYTHON": str(installed / "bin" / "python")})


def assert_counted_exactly(directory: Path) -> None:
    with sqlite3.connect(directory / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == {f"k{k}": len(range(k, TOTAL, KEYS)) for k in range(KEYS)}


@pytest.mark.spark
@pytest.mark.parametrize("launcher", ["persistent run", "spark-submit"])
def test_the_installed_package_counts_the_generated_messages_exactly(installed, spark_lock, tmp_path, launcher):
    """With Spark's half of the fold, which the wheel ships built: nothing is compiled or
    kept in a home under which nothing can be written (a file: root ignores a directory's mode)."""
    home = tmp_path / "home"
    home.write_text("")
    command, variables = count_command(installed, launcher, "local[2]", tmp_path)
    done = completed(command, timeout=300, **outside(tmp_path, HOME=str(home), **variables))
    assert "[persistent] messages cross the shuffle packed per key group" in done.stdout + done.stderr
    assert_counted_exactly(tmp_path)


@pytest.fixture(scope="module")
def standalone(installed, spark_lock, tmp_path_factory):
    """A standalone master and one worker (1 core, 1g) on 127.0.0.1, started in the
    foreground as docs/deploy.md shows (``spark-class``); its master URL."""
    work = tmp_path_factory.mktemp("standalone")
    home = spark_home(installed, work)
    port, master_ui, worker_ui = _free_ports(3)  # three at once: one at a time may give one port twice
    master_url = f"spark://127.0.0.1:{port}"
    environment = {**outside(work, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=home)["env"],
                   "SPARK_LOG_DIR": str(work / "logs")}
    daemons = []
    for name, arguments in [
        ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", port,
                    "--webui-port", master_ui]),
        ("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", 1, "--memory", "1g",
                    "--webui-port", worker_ui, "--work-dir", work / "work", master_url]),
    ]:
        with open(work / f"{name}.log", "w") as log:
            daemons.append(subprocess.Popen([Path(home) / "bin" / "spark-class", *map(str, arguments)], cwd=work,
                                            env=environment, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True))
    try:
        deadline = time.monotonic() + 120
        while not _alive_workers(master_ui):
            assert time.monotonic() < deadline, (work / "worker.log").read_text()[-3000:]
            assert all(d.poll() is None for d in daemons), (work / "master.log").read_text()[-3000:]
            time.sleep(1)
        yield master_url
    finally:
        for daemon in reversed(daemons):
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(60)


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.mark.spark
@pytest.mark.parametrize("launcher", ["persistent run", "spark-submit"])
def test_deploys_commands_count_exactly_on_a_standalone_cluster_and_end(installed, standalone, tmp_path, launcher):
    """docs/deploy.md's submit commands, on its standalone master and worker: to the end
    (``--available-now``), exit status 0, exact counts."""
    command, variables = count_command(installed, launcher, standalone, tmp_path)
    run(command, timeout=400, **outside(tmp_path, SPARK_LOCAL_IP="127.0.0.1", **variables))
    assert_counted_exactly(tmp_path)
