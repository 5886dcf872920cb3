"""Manor: tick-loop orchestration for worlds whose characters are LLM agents.

The admission core, as a library: the platform's fail-fast ``SessionLimiter``, the one
shared ``Gate`` that queues fairly by ticket, providers that stream cold, the layers
that wrap them in a ``Stack``, and the layered configuration.
"""

from .calls import CALLER_KINDS, Admitted, CallerKind, Done, Event, Opened, Request, Started, TextDelta, Usage
from .config import Config, Settings, Source, resolve, standard_sources
from .errors import (
    REASONS,
    BudgetExceeded,
    CallError,
    CallTimeout,
    CircuitOpen,
    ConfigError,
    ContentError,
    GateTimeout,
    ManorError,
    ProviderError,
    SaveError,
    SessionLimitError,
    leaves,
    one_line,
)
from .gate import Gate, GateStatistics, Permit
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

__all__ = [
    "CALLER_KINDS",
    "REASONS",
    "Admitted",
    "BreakerLayer",
    "BreakerState",
    "BudgetExceeded",
    "CallError",
    "CallTimeout",
    "CallerKind",
    "CircuitOpen",
    "Config",
    "ConfigError",
    "ContentError",
    "CostLayer",
    "Done",
    "Event",
    "Gate",
    "GateLayer",
    "GateStatistics",
    "GateTimeout",
    "Layer",
    "ManorError",
    "MetricsLayer",
    "Opened",
    "Permit",
    "PlatformLayer",
    "Provider",
    "ProviderError",
    "Request",
    "SaveError",
    "Session",
    "SessionLimitError",
    "SessionLimiter",
    "SessionLimiterStatistics",
    "Settings",
    "SimProfile",
    "SimProvider",
    "Source",
    "Stack",
    "Started",
    "TextDelta",
    "TimeoutLayer",
    "Usage",
    "collect",
    "leaves",
    "one_line",
    "resolve",
    "standard_sources",
]
