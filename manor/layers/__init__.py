"""Cross-cutting layers, outermost first: metrics (10), cost (20), breaker (30),
gate (50), timeout (60: a call's clock starts at admission), platform (90, innermost,
right above the backend). An engine's stack has the cost layer only with a budget, and
no metrics layer: a run's figures come from its records (``manor.tick.statistics``)."""

from .admission import GateLayer
from .stack import Layer, Observer, Split, Stack
from .breaker import BreakerLayer, BreakerState
from .cost import AgentCost, CostLayer
from .metrics import LatencyStatistics, MetricsLayer
from .platform import PlatformLayer
from .timeout import TimeoutLayer

__all__ = [
    "AgentCost",
    "BreakerLayer",
    "BreakerState",
    "CostLayer",
    "GateLayer",
    "LatencyStatistics",
    "Layer",
    "MetricsLayer",
    "Observer",
    "PlatformLayer",
    "Split",
    "Stack",
    "TimeoutLayer",
]
