"""Checks that the machine can run a job, each ending in one sentence saying what to install.

Standard library only: ``make`` runs it with the system Python before the virtual
environment exists (``python3 persistent/tools/environment.py``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

try:
    from persistent.core.errors import SetupError
except ImportError:  # run as a script by make, before the project is installed
    SetupError = RuntimeError

__all__ = ["EnvironmentProblem", "check_python", "check_java", "check_dependencies", "main"]

MIN_PYTHON = (3, 11)
MIN_JAVA = 17
#: Import names of the runtime dependencies, with the package that provides each.
DEPENDENCIES = {
    "pyspark": "pyspark>=4.0,<4.3",
    "pandas": "pandas>=2.2,<3",
    "pyarrow": "pyarrow",
    "numpy": "numpy",
    "datasketches": "datasketches",
}


class EnvironmentProblem(SetupError):
    """Something the machine lacks; the message says what to install."""


def check_python() -> None:
    """Raises unless this interpreter is Python 3.11 or newer."""
    if sys.version_info < MIN_PYTHON:
        raise EnvironmentProblem(
            f"Python {sys.version.split()[0]} is too old: install Python "
            f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer and run make again."
        )


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def check_java() -> int:
    """The major version of the Java that Spark will use; raises unless it is 17+."""
    java = _java_binary()
    if java is None:
        raise EnvironmentProblem(
            f"Java was not found: install a Java {MIN_JAVA} runtime (for example "
            f"'apt install openjdk-{MIN_JAVA}-jre-headless') or set JAVA_HOME."
        )
    probe = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', probe.stderr + probe.stdout)
    if not match:
        raise EnvironmentProblem(f"{java} -version printed no version: install a Java {MIN_JAVA} runtime.")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise EnvironmentProblem(
            f"Java {major} at {java} is too old for Spark 4: install Java {MIN_JAVA} or newer "
            "and put it first on PATH (or set JAVA_HOME)."
        )
    return major


def check_dependencies() -> None:
    """Raises naming the first missing Python dependency."""
    for module, package in DEPENDENCIES.items():
        if importlib.util.find_spec(module) is None:
            raise EnvironmentProblem(
                f"The Python package {module!r} is missing: run 'make test' (it installs "
                f"everything into .venv) or 'pip install \"{package}\"'."
            )


def main(argv: list[str] | None = None) -> int:
    """``python persistent/tools/environment.py [--dependencies]``: prints the problem, exits 1."""
    args = sys.argv[1:] if argv is None else argv
    try:
        check_python()
        check_java()
        if "--dependencies" in args:
            check_dependencies()
    except EnvironmentProblem as problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
