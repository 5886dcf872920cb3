"""The scale suite: what a tick costs as the cast grows, per call and in memory.

Ticks of 100, 1,000, 10,000 and 100,000 generated characters (``--agents N``) through
the whole engine, real clock, zero-latency backend. Cost per call should stay flat: a
tick must do no work that grows faster than its number of calls.

Each round of a cast size is measured in a fresh Python process, so that its peak memory
is its own: ``peak_rss_mb`` is that process's peak resident set size (``getrusage``
``ru_maxrss``) — the interpreter, Manor, the scene and the ticks — and
``baseline_rss_mb`` the same just before the first tick, so the difference is what the
ticks themselves took. ``rss_per_agent_kb`` is the peak less the process before it loaded
the scene (``startup_rss_mb``: the interpreter and Manor), over the agents: what an agent
costs, its calls in flight included. (``tracemalloc`` would see only Python's own allocations and slow
the ticks it measures.)

Every size is timed over the same number of calls, so that a small cast is not timed over
a fraction of a second while a large one is timed over seconds. A round of a size is a
fresh process: a first tick warms up, then it runs whole ticks until they have made at
least 100,000 calls (one tick at 100,000 agents, 1,000 ticks at 100; ``--quick``: 1,000
calls), and its cost is its CPU time (the process's, ``time.process_time``) over its
calls, everything that happened in it counted — the garbage collections that landed
there too. Three rounds, each of every size in turn (100, 1,000, 10,000, 100,000, then
again), so that a spell of load falls on the sizes alike; ``per_call_us`` is the median
of a size's three rounds (``per_call_us_rounds``), and its memory figures are those of
the round that peaked highest. With a zero-latency backend a tick is all CPU work, so
on an idle machine CPU and wall time agree, and on a busy one the CPU time leaves out
the time other processes had the CPU. ``tick_wall_s`` is the median wall time of a
measured tick. A round runs its ticks with what it built frozen out of the collector's
full passes, as ``manor run`` does (``manor.tick.gc_pause.what_is_built_frozen``).

Beside each size, the same calls without Manor, as references: bare trio with every
call spawned at once, waiting on a ``trio.Semaphore`` of the gate's size (the shape of
Manor's pipeline, where every call of a tick is a task queued at the gate), and bare
trio with the parent acquiring before it spawns (at most gate-size tasks alive). If the
first grows too, the growth is in having that many tasks alive, not in Manor's code.
"""

from __future__ import annotations

import functools
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from ..calls import Request
from ..providers.provider import Provider
from ..run import interrupts
from ..run.engine import build_engine, scene_seed
from ..tick.gc_pause import what_is_built_frozen
from ..worlds import create_world
from .instant import InstantProvider
from .overhead import counted_tick, drain, trio_tick
from .fresh_process import in_fresh_process
from .suite import BenchContext, BenchError, Suite

__all__ = ["AGENTS", "AGENTS_QUICK", "SUITE", "measure"]

AGENTS = (100, 1_000, 10_000, 100_000)
AGENTS_QUICK = (100, 1_000)
#: Seconds a call may wait at the gate: longer than any tick here.
_GATE_TIMEOUT_S = 3600.0
#: Calls a round of a cast size makes at least, in whole ticks: the largest size's tick.
_WINDOW = 100_000
_WINDOW_QUICK = 1_000
#: Rounds a cast size is measured over, each in a fresh process; its cost is their median.
ROUNDS = 3


def _window(quick: bool) -> int:
    return _WINDOW_QUICK if quick else _WINDOW


