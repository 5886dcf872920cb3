"""Running benchmark suites and gathering their figures into one result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from . import fastforward, fleet, overhead, play, redis_gate, replay, scale, scheduling
from .report import evaluate_targets
from .suite import BenchContext, Suite

__all__ = ["DEFAULT_SUITES", "SUITES", "Progress", "run_bench"]

#: Every suite, in the order ``manor bench`` runs them.
SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (scheduling.SUITE, overhead.SUITE, fastforward.SUITE, scale.SUITE, replay.SUITE, play.SUITE, fleet.SUITE, redis_gate.SUITE)
}
#: The suites ``manor bench`` runs when none is named: those ``by_default`` (not
#: ``fleet``, so that a plain ``manor bench`` is what it was, nor ``redis-gate``, which
#: needs a Redis server).
DEFAULT_SUITES: tuple[str, ...] = tuple(name for name, suite in SUITES.items() if suite.by_default)

#: Told a suite is starting and how many units it will do; returns the suite's
#: ``advance`` callback.
Progress = Callable[[Suite, int], Callable[[int], None]]


def run_bench(names: Sequence[str], context: BenchContext, progress: Progress | None = None) -> dict[str, Any]:
    """Run the suites called ``names`` (in the order of ``SUITES``) and return the
    result: the scene, each suite's figures under its name (or, under ``skipped``, why
    it could not measure the scene), and the targets.

    Raises:
        ConfigError: a bad setting.
        ContentError: the scene cannot be loaded.
        BenchError: a suite could not run.
    """
    config, scene = context.configure()  # a bad setting fails before any suite starts
    suites = [suite for name, suite in SUITES.items() if name in names]
    result: dict[str, Any] = {
        "scene": scene.spec.name,
        "quick": context.quick,
        "suites": [suite.name for suite in suites],
    }
    for suite in suites:
        reason = suite.skip(context)
        if reason is not None:
            result.setdefault("skipped", {})[suite.name] = reason
            continue
        advance = progress(suite, suite.units(context)) if progress else context.advance
        result[suite.name] = suite.run(attrs.evolve(context, advance=advance))
    result["targets"] = evaluate_targets(result)
    return result
