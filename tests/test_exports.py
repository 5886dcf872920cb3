"""Every module says what it exports, and the package exports what it claims."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import manor
import manor.calls
import manor.errors
import manor.layers

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(manor.__path__, "manor.") if not info.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_every_module_declares_all_and_every_name_in_it_exists(name: str) -> None:
    """``__all__`` is present, has no duplicates, and names only things the module has."""
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    assert [n for n in exported if not hasattr(module, n)] == []


def test_the_package_exports_exactly_what_it_claims() -> None:
    """``from manor import *`` gives every name of ``manor.__all__``, and nothing private."""
    namespace: dict[str, object] = {}
    exec("from manor import *", namespace)  # noqa: S102 - the star import is the point
    del namespace["__builtins__"]
    assert sorted(namespace) == sorted(manor.__all__)
    assert [n for n in manor.__all__ if n.startswith("_")] == []


def test_the_package_re_exports_the_defining_objects() -> None:
    """Each top-level name is the very object its own module defines, not a copy."""
    for name in manor.__all__:
        value = getattr(manor, name)
        home = getattr(value, "__module__", None)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert home is not None and home.startswith("manor.")
            assert getattr(importlib.import_module(home), name) is value, name


PACKAGE = Path(manor.__file__).parent

#: The packages that export names lazily (a module ``__getattr__``), by their ``__init__``.
LAZY = sorted(
    path
    for path in PACKAGE.rglob("__init__.py")
    if any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in ast.parse(path.read_text(encoding="utf-8")).body)
)


def _typed_homes(tree: ast.Module) -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` block imports -> the module it names (``.calls``)."""
    homes: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for line in node.body:
                assert isinstance(line, ast.ImportFrom) and line.level, "the block holds only relative from-imports"
                for alias in line.names:
                    assert alias.asname is None, f"{alias.name} is imported under another name"
                    homes[alias.name] = "." * line.level + (line.module or "")
    return homes


