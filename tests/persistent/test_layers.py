"""The import graph keeps the layers: ``monoids`` <- ``state`` <- ``persistent``, and
inside ``persistent`` its rooms, lower to higher: ``core`` <- ``storage`` <- ``sources`` <-
``sinks`` <- ``runtime`` <- ``tools``.

Every module is read with ``ast``, not imported, and every import counts for the
layers, a lazy one inside a function as well: a room may import its own modules and
those of lower rooms, never a higher room nor a room beside it.
``persistent/__init__.py``, the package's face, stands
above every room; no room imports it. Imports form no cycle, a lazy one inside a
function included: it closes the loop as soon as the function runs; nor do they with
those for type annotations only (under ``if TYPE_CHECKING:``), which never run but
would make two modules know each other.

Every byte a job keeps goes through one package, ``persistent.storage``: no other
module, the examples included, calls Python's file functions, imports a module that
is nothing else, or a method of ``pathlib.Path`` that reads or writes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("monoids", "state", "persistent")
#: The rooms of ``persistent``, lowest first.
ROOMS = {"core": 0, "storage": 1, "sources": 2, "sinks": 3, "runtime": 4, "tools": 5}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def imports(module: str, modules: dict[str, Path] = MODULES) -> list[tuple[str, int, bool]]:
    """``(imported module, line, runs)`` for each import of ours in ``module`` (one of
    ``modules``): ``runs`` is False for one under ``if TYPE_CHECKING:``, which never runs.
    ``from package import name`` counts as the module ``package.name`` when that is one."""
    path = modules[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(node) for scope in ast.walk(tree) if _type_checking(scope) for node in ast.walk(scope)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                found.append((target, node.lineno, id(node) not in typing_only))
    return found


def _type_checking(node: ast.AST) -> bool:
    """Whether ``node`` is an ``if TYPE_CHECKING:`` block."""
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def room(module: str) -> str | None:
    """The room of a module of ``persistent`` (None for the package's face)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def layer_violations(module: str, target: str) -> str | None:
    top, aim = module.split(".")[0], target.split(".")[0]
    if top == "monoids":
        return None if aim == "monoids" else "monoids imports nothing of ours"
    if top == "state":
        return None if aim in ("monoids", "state") else "state imports only monoids"
    if aim != "persistent" or room(module) is None:
        return None
    here, there = room(module), room(target)
    if there is None:
        return "a room imports the package's face"
    if there not in ROOMS:
        return f"{target} is in no room"
    if there != here and ROOMS[there] >= ROOMS[here]:
        return f"room {here} imports room {there}, which is not below it"
    return None


def test_every_module_of_persistent_is_in_a_room():
    assert not [m for m in MODULES if m.startswith("persistent.") and room(m) not in ROOMS]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module):
    broken = [f"{MODULES[module].relative_to(ROOT)}:{line}: {target}: {why}"
              for target, line, _ in imports(module) if (why := layer_violations(module, target))]
    assert not broken, "\n".join(broken)


def import_cycle(modules: dict[str, Path], annotations: bool = False) -> list[str] | None:
    """A cycle of imports among ``modules`` (module names, first one last again), or None;
    every import that runs is an edge, one inside a function too, and with
    ``annotations`` one for type annotations only as well."""
    graph = {m: sorted({t for t, _, runs in imports(m, modules) if (runs or annotations) and t in modules and t != m})
             for m in modules}
    state: dict[str, str] = {}  # "open" while on the path, "done" after
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in graph[module]:
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in graph:
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_no_import_cycle_not_even_through_an_import_inside_a_function():
    cycle = import_cycle(MODULES)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


_TYPE_CHECKING_IMPORT = "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from state.low import Low\n"


def test_no_module_names_one_that_imports_it_even_in_an_annotation():
    cycle = import_cycle(MODULES, annotations=True)
    assert cycle is None, "import cycle through an annotation: " + " -> ".join(cycle)


@pytest.mark.parametrize(("lazy_import", "cycle"), [
    ("def build():\n    from state.low import Low\n", ["state.low", "state.high", "state.low"]),
    (_TYPE_CHECKING_IMPORT, None),
], ids=["inside-a-function", "type-checking"])
def test_an_import_inside_a_function_closes_a_cycle_and_one_for_type_checking_does_not(tmp_path, lazy_import, cycle):
    (tmp_path / "low.py").write_text("from state.high import High\n")
    (tmp_path / "high.py").write_text(lazy_import)
    assert import_cycle({"state.low": tmp_path / "low.py", "state.high": tmp_path / "high.py"}) == cycle


