"""The overhead suite: what Manor's machinery costs per call, against bare trio.

Real clock, zero-latency backend (``InstantProvider``), the same work three ways, in one
process and one trio run, tick after tick of the scene's calls with at most ``gate
size`` in flight. A call is the backend's answer (``Provider.answer``) everywhere: what
Manor's tick loop asks of a backend, since it does not watch the stream, and what the
references ask too, so that no contender does more work for the same call.

- **manor**: ``TickLoop.step`` — plan, tickets, the pipeline policy, the whole stack
  (metrics, cost, breaker, timeout, gate, platform limiter), a ``CallRecord`` per call,
  the tick applied to the world. The zero-latency backend keeps a call's deadline
  itself, as the simulator does (``Provider.keeps_deadline``): the timeout layer hands
  the deadline down rather than opening a cancel scope, and the gate's waits are timed
  by the gate's one timekeeper. A backend that cannot keep deadlines
  (one that waits on a socket) costs a cancel scope more per call: about what
  ``trio_bounded`` adds to ``trio``, small beside any real call's latency;
- **trio**: a nursery and a ``trio.Semaphore``, the parent acquiring before it spawns
  each call and the call releasing when its answer is in;
- **aiometer**: ``aiometer.run_all(..., max_at_once=gate size)`` on trio (optional:
  ``pip install 'manor[bench]'``);
- **trio_bounded**, a reference: the trio baseline with the two bounds Manor puts on
  every call, written the plain trio way — the wait at the semaphore under the gate's
  timeout and each call under the call timeout, a cancel scope each. In trio a cancel
  scope costs about half a bare call with a zero-latency backend: this is what the
  bounds cost written the usual way;
- **manor_unbounded**, the other side of that: Manor's tick loop and stack with the two
  bounds left out (no call timeout, no bound on the gate's wait), a configuration only
  this suite builds: what Manor's machinery costs without them.

Each round runs every contender over the same number of ticks, interleaved, so a burst
of load from elsewhere on the machine hits all three alike; a contender's figure is its
best round's time per call (noise only ever adds time), and Manor's ratio to bare trio
(``ratio_vs_trio``, the one judged) the median of the rounds' ratios, each measured
side by side in its round (``ratio_vs_trio_rounds``), timed by the process's CPU time
(``time.process_time``): with a zero-latency backend the work is all CPU, so on an idle
machine that is the wall time, and on a busy one it leaves out other processes' turns.

The references repeat the scene's first tick. Manor plays the scene's world tick after
tick and counts the calls it makes: a game's ticks differ (a night of Werewolf asks four
players, a day all of them), and a game that ends is followed by the next (``NextGame``).
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from ..calls import Request
from ..layers import GateLayer, Stack, TimeoutLayer
from ..providers.provider import Provider
from ..run import interrupts
from ..run.engine import build_engine, scene_seed
from ..tick.loop import TickLoop
from .games import NextGame
from .instant import InstantProvider
from .suite import BenchContext, Suite

__all__ = ["SUITE", "aiometer_tick", "counted_tick", "drain", "trio_tick"]

CALLS = 20_000
CALLS_QUICK = 700
ROUNDS = 5
ROUNDS_QUICK = 2
_AIOMETER_MISSING = "unavailable: aiometer is not installed (pip install 'manor[bench]')"


async def drain(provider: Provider, request: Request) -> None:
    """One call to its answer, as the references make it: the backend's ``answer``,
    what Manor's tick loop asks for (no deadline: a reference bounds its calls itself,
    or not at all)."""
    await provider.answer(request)


async def trio_tick(provider: Provider, requests: Sequence[Request], limit: int) -> None:
    """One tick's calls the bare trio way: acquire, then spawn; release at the end."""
    semaphore = trio.Semaphore(limit)

    async def one(request: Request) -> None:
        try:
            await drain(provider, request)
        finally:
            semaphore.release()

    async with trio.open_nursery() as nursery:
        for request in requests:
            await semaphore.acquire()
            nursery.start_soon(one, request)


async def trio_bounded_tick(
    provider: Provider, requests: Sequence[Request], limit: int, wait_timeout: float, call_timeout: float
) -> None:
    """``trio_tick`` with the waits and the calls bounded by timeouts."""
    semaphore = trio.Semaphore(limit)

    async def one(request: Request) -> None:
        try:
            with trio.move_on_after(call_timeout):
                await drain(provider, request)
        finally:
            semaphore.release()

    async with trio.open_nursery() as nursery:
        for request in requests:
            with trio.move_on_after(wait_timeout):
                await semaphore.acquire()
            nursery.start_soon(one, request)


async def aiometer_tick(provider: Provider, requests: Sequence[Request], limit: int) -> None:
    """One tick's calls through ``aiometer.run_all``.

    Raises:
        ImportError: aiometer is not installed.
    """
    import aiometer

    await aiometer.run_all([functools.partial(drain, provider, request) for request in requests], max_at_once=limit)


