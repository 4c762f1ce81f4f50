"""The import graph keeps the layers: ``monoids`` <- ``state`` <- ``persistent``, and
inside ``persistent`` its rooms, lower to higher: ``core`` <- ``storage`` <- ``sources``,
``sinks`` <- ``runtime`` <- ``tools``.

Every module is read with ``ast``, not imported, and every import counts for the
layers, a lazy one inside a function as well: a room may import its own modules and
those of lower rooms, never a higher room nor a room beside it (``sources`` and
``sinks`` stand side by side). ``persistent/__init__.py``, the package's face, stands
above every room; no room imports it. Module-level imports form no cycle; one for
type annotations only (under ``if TYPE_CHECKING:``) runs at no import and is no edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("monoids", "state", "persistent")
#: The rooms of ``persistent``, lowest first; rooms of one rank stand side by side.
ROOMS = {"core": 0, "storage": 1, "sources": 2, "sinks": 2, "runtime": 3, "tools": 4}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def imports(module: str) -> list[tuple[str, int, bool]]:
    """``(imported module, line, at module level)`` for each import of ours in ``module``;
    ``from package import name`` counts as the module ``package.name`` when that is one."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    local = {id(node) for scope in ast.walk(tree) if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.Lambda)) or _type_checking(scope)
             for node in ast.walk(scope)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                found.append((target, node.lineno, id(node) not in local))
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


def test_no_module_level_import_cycle():
    graph = {m: sorted({t for t, _, top in imports(m) if top and t in MODULES and t != m}) for m in MODULES}
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
            pytest.fail("import cycle: " + " -> ".join(cycle))
