"""Running benchmark suites and gathering their figures into one result."""

from __future__ import annotations

import importlib
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ..run import interrupts
from .catalogue import DEFAULT_SUITES, SUITE_MODULES
from .report import evaluate_targets
from .suite import BenchContext, Suite

__all__ = ["DEFAULT_SUITES", "SUITES", "Progress", "interruption", "run_bench"]

#: Every suite, in the order ``manor bench`` runs them (``catalogue``).
SUITES: dict[str, Suite] = {name: importlib.import_module(f".{module}", __package__).SUITE for name, module in SUITE_MODULES.items()}

#: Told a suite is starting and how many units it will do; returns the suite's
#: ``advance`` callback.
Progress = Callable[[Suite, int], Callable[[int], None]]


def run_bench(names: Sequence[str], context: BenchContext, progress: Progress | None = None) -> dict[str, Any]:
    """Run the suites called ``names`` (in the order of ``SUITES``) and return the
    result: the scene, each suite's figures under its name (or, under ``skipped``, why
    it could not measure the scene), and the targets. A signal stops the run after the
    suites done so far: ``interrupted`` names the suite it stopped and the signal
    (``interruption``).

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
        try:
            result[suite.name] = suite.run(attrs.evolve(context, advance=advance))
        except KeyboardInterrupt as exc:
            # Ctrl-C or SIGTERM: the suites done so far keep their figures (a full run
            # takes minutes); the command prints them and then says it was stopped.
            signum = exc.signum if isinstance(exc, interrupts.Interrupted) else interrupts.signal_received()
            result["interrupted"] = {"suite": suite.name, "signal": signal.Signals(signum).name}
            break
    result["targets"] = evaluate_targets(result)
    return result


def interruption(result: Mapping[str, Any]) -> interrupts.Interrupted | None:
    """How a signal stopped the run whose ``result`` this is (``None``: it was not),
    with what it had done by then."""
    stopped = result.get("interrupted")
    if stopped is None:
        return None
    done = [name for name in result["suites"] if name in result]
    kept = f"the figures of {', '.join(done)} above" if done else "no suite had finished"
    return interrupts.Interrupted(signal.Signals[stopped["signal"]], f"during the {stopped['suite']} suite; {kept}")