def _without_bounds(loop: TickLoop) -> TickLoop:
    """``loop`` with no call timeout and no bound on the wait at the gate: everything
    of Manor's but the two bounds, whose cancel scopes are trio's cost, not Manor's."""
    kept = [layer for layer in loop.gated.layers if not isinstance(layer, TimeoutLayer | GateLayer)]
    loop.gated = Stack(loop.gated.backend, [*kept, GateLayer(loop.gate)])
    return loop


def _rounds(context: BenchContext) -> int:
    return ROUNDS_QUICK if context.quick else ROUNDS


def units(context: BenchContext) -> int:
    return 5 * _rounds(context)


def counted_tick(tick: Callable[[], Awaitable[None]], calls: int) -> Callable[[], Awaitable[int]]:
    """A reference's tick, saying how many calls it made."""

    async def counted() -> int:
        await tick()
        return calls

    return counted


def _manor_tick(loop: TickLoop) -> Callable[[], Awaitable[int]]:
    """A tick of ``loop``, saying how many calls it made."""

    async def step() -> int:
        return len((await loop.step()).calls)

    return step


def run(context: BenchContext) -> dict[str, Any]:
    config, scene = context.configure({"run.policy": "pipeline", "run.order": "fifo"})
    provider = InstantProvider()

    def loop() -> TickLoop:
        return build_engine(config, scene, backend=provider, instruments=[NextGame(scene, scene_seed(config, scene))]).loop

    manor = loop()
    requests = manor.world.plan()
    limit = manor.gate.size
    ticks = math.ceil((CALLS_QUICK if context.quick else CALLS) / len(requests))
    calls = ticks * len(requests)

    bounds = (config.settings.gate.timeout_s, config.settings.call.timeout_s)
    contenders: dict[str, Callable[[], Awaitable[int]]] = {
        "manor": _manor_tick(manor),
        "manor_unbounded": _manor_tick(_without_bounds(loop())),
        "trio": counted_tick(functools.partial(trio_tick, provider, requests, limit), len(requests)),
        "trio_bounded": counted_tick(functools.partial(trio_bounded_tick, provider, requests, limit, *bounds), len(requests)),
    }
    try:
        import aiometer  # noqa: F401
    except ImportError:
        aiometer_note: str | None = _AIOMETER_MISSING
    else:
        aiometer_note = None
        contenders["aiometer"] = counted_tick(functools.partial(aiometer_tick, provider, requests, limit), len(requests))

    async def measure() -> list[dict[str, float]]:
        """Each round's seconds per call of each contender."""
        rounds = []
        for contender in contenders.values():
            await contender()  # warm up: first-call costs are not overhead
        for _ in range(_rounds(context)):
            seconds = {}
            for name, contender in contenders.items():
                made = 0
                started = time.process_time()
                for _ in range(ticks):
                    made += await contender()
                seconds[name] = (time.process_time() - started) / made
                context.advance(1)
            rounds.append(seconds)
            if aiometer_note is not None:
                context.advance(1)
        return rounds

    rounds = interrupts.run(measure)
    best = {name: min(seconds[name] for seconds in rounds) for name in contenders}
    rates = {name: 1 / seconds for name, seconds in best.items()}
    # Manor against bare trio in each round, side by side: the figure judged is their median.
    ratios = [round(seconds["trio"] / seconds["manor"], 4) for seconds in rounds]
    aiometer_rate = rates.get("aiometer")
    return {
        "calls": calls,
        "rounds": _rounds(context),
        "gate_size": limit,
        "calls_per_tick": len(requests),
        "manor_calls_per_s": round(rates["manor"], 1),
        "trio_calls_per_s": round(rates["trio"], 1),
        "aiometer_calls_per_s": None if aiometer_rate is None else round(aiometer_rate, 1),
        "ratio_vs_trio": round(statistics.median(ratios), 4),
        "ratio_vs_trio_rounds": ratios,
        "ratio_vs_trio_best": round(rates["manor"] / rates["trio"], 4),
        "ratio_vs_aiometer": None if aiometer_rate is None else round(rates["manor"] / aiometer_rate, 4),
        "trio_bounded_calls_per_s": round(rates["trio_bounded"], 1),
        "manor_unbounded_calls_per_s": round(rates["manor_unbounded"], 1),
        "ratio_unbounded_vs_trio": round(rates["manor_unbounded"] / rates["trio"], 4),
        "ratio_vs_trio_bounded": round(rates["manor"] / rates["trio_bounded"], 4),
        "manor_us_per_call": round(best["manor"] * 1e6, 2),
        "trio_us_per_call": round(best["trio"] * 1e6, 2),
        **({"aiometer": aiometer_note} if aiometer_note else {}),
    }


SUITE = Suite(
    name="overhead",
    title="calls per second through the whole stack, against bare trio and aiometer (real clock)",
    units=units,
    run=run,
)
