"""The installed Manor's version: what ``manor --version`` prints and a save's header
records. A module of its own, at the ground, so that ``--version`` loads no engine."""

from __future__ import annotations

import importlib.metadata

__all__ = ["engine_version"]


def engine_version() -> str:
    """The installed Manor's version ("unknown" when it is not installed)."""
    try:
        return importlib.metadata.version("manor")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