def _peak_rss_mb() -> float:
    """This process's peak resident set size. On Linux from ``/proc/self/status``
    (``VmHWM``): ``getrusage``'s ``ru_maxrss`` survives ``execve``, so a worker started
    from a parent that had grown (a full ``manor bench``, after the other suites) would
    report the parent's peak as its own."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def measure(context: BenchContext, agents: int, window: int) -> dict[str, Any]:
    """One round of ``agents`` characters here, in this process: a warm-up tick, then
    ticks until they have made at least ``window`` calls."""
    startup = _peak_rss_mb()
    # A tick of 100,000 calls on a busy machine can take longer than the default gate
    # timeout (30 s of real time): its calls would degrade and this would time other work.
    config, scene = context.configure(
        {"run.agents": agents, "run.policy": "pipeline", "run.order": "fifo", "gate.timeout_s": _GATE_TIMEOUT_S}
    )
    provider = InstantProvider()
    engine = build_engine(config, scene, backend=provider)
    baseline = _peak_rss_mb()
    limit = engine.loop.gate.size

    async def medians(tick: Callable[[], Awaitable[int]]) -> tuple[float, float, int]:
        """Median wall seconds of a tick, CPU seconds of a call over the round, and the
        ticks it ran, after a warm-up tick. ``tick`` returns its calls."""
        await tick()
        walls, calls, ticks = [], 0, 0
        cpu = time.process_time()
        while calls < window:
            wall = time.perf_counter()
            calls += await tick()
            walls.append(time.perf_counter() - wall)
            ticks += 1
        return statistics.median(walls), (time.process_time() - cpu) / calls, ticks

    degraded = 0

    async def tick() -> int:
        nonlocal degraded
        record = await engine.loop.step()
        degraded += sum(not call.ok for call in record.calls)
        return len(record.calls)

    async def timed() -> tuple[float, float, int, float, float, float, int]:
        wall, cpu, ticks = await medians(tick)
        peak = _peak_rss_mb()  # before the references run: theirs is not Manor's memory
        # The references' calls, planned only now: Manor's peak must not hold them.
        requests = engine.loop.world.plan()

        _, all_at_once, _ = await medians(counted_tick(functools.partial(_all_at_once_tick, provider, requests, limit), len(requests)))
        _, acquire_first, _ = await medians(counted_tick(functools.partial(trio_tick, provider, requests, limit), len(requests)))
        return wall, cpu, ticks, peak, all_at_once, acquire_first, len(requests)

    with what_is_built_frozen():  # as ``manor run`` runs its ticks
        wall, cpu, ticks, peak, all_at_once, acquire_first, calls = interrupts.run(timed)
    if degraded:
        raise BenchError(f"{degraded} calls degraded: the ticks did not all do the same work")
    return {
        "agents": agents,
        "tick_wall_s": round(wall, 6),
        "per_call_us": round(cpu * 1e6, 2),
        "peak_rss_mb": round(peak, 1),
        "calls_per_tick": calls,
        "ticks_per_round": ticks,
        "baseline_rss_mb": round(baseline, 1),
        "startup_rss_mb": round(startup, 1),
        "rss_per_agent_kb": round((peak - startup) * 1024 / agents, 2),
        "trio_all_at_once_per_call_us": round(all_at_once * 1e6, 2),
        "trio_acquire_first_per_call_us": round(acquire_first * 1e6, 2),
    }


async def _all_at_once_tick(provider: Provider, requests: Sequence[Request], limit: int) -> None:
    """One tick's calls the bare trio way, every call a task at once, queued at a
    semaphore (the reference for Manor's shape)."""
    semaphore = trio.Semaphore(limit)

    async def one(request: Request) -> None:
        async with semaphore:
            await drain(provider, request)

    async with trio.open_nursery() as nursery:
        for request in requests:
            nursery.start_soon(one, request)


def _in_fresh_process(context: BenchContext, agents: int) -> dict[str, Any]:
    """``measure`` in a new interpreter.

    Raises:
        BenchError: the measuring process failed (its last line of stderr says why).
    """
    result: dict[str, Any] = in_fresh_process(measure, context, f"scale suite, {agents} agents", agents=agents, window=_window(context.quick))
    return result


def _sizes(context: BenchContext) -> tuple[int, ...]:
    return AGENTS_QUICK if context.quick else AGENTS


def units(context: BenchContext) -> int:
    return len(_sizes(context)) * ROUNDS


def skip(context: BenchContext) -> str | None:
    """Why the scene cannot be measured here: only a world whose every character calls
    every tick (the Wacky Manor) has a cost per call that a cast size alone sets. Its
    first tick says (``plan`` changes nothing): a player's call for every character."""
    config, scene = context.configure()
    world = create_world(scene, scene_seed(config, scene))
    players = {request.agent for request in world.plan() if request.caller in world.callers and world.callers[request.caller].player}
    if players != set(scene.characters):
        return (f"it measures generated casts of a world where every character calls every tick, as in the Wacky Manor; "
                f"not every character calls on the first tick of {scene.spec.name}: {scene.spec.name} plays world '{world.name}'")  # fmt: skip
    return None


def run(context: BenchContext) -> list[dict[str, Any]]:
    context.configure()  # a bad setting fails here, in one line, not in a worker
    rounds: dict[int, list[dict[str, Any]]] = {agents: [] for agents in _sizes(context)}
    # Round by round, every size in turn: a spell of load on the machine falls on the
    # sizes alike, not on the one whose process happened to run then.
    for _ in range(ROUNDS):
        for agents, points in rounds.items():
            points.append(_in_fresh_process(context, agents))
            context.advance(1)
    return [_point(points) for points in rounds.values()]


_MEDIANS = ("tick_wall_s", "per_call_us", "trio_all_at_once_per_call_us", "trio_acquire_first_per_call_us")


def _point(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A size's figures from its rounds: the median of each time; the memory of the
    round that peaked highest."""
    highest = max(rounds, key=lambda point: point["peak_rss_mb"])
    return {
        **highest,
        **{key: statistics.median(point[key] for point in rounds) for key in _MEDIANS},
        "rounds": len(rounds),
        "per_call_us_rounds": [point["per_call_us"] for point in rounds],
    }


SUITE = Suite(
    name="scale",
    title="tick wall time, cost per call and peak memory at 100 to 100,000 agents (real clock)",
    units=units,
    run=run,
    skip=skip,
)
