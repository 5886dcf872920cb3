"""Manor: tick-loop orchestration for worlds whose characters are LLM agents.

The admission core, as a library: the platform's fail-fast ``SessionLimiter``, the one
shared ``Gate`` that queues fairly by ticket, providers that stream cold, the layers
that wrap them in a ``Stack``, and the layered configuration; and the world API a game
implements (``World``, ``Caller``, ``GameOver``, ``chain_hash``, ``decode_answer``).
"""

from .startup import stop_at_once_if_command

# Before anything slow is imported: a signal while the command starts is one line (startup).
stop_at_once_if_command()

from .answers import InvalidAnswer, decode_answer  # noqa: E402
from .calls import CALLER_KINDS, Admitted, CallerKind, Done, Event, Opened, Request, Started, TextDelta, Usage
from .config import Config, Settings, Source, resolve, standard_sources
from .errors import (
    ERROR_CHARS,
    REASONS,
    BudgetExceeded,
    CallError,
    CallTimeout,
    CircuitOpen,
    ConfigError,
    ContentError,
    FleetError,
    GateTimeout,
    GateUnavailable,
    InvalidOutput,
    ManorError,
    ProviderError,
    RefusedBy,
    SaveError,
    SessionLimitError,
    SharedGateError,
    WorldError,
    add_secret,
    error_line,
    leaves,
    one_line,
    redacted_url,
)
from .gate import Gate, GateStatistics, Permit, SharedGate, SharedPermit
from .layers import (
    BreakerLayer,
    BreakerState,
    CostLayer,
    GateLayer,
    Layer,
    MetricsLayer,
    PlatformLayer,
    Stack,
    TimeoutLayer,
)
from .limiter import Session, SessionLimiter, SessionLimiterStatistics
from .providers import Provider, SimProfile, SimProvider, collect
from .records import CallRecord, StoryEntry, TickRecord
from .worlds import Caller, GameOver, World, chain_hash, start_hash

__all__ = [
    "CALLER_KINDS",
    "ERROR_CHARS",
    "REASONS",
    "Admitted",
    "BreakerLayer",
    "BreakerState",
    "BudgetExceeded",
    "CallError",
    "CallRecord",
    "Caller",
    "CallTimeout",
    "CallerKind",
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
    "Opened",
    "Permit",
    "PlatformLayer",
    "Provider",
    "ProviderError",
    "RefusedBy",
    "Request",
    "SaveError",
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
