"""Opening a live run: its gate, what runs through it, its clock and the gate's connection.

Every command that runs live (``manor run``, ``play``, ``fleet`` and each process of a
fleet) opens its run here, so the steps that were each command's own preamble — settings
to a gate, the gate to an engine, the gate's connection around the trio run, the clock of
that run, the saves made where a signal cannot cut them in half, what was built frozen
out of the cyclic collector's way while it runs — are written once.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final

import attrs
import trio

from ..admission.gate import Gate, SharedGate
from ..clock import MockClock
from ..config import Config
from ..content import Scene
from ..tick.gc_pause import what_is_built_frozen
from . import interrupts
from .engine import gate_for, scene_seed

if TYPE_CHECKING:  # a run without a save loads no save code (its start-up, every `manor run`)
    from ..saves import SaveWriter

__all__ = ["LiveRun", "gate_connected", "open_run"]

#: What runs through the gate: an ``Engine``, or the worlds of a fleet.
T = TypeVar("T")
R = TypeVar("R")


@final
@attrs.define(eq=False)
class LiveRun(Generic[T]):
    """A live run, opened by ``open_run``: the gate its calls share, what runs through
    it (``runs``: an ``Engine``, a fleet), the clock of its trio run and the saves it
    writes. ``async with`` it connects the gate around the run (inside the trio run);
    ``run`` is that trio run, stopped by a signal as every command's is.

    Example::

        live = open_run([(config, scene)], lambda gate: build_engine(config, scene, gate=gate))
        live.run(lambda engine: engine.loop.run(10), after=lambda: "")

    Attributes:
        clock: the trio clock: virtual (``None``: real time when a world needs it).
        saves: the save writers ``run`` made (``saves=``), in order.
    """

    gate: SharedGate
    runs: T
    clock: trio.abc.Clock | None
    saves: list[SaveWriter] = attrs.field(factory=list)
    _connection: AbstractAsyncContextManager[None] | None = attrs.field(default=None, init=False)

    async def __aenter__(self) -> T:
        self._connection = gate_connected(self.gate, _warn)
        await self._connection.__aenter__()
        return self.runs

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._connection is not None, "left before it was entered"
        connection, self._connection = self._connection, None
        return await connection.__aexit__(*exc)

    def run(
        self,
        main: Callable[[T], Awaitable[R]],
        *,
        after: Callable[[], str],
        saves: Callable[[T], Sequence[SaveWriter]] | None = None,
    ) -> R:
        """Make the run's saves, then run ``main(runs)`` in a trio run on the run's
        clock, the gate connected around it (``interrupts.run``), and what was built
        before it — the worlds, their engines, the saves — frozen out of the cyclic
        collector's reach while it runs (``what_is_built_frozen``): it lives as long as
        the run, and full collections need not walk it.

        Args:
            after: what the run had done, for the line a signal ends it with.
            saves: makes the run's save writers (``SaveWriter.create`` adds each to
                its engine's loop); made where a signal waits until every writer is
                there, so that what reports the signal finds them to close.

        Raises:
            Interrupted: a signal stopped the run.
            SaveError: a save could not be made.
        """
        if saves is not None:
            with interrupts.held():
                self.saves += saves(self.runs)

        async def connected() -> R:
            async with self as runs:
                return await main(runs)

        with what_is_built_frozen():
            return interrupts.run(connected, clock=self.clock, after=after)


def open_run(
    configured: Sequence[tuple[Config, Scene]],
    build: Callable[[SharedGate], T],
    *,
    world: str | None = None,
    virtual: Callable[[T], trio.abc.Clock] = lambda runs: MockClock(autojump_threshold=0),
) -> LiveRun[T]:
    """Open a live run of the worlds ``configured`` (one, or a fleet's): the gate their
    settings describe (the first world's: a fleet's worlds share it), what ``build``
    makes to run through it, and the clock of their one trio run: virtual, unless a
    world needs real time (an agent on a real backend, a shared gate, ``--clock real``).

    A shared gate's server is reached once here, so that a command whose server is down
    ends in one line before it creates a save or takes the screen.

    Args:
        build: the gate -> what runs through it (``build_engine``, ``build_fleet``).
        world: what this process runs, as ``manor gate status`` lists it; by default
            the first scene and its seed (a fleet names its worlds).
        virtual: what runs -> the simulated clock, when the run's time is simulated
            (the dashboard's runs at a speed).

    Raises:
        SharedGateError: ``gate.url`` is set, but the server cannot be reached or the
            Redis client is not installed.
        Interrupted: a signal stopped the check of the server.
        ConfigError, ContentError: as ``build`` raises them.
    """
    config, scene = configured[0]
    if world is None:
        world = f"{scene.spec.name} seed {scene_seed(config, scene)}"
    gate = gate_for(config.settings.gate, world=world)
    if not isinstance(gate, Gate):
        # In a trio run that a signal cancels, as every run of a command: a SIGTERM raised
        # as KeyboardInterrupt inside the Redis client's code could be lost there, or leave
        # the run waiting forever (a fleet's process the parent stopped while it started).
        interrupts.run(gate.check_reachable)
    runs = build(gate)
    real = any(config.settings.run.clock == "real" for config, _ in configured)
    return LiveRun(gate, runs, None if real else virtual(runs))


@asynccontextmanager
async def gate_connected(gate: SharedGate, notice: Callable[[str], object]) -> AsyncIterator[None]:
    """Within: ``gate`` connected; what it has to tell the user once connected (on
    Redis, that a gate there already keeps another size, or this process's tenant
    another weight) goes to ``notice``, a line each."""
    async with gate.connected():
        for said in getattr(gate, "notices", ()):
            notice(said)
        yield


def _warn(notice: str) -> None:
    print(f"manor: warning: {notice}", file=sys.stderr)