def _assigned(tree: ast.Module, name: str) -> object:
    """The literal a module-level ``name = ...`` (or ``name: T = ...``) assigns, or None."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            assert node.value is not None
            return ast.literal_eval(node.value)
    return None


def lazy_export_drift(source: str) -> list[str]:
    """How a lazily exporting ``__init__`` disagrees with itself: names exported
    (``__all__``) but not imported for type checkers or the other way round, and names
    whose home in ``_HOMES`` differs from the module the type-only import names."""
    tree = ast.parse(source)
    typed = _typed_homes(tree)
    exported = _assigned(tree, "__all__")
    assert isinstance(exported, list)
    drift = [f"{n}: exported, not imported under TYPE_CHECKING" for n in sorted(set(exported) - set(typed))]
    drift += [f"{n}: imported under TYPE_CHECKING, not exported" for n in sorted(set(typed) - set(exported))]
    table = _assigned(tree, "_HOMES")
    if table is not None:  # module -> names (manor), or name -> module without its dot (manor.bench)
        assert isinstance(table, dict)
        lazy = (
            {name: module for module, names in table.items() for name in names}
            if all(isinstance(names, tuple) for names in table.values())
            else {name: f".{module}" for name, module in table.items()}
        )
        drift += [f"{n}: in _HOMES, not exported" for n in sorted(set(lazy) - set(exported))]
        drift += [f"{n}: exported, not in _HOMES" for n in sorted(set(exported) - set(lazy))]
        drift += [f"{n}: _HOMES says {lazy[n]}, TYPE_CHECKING {typed[n]}" for n in sorted(set(lazy) & set(typed)) if lazy[n] != typed[n]]
    return drift


# Adding a name ``Extra`` to one list of the package face: ``_HOMES``, the type-only
# imports, ``__all__``.
_IN_HOMES = ('".records": ("CallRecord",', '".records": ("CallRecord", "Extra",')
_IN_TYPE_CHECKING = ("from .records import CallRecord,", "from .records import CallRecord, Extra,")
_IN_ALL = ('    "CallRecord",\n', '    "CallRecord",\n    "Extra",\n')


class TestTypeCheckersSeeTheLazyExports:
    """A lazy export is ``Any`` to a type checker unless an ``if TYPE_CHECKING:`` import
    names it too: the two lists are read from the source and must agree."""

    def test_the_lazy_packages_are_found(self) -> None:
        assert {path.parent.name for path in LAZY} >= {"manor", "bench", "experiment"}

    @pytest.mark.parametrize("path", LAZY, ids=lambda path: path.parent.name)
    def test_every_lazy_export_is_imported_for_type_checkers(self, path: Path) -> None:
        assert lazy_export_drift(path.read_text(encoding="utf-8")) == []

    @pytest.mark.parametrize(
        ("changes", "found"),
        [
            ([_IN_HOMES], ["Extra: in _HOMES, not exported"]),
            ([_IN_TYPE_CHECKING], ["Extra: imported under TYPE_CHECKING, not exported"]),
            ([_IN_ALL], ["Extra: exported, not imported under TYPE_CHECKING", "Extra: exported, not in _HOMES"]),
            ([_IN_ALL, _IN_TYPE_CHECKING], ["Extra: exported, not in _HOMES"]),
            ([_IN_ALL, _IN_HOMES], ["Extra: exported, not imported under TYPE_CHECKING"]),
            ([("from .content import SceneKeys\n", "from .records import SceneKeys\n")], ["SceneKeys: _HOMES says .content, TYPE_CHECKING .records"]),
            ([_IN_ALL, _IN_HOMES, _IN_TYPE_CHECKING], []),
        ],
        ids=["homes-only", "type-checking-only", "all-only", "not-in-homes", "not-type-checking", "moved-home", "added-everywhere"],
    )
    def test_a_name_missing_from_a_list_is_found(self, changes: list[tuple[str, str]], found: list[str]) -> None:
        """The check itself, on the package face with a name ``Extra`` added to some of
        its three lists (or a name's home changed in one)."""
        source = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
        for old, new in changes:
            assert source.count(old) == 1
            source = source.replace(old, new)
        assert lazy_export_drift(source) == found

    def test_the_package_is_marked_typed(self) -> None:
        """Without ``py.typed`` (PEP 561) a type checker skips an installed ``manor``
        altogether, whatever the imports say."""
        assert (PACKAGE / "py.typed").is_file()


@pytest.mark.parametrize(
    "names",
    [
        ["Gate", "GateStatistics", "Permit", "SessionLimiter", "SessionLimitError"],
        ["Request", "Admitted", "Opened", "Started", "TextDelta", "Done", "Usage", "Event"],
        ["Provider", "SimProvider", "SimProfile", "collect"],
        ["Stack", "Layer", "GateLayer", "PlatformLayer", "TimeoutLayer", "BreakerLayer", "MetricsLayer", "CostLayer"],
        ["Config", "Settings", "Source", "resolve", "standard_sources"],
        ["World", "Caller", "CallerStyle", "GameOver", "chain_hash", "start_hash", "decode_answer"],
    ],
    ids=["admission", "calls", "providers", "layers", "config", "worlds"],
)
def test_the_public_api_is_importable_from_the_package(names: list[str]) -> None:
    """The admission core's public names are all in ``manor.__all__``."""
    assert [n for n in names if n not in manor.__all__] == []


def test_the_core_names_no_worlds_caller_kinds() -> None:
    """The manor world's caller kinds are the manor world's (``manor.worlds.manor``),
    not the package's: a world declares its own (``World.callers``)."""
    assert "CallerKind" not in manor.__all__ and "CALLER_KINDS" not in manor.__all__
    assert not hasattr(manor.calls, "CallerKind")


def test_the_whole_error_tree_is_exported_from_the_package() -> None:
    """Every error class (and the list of reasons) is importable from ``manor``."""
    assert set(manor.errors.__all__) <= set(manor.__all__)
    errors = [getattr(manor, n) for n in manor.errors.__all__ if inspect.isclass(getattr(manor, n))]
    assert all(issubclass(cls, manor.ManorError) for cls in errors)


def test_every_layer_is_exported_from_the_package() -> None:
    """Each concrete layer class of ``manor.layers`` is a top-level name too."""
    layers = [n for n in manor.layers.__all__ if n.endswith("Layer")]
    assert [n for n in layers if n not in manor.__all__] == []


def test_python_dash_m_manor_runs_the_cli() -> None:
    """``python -m manor --help`` is the command line, exiting 0."""
    result = subprocess.run([sys.executable, "-m", "manor", "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "config" in result.stdout
