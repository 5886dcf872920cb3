"""The house's plan, checked against its imports: no module of ``manor`` imports one that
imports it back (type-only imports count: they are read by every type checker and every
reader), and no arrow runs from a lower floor up to a higher one.

The floors, lowest first, are the design: the shared nouns at the ground; configuration;
admission (the gates); the backends; content; the layers around a call; the worlds; the
tick; save files (data at rest, whose writer is an instrument of the tick); a run
assembled from settings; running a save again and fleets of worlds; the servers and
experiments; the dashboard; the benchmarks; the command line; and the package's face.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

import manor

PACKAGE = Path(manor.__file__).parent

FLOORS: list[set[str]] = [
    {
        "manor.answers", "manor.callers", "manor.calls", "manor.clock", "manor.draws", "manor.errors", "manor.folds", "manor.limits", "manor.output_file", "manor.paced_clock",
        "manor.records", "manor.templates", "manor.timer", "manor.version", "manor.wording",
    },
    {"manor.config"},
    {"manor.admission"},
    {"manor.providers"},
    {"manor.content"},
    {"manor.layers"},
    {"manor.worlds"},
    {"manor.tick"},
    {"manor.saves"},
    {"manor.run"},
    {"manor.replay", "manor.fleet"},
    {"manor.serve", "manor.experiment"},
    {"manor.play"},
    {"manor.bench"},
    {"manor.cli"},
    {"manor", "manor.__main__"},
]  # fmt: skip


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: its dotted name -> (file, whether it is a package)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


MODULES = modules()


def imported(name: str) -> Iterator[str]:
    """The modules of the package that module ``name`` imports, at any depth of its code
    (``if TYPE_CHECKING:`` and function-level imports included)."""
    path, is_package = MODULES[name]
    base = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - node.level + 1]
                target = ".".join(parent + [node.module] if node.module else parent)
            else:
                target = node.module or ""
            for alias in node.names:
                yield from _known(f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name)


def _known(name: str) -> Iterator[str]:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    if name:
        yield name


def floor(name: str) -> int:
    """The floor a module stands on: that of the longest prefix named in ``FLOORS``."""
    best, found = -1, -1
    for number, names in enumerate(FLOORS):
        for prefix in names:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), number
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                group.append(other)
                if other == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in edges:
        if node not in index:
            visit(node)
    return found


@functools.cache
def edges() -> dict[str, set[str]]:
    """Each module's imports of others of the package (parsed once: every test reads them)."""
    return {
        name: {other for other in imported(name) if other != name and not name.startswith(other + ".")}
        for name in MODULES
    }


def test_every_module_stands_on_a_floor() -> None:
    assert [name for name in MODULES if floor(name) < 0] == []


def test_no_import_circle() -> None:
    assert circles(edges()) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_runs_up_the_floors(name: str) -> None:
    up = sorted(other for other in edges()[name] if floor(other) > floor(name))
    assert up == [], f"{name} (floor {floor(name)}) imports from higher floors"


def test_nothing_in_the_package_imports_its_face() -> None:
    """``manor/__init__.py`` imports (for type checkers) from nearly every module, so one
    importing ``manor`` back would close a circle; ``edges`` leaves out imports of an
    enclosing package, so this is looked for apart."""
    assert [name for name in MODULES if name != "manor" and "manor" in set(imported(name))] == []


def test_a_circle_is_found() -> None:
    """The finder itself: a loop of three, beside a module outside it."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
