"""Every module says what it exports, and the package exports what it claims."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

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
