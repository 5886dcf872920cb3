"""What a benchmark suite is, and the context every suite runs in.

A suite is a name, a function that says how many units of work it will do (for the
progress bar) and a function that does them and returns its figures as a plain dict
(what ``manor bench --json`` prints under the suite's name).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import attrs

from ..config import Config, Source, standard_sources
from ..config.layering import FLAGS
from ..content import Scene
from ..errors import ManorError
from ..records import StoryEntry, TickRecord
from ..run.engine import configure
from ..tick.instruments import Instrument

__all__ = ["BENCH_ORDINAL", "BenchContext", "BenchError", "Suite", "TickCollector"]

#: The ordinal of the settings a suite sets for one of its runs (a policy, a gate size):
#: above the command line, so that a sweep over gate sizes is not undone by
#: ``--gate-size``, which sets the size of the headline runs only.
BENCH_ORDINAL = FLAGS + 50


class BenchError(ManorError):
    """A benchmark cannot be run as asked (a plot file type, a missing extra)."""


def _standard_sources() -> tuple[Source, ...]:
    return tuple(standard_sources())


@final
@attrs.frozen
class BenchContext:
    """Everything a suite needs to know about the run it is part of.

    Args:
        sources: the user's settings sources (defaults, manor.toml, MANOR_*, flags).
        quick: run the small version (seconds, for tests and a first look).
        draws: seeded draws (ticks) per scheduling configuration.
        advance: called with a number of units done, for the progress bar.
    """

    sources: tuple[Source, ...] = attrs.field(factory=_standard_sources, converter=tuple)
    quick: bool = False
    draws: int = attrs.field(default=200, validator=attrs.validators.ge(1))
    advance: Callable[[int], None] = lambda units: None

    def configure(self, overrides: Mapping[str, Any] | None = None) -> tuple[Config, Scene]:
        """Settings and scene for one run of a suite: the user's, with ``overrides``
        (what the run is about: a policy, a gate size) on top.

        Raises:
            ConfigError: a bad setting.
            ContentError: the scene cannot be loaded.
        """
        return configure([*self.sources, Source("manor bench", BENCH_ORDINAL, dict(overrides or {}))])


@final
@attrs.frozen
class Suite:
    """One benchmark suite.

    Args:
        name: what ``--suite`` and the JSON call it.
        title: a line saying what it measures.
        units: how many units of work it will report through ``context.advance``.
        run: does the work and returns the suite's figures.
        skip: why the suite cannot measure the context's scene, or ``None`` if it can.

    Which suites a plain ``manor bench`` runs is said in ``catalogue``.
    """

    name: str
    title: str
    units: Callable[[BenchContext], int]
    run: Callable[[BenchContext], Any]
    skip: Callable[[BenchContext], str | None] = lambda context: None


class TickCollector(Instrument):
    """Keeps the tick records of the run it is attached to, each one reported to the
    progress bar as it finishes."""

    def __init__(self, context: BenchContext) -> None:
        self.context = context
        self.ticks: list[TickRecord] = []

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.ticks.append(record)
        self.context.advance(1)
