"""Experiments: deterministic runs of the real engine code that answer one question each.

    design        the bounded-wait experiment's fixed numbers (read without running it)
    bounded_wait  the bounded-wait experiment, by the real adapter

The names below are imported when first asked for, so that importing ``design`` loads no
engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .bounded_wait import (
        ExperimentResult,
        ExperimentSettings,
        RequestResult,
        run_in_process,
        run_over_http,
    )

__all__ = ["ExperimentResult", "ExperimentSettings", "RequestResult", "run_in_process", "run_over_http"]


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(".bounded_wait", __name__), name)