def test_an_import_for_type_checking_closes_a_cycle_of_annotations(tmp_path):
    (tmp_path / "low.py").write_text("from state.high import High\n")
    (tmp_path / "high.py").write_text(_TYPE_CHECKING_IMPORT)
    modules = {"state.low": tmp_path / "low.py", "state.high": tmp_path / "high.py"}
    assert import_cycle(modules, annotations=True) == ["state.low", "state.high", "state.low"]


#: Python's ways to a file system: functions by the name they are called with (after
#: resolving ``import x as y`` and ``from x import y``), modules that are nothing else,
#: and the methods of ``pathlib.Path`` that no ``persistent.storage.fs.FileSystem`` has.
FILE_SYSTEM_FUNCTIONS = {
    "open", "io.open", "os.open", "os.replace", "os.rename", "os.remove", "os.unlink", "os.makedirs", "os.mkdir",
    "os.rmdir", "os.removedirs", "os.scandir", "os.listdir", "os.walk", "os.stat", "os.lstat", "os.fsync",
    "os.truncate", "os.link", "os.symlink", "os.utime", "os.chmod", "os.path.exists", "os.path.lexists",
    "os.path.isfile", "os.path.isdir", "os.path.getsize", "os.path.getmtime", "shutil.copy", "shutil.copy2",
    "shutil.copyfile", "shutil.copytree", "shutil.move", "shutil.rmtree", "shutil.disk_usage",
}
FILE_SYSTEM_MODULES = ("tempfile", "glob", "pyarrow.fs")
PATH_METHODS = {"read_text", "write_text", "write_bytes", "iterdir", "glob", "rglob", "touch", "is_file", "is_dir",
                "unlink", "rmdir", "mkdir"}
#: The only package that touches a file system.
DURABLE = "persistent.storage"
SCANNED = {**MODULES, **{f"persistent.{module_name(path)}": path for path in sorted((ROOT / "examples").glob("*.py"))}}


def file_system_access(path: Path) -> list[str]:
    """``line: what`` for each way to a file system in the module at ``path``; opening
    ``os.devnull`` is none."""
    tree = ast.parse(path.read_text(), str(path))
    names = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
                if alias.name.startswith(FILE_SYSTEM_MODULES):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            if node.module.startswith(FILE_SYSTEM_MODULES) or (node.module == "pyarrow" and
                                                               any(a.name == "fs" for a in node.names)):
                found.append(f"{node.lineno}: from {node.module} import ...")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _dotted(node.func)
        if called is not None:
            head, _, rest = called.partition(".")
            called = ".".join(filter(None, [names.get(head, head), rest]))
        devnull = bool(node.args) and _dotted(node.args[0]) == "os.devnull"
        if called in FILE_SYSTEM_FUNCTIONS and not devnull:
            found.append(f"{node.lineno}: {called}()")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in PATH_METHODS:
            found.append(f"{node.lineno}: .{node.func.attr}()")
    return found


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def test_only_the_durable_package_touches_a_file_system():
    outside = {module: found for module, path in SCANNED.items()
               if not module.startswith(f"{DURABLE}.") and (found := file_system_access(path))}
    assert not outside, "\n".join(f"{SCANNED[module].relative_to(ROOT)}:{line}"
                                   for module in sorted(outside) for line in outside[module])


@pytest.mark.parametrize(("source", "found"), [
    ("import os\nos.replace('a', 'b')\n", ["2: os.replace()"]),
    ("from os import path as p\np.exists('a')\n", ["2: os.path.exists()"]),
    ("import shutil as sh\nsh.rmtree('a')\n", ["2: shutil.rmtree()"]),
    ("import tempfile\n", ["1: import tempfile"]),
    ("from pyarrow import fs\n", ["1: from pyarrow import ..."]),
    ("from pathlib import Path\nPath('a').write_text('b')\n", ["2: .write_text()"]),
    ("with open('a') as f:\n    pass\n", ["1: open()"]),
    ("import os\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n", []),
    ("import os\nos.path.join('a', 'b')\nfs.exists('a')\n", []),
], ids=["os", "alias-from", "alias-import", "module", "pyarrow-fs", "pathlib", "builtin", "devnull", "none"])
def test_each_way_to_a_file_system_is_found(tmp_path, source, found):
    (tmp_path / "module.py").write_text(source)
    assert file_system_access(tmp_path / "module.py") == found
