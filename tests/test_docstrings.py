"""The docstrings cannot rot: every ``>>>`` example in ``manor/`` runs and prints what it
shows, and every public class of the package's face (``manor.__all__``) says in its own
docstring what it is."""

from __future__ import annotations

import doctest
import importlib
import inspect
from pathlib import Path

import pytest

import manor

PACKAGE = Path(manor.__file__).resolve().parent


def _modules_with_examples() -> list[str]:
    """The modules of ``manor`` whose source holds a ``>>>`` example."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_there_are_examples_to_run() -> None:
    """The finder finds the gate's example (so the test below cannot pass on nothing)."""
    assert "manor.admission.gate" in _modules_with_examples()


@pytest.mark.parametrize("name", _modules_with_examples())
def test_the_examples_of_a_module_run(name: str) -> None:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = [test for test in finder.find(module, name) if test.examples]
    assert tests, f"{name} has '>>>' in its source but no example doctest finds"
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples of {name} failed (the output above)"


_PUBLIC_CLASSES = sorted(
    name for name in manor.__all__ if inspect.isclass(getattr(manor, name)) and not issubclass(getattr(manor, name), BaseException)
)


@pytest.mark.parametrize("name", _PUBLIC_CLASSES)
def test_a_public_class_says_what_it_is(name: str) -> None:
    """Its own docstring, not one inherited from msgspec, enum or attrs."""
    cls = getattr(manor, name)
    doc = vars(cls).get("__doc__")
    assert doc and doc.strip(), f"manor.{name} has no docstring of its own"
