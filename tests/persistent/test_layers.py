"""The import graph keeps the layers: ``monoids`` <- ``state`` <- ``persistent``, and
inside ``persistent`` its rooms, lower to higher: ``core`` <- ``storage`` <- ``sources``,
``sinks`` <- ``runtime`` <- ``tools``.

Every module is read with ``ast``, not imported, and every import counts for the
layers, a lazy one inside a function as well: a room may import its own modules and
those of lower rooms, never a higher room nor a room beside it (``sources`` and
``sinks`` stand side by side). ``persistent/__init__.py``, the package's face, stands
above every room; no room imports it. Imports form no cycle, a lazy one inside a
function included: it closes the loop as soon as the function runs. One for type
annotations only (under ``if TYPE_CHECKING:``) never runs and is no edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("monoids", "state", "persistent")
#: The rooms of ``persistent``, lowest first; rooms of one rank stand side by side.
#: ``jvm`` is no package: Spark's half of the fold and the script that builds its jars
#: before the project is installed, which imports nothing of ours.
ROOMS = {"core": 0, "jvm": 0, "storage": 1, "sources": 2, "sinks": 2, "runtime": 3, "tools": 4}


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


def import_cycle(modules: dict[str, Path]) -> list[str] | None:
    """A cycle of imports among ``modules`` (module names, first one last again), or None;
    every import that runs is an edge, one inside a function too."""
    graph = {m: sorted({t for t, _, runs in imports(m, modules) if runs and t in modules and t != m})
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


@pytest.mark.parametrize(("lazy_import", "cycle"), [
    ("def build():\n    from state.low import Low\n", ["state.low", "state.high", "state.low"]),
    ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from state.low import Low\n", None),
], ids=["inside-a-function", "type-checking"])
def test_an_import_inside_a_function_closes_a_cycle_and_one_for_type_checking_does_not(tmp_path, lazy_import, cycle):
    (tmp_path / "low.py").write_text("from state.high import High\n")
    (tmp_path / "high.py").write_text(lazy_import)
    assert import_cycle({"state.low": tmp_path / "low.py", "state.high": tmp_path / "high.py"}) == cycle
