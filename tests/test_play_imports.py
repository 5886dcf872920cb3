"""The dashboard's screens get their data, not the app: nothing the app imports imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import manor.play

PLAY = Path(manor.play.__file__).parent
#: The modules above the app: they build it or extend it.
ABOVE_THE_APP = {"__init__.py", "replay.py", "responsiveness.py"}


def _imports_the_app(path: Path) -> bool:
    """Whether ``path`` imports ``manor.play.app``, type-only imports included."""
    package = ".".join(("manor", *path.parent.relative_to(PLAY.parent.parent).parts[1:]))
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names = {f"{module}.{alias.name}" for alias in node.names}
            if module == "manor.play.app" or "manor.play.app" in names:
                return True
        elif isinstance(node, ast.Import) and any(alias.name == "manor.play.app" for alias in node.names):
            return True
    return False


def test_no_module_below_the_app_imports_it() -> None:
    importers = {str(path.relative_to(PLAY)) for path in PLAY.rglob("*.py") if _imports_the_app(path)}
    assert importers <= ABOVE_THE_APP, importers - ABOVE_THE_APP
    assert "replay.py" in importers, "the check sees a relative import"
