"""Manor: tick-loop orchestration for worlds whose characters are LLM agents.

The admission core, as a library: the platform's fail-fast ``SessionLimiter``, the one
shared ``Gate`` that queues fairly by ticket, providers that stream cold, the layers
that wrap them in a ``Stack``, and the layered configuration; and the world API a game
implements (``World``, ``Caller``, ``GameOver``, ``chain_hash``, ``decode_answer``).

Each name is imported from its module on first use (PEP 562), so that importing a part
of Manor - ``manor --help`` imports ``manor.cli`` - does not load the whole engine.
"""

from .run.startup import stop_at_once_if_command

# Before anything slow is imported: a signal while the command starts is one line (startup).
stop_at_once_if_command()

import importlib
from typing import TYPE_CHECKING, Any

#: The module each exported name is defined in, relative to this package. The one table
#: to change when a module moves.
_HOMES: dict[str, tuple[str, ...]] = {
    ".admission.gate": ("Gate", "GateStatistics", "Permit", "SharedGate", "SharedPermit"),
    ".admission.limiter": ("Session", "SessionLimiter", "SessionLimiterStatistics"),
    ".answers": ("InvalidAnswer", "decode_answer"),
    ".callers": ("Caller", "CallerStyle"),
    ".calls": ("Admitted", "Done", "Event", "Opened", "Released", "Request", "Started", "TextDelta", "Usage"),
    ".config": ("Config", "Settings", "Source", "resolve", "standard_sources"),
    ".content": ("SceneKeys",),
    ".errors": (
        "ERROR_CHARS", "REASONS", "AccessRefused", "BudgetExceeded", "CallError", "CallTimeout", "CircuitOpen", "ConfigError", "ContentError", "FleetError",
        "GateTimeout", "GateUnavailable", "InvalidOutput", "ManorError", "PlatformClosed", "ProviderError", "RefusedBy", "SaveError", "SessionLimitError",
        "SharedGateError", "WorldError", "add_secret", "error_line", "leaves", "one_line", "redacted_url",
    ),
    ".layers": ("BreakerLayer", "BreakerState", "CostLayer", "GateLayer", "Layer", "MetricsLayer", "PlatformLayer", "Stack", "TimeoutLayer"),
    ".providers": ("MockProvider", "Provider", "SimProfile", "SimProvider", "collect"),
    ".records": ("CallRecord", "StoryEntry", "TickRecord"),
    ".worlds": ("GameOver", "World", "chain_hash", "start_hash"),
}  # fmt: skip

if TYPE_CHECKING:
    # The same names, for type checkers and editors: they read these imports (never run)
    # where they cannot follow ``__getattr__``. Kept equal to ``_HOMES`` (test_exports).
    from .admission.gate import Gate, GateStatistics, Permit, SharedGate, SharedPermit
    from .admission.limiter import Session, SessionLimiter, SessionLimiterStatistics
    from .answers import InvalidAnswer, decode_answer
    from .callers import Caller, CallerStyle
    from .calls import Admitted, Done, Event, Opened, Released, Request, Started, TextDelta, Usage
    from .config import Config, Settings, Source, resolve, standard_sources
    from .content import SceneKeys
    from .errors import (
        ERROR_CHARS, REASONS, AccessRefused, BudgetExceeded, CallError, CallTimeout, CircuitOpen, ConfigError, ContentError, FleetError,
        GateTimeout, GateUnavailable, InvalidOutput, ManorError, PlatformClosed, ProviderError, RefusedBy, SaveError, SessionLimitError,
        SharedGateError, WorldError, add_secret, error_line, leaves, one_line, redacted_url,
    )
    from .layers import BreakerLayer, BreakerState, CostLayer, GateLayer, Layer, MetricsLayer, PlatformLayer, Stack, TimeoutLayer
    from .providers import MockProvider, Provider, SimProfile, SimProvider, collect
    from .records import CallRecord, StoryEntry, TickRecord
    from .worlds import GameOver, World, chain_hash, start_hash

_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "ERROR_CHARS",
    "REASONS",
    "AccessRefused",
    "Admitted",
    "BreakerLayer",
    "BreakerState",
    "BudgetExceeded",
    "CallError",
    "CallRecord",
    "Caller",
    "CallTimeout",
    "CallerStyle",
    "CircuitOpen",
    "Config",
    "ConfigError",
    "ContentError",
    "CostLayer",
    "Done",
    "Event",
    "FleetError",
    "Gate",
    "GateLayer",
    "GateStatistics",
    "GameOver",
    "GateTimeout",
    "GateUnavailable",
    "InvalidAnswer",
    "InvalidOutput",
    "Layer",
    "ManorError",
    "MetricsLayer",
    "MockProvider",
    "Opened",
    "Permit",
    "PlatformClosed",
    "PlatformLayer",
    "Provider",
    "ProviderError",
    "RefusedBy",
    "Released",
    "Request",
    "SaveError",
    "SceneKeys",
    "Session",
    "SessionLimitError",
    "SessionLimiter",
    "SessionLimiterStatistics",
    "Settings",
    "SharedGate",
    "SharedGateError",
    "WorldError",
    "SharedPermit",
    "SimProfile",
    "SimProvider",
    "Source",
    "Stack",
    "Started",
    "StoryEntry",
    "TextDelta",
    "TickRecord",
    "TimeoutLayer",
    "Usage",
    "World",
    "add_secret",
    "chain_hash",
    "collect",
    "decode_answer",
    "error_line",
    "leaves",
    "one_line",
    "redacted_url",
    "resolve",
    "standard_sources",
    "start_hash",
]


def __getattr__(name: str) -> Any:
    """An exported name, imported from its module the first time it is asked for."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # asked once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
