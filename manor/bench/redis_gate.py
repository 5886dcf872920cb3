"""The redis-gate suite: what sharing the gate through Redis costs, across real processes.

Two measurements, each with 1, 2 and 4 OS processes sharing one gate on one Redis:

- **admission**: every process keeps ``WAITERS`` callers looping acquire → release with
  nothing in between, so the gate is always full and every admission but the first few
  follows a release. Admissions per second (all processes together); the admission
  latency after a release — from ``release()`` in one process to the admitted caller
  running in another (or the same), p50 and p95, on the wall clock these processes
  share; and Jain's fairness index of the processes' admissions.
- **makespan**: each process runs one world of the scene (seeds ``seed``, ``seed + 1``,
  …) through the whole engine for ``TICKS`` ticks, its simulated latencies scaled by
  ``LATENCY_SCALE`` and slept in real time; the same worlds run in one process, sharing
  one in-process ``Gate`` of the same size. ``ratio``: the in-process fleet's mean tick
  makespan over the Redis fleet's (target >= 0.9: the shared gate costs at most a tenth).
  ``fairness``: Jain's index of the worlds' completed calls per second.

And one **fleet** (``manor fleet --processes``): ``FLEET_WORLDS`` worlds over
``FLEET_PROCESSES`` processes on the Redis gate, each process a fleet of its worlds
(latencies scaled alike), against the same fleet in one process on the in-process gate:
the mean tick makespans and their ``ratio`` (in one process over the processes'), and
both fleets' fairness as ``manor fleet`` reports it.

The Redis server is ``gate.url`` (``--gate-url``, ``MANOR_GATE_URL``, manor.toml) when
set; otherwise a ``redis-server`` started for the suite on a free loopback port, when
one is installed; otherwise the suite says that no Redis is reachable.

And the **mixed** fleets of the fleet suite (``manor.bench.fleet``: the manor beside its
twin, beside a crowd of 204 calls a tick, beside an oracle of 21 calls of 18 s), on the
real clock with latencies, the gate timeout and ``gate.claim_s`` scaled alike: in one
process on the in-process gate; in one process on the Redis gate (a process's worlds
are lanes, which must keep their turns through the server); and one world per process on
the Redis gate, each a tenant by its host and process id: as ``manor fleet --processes
2`` (a parent starts both once both have joined), and as two separate ``manor run``
invocations on one URL (a run's engine each, no parent, no ticket office, started at
one wall-clock instant, each joining the gate then, just before its first tick, as
``manor run`` does). ``manor_vs_twin``: the manor's mean (and p95) tick beside the
other world over beside its twin, each way; ``vs_in_process``: that over the in-process
gate's (target: within 10 %). ``manor_first_tick_s`` and ``manor_vs_twin_mean_after_first``
(the mean from the second tick on) set the first tick apart: processes cannot start at one
instant, and whichever reaches the server first takes every free slot no joined tenant's
claim needs (in one process every world's first tickets are issued at one instant). ``shares``: each world's share of
the gate's session-time as ``manor fleet`` reports it (``manor.fleet.shares``; for the
processes, counted on the monotonic clock they share).

A process of either measurement is this module run as a program (``python -m
manor.bench.redis_gate WHAT JSON``), printing its figures as one JSON line. The processes
of a measurement start together: each says ``ready`` once it has started (and joined the
gate, where it joins before its start), and once all have, the parent sends each the
same wall-clock instant to start at, a moment away.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import msgspec
import trio

from ..admission.gate import SharedGate
from ..config import Config, Source
from ..content import Scene
from ..errors import SharedGateError
from ..fleet.in_process import WorldService, add_shares, build_fleet, configure_worlds, fleet_tenants, parts
from ..fleet.shares import admission_figures, shifted
from ..fleet.processes import Part, ProcessFleet
from ..run import interrupts
from ..run.engine import build_engine, gate_for, scene_seed, scene_sim
from ..tick.statistics import RunStatistics, percentile
from .suite import BENCH_ORDINAL, BenchContext, Suite

__all__ = ["SUITE", "jain"]

PROCESSES = (1, 2, 4)
#: Callers per process in the admission measurement.
WAITERS = 8
ADMISSION_S, ADMISSION_S_QUICK = 5.0, 1.5
TICKS, TICKS_QUICK = 6, 2
#: The fleet row: this many worlds over this many processes.
FLEET_WORLDS, FLEET_PROCESSES = 4, 2
#: Simulated latencies, scaled to real time: the scene's 0.6-2.4 s calls take 30-120 ms.
LATENCY_SCALE = 0.05
#: The mixed fleets: (name, the worlds' ``--scenes`` entries), ticks each.
MIXED = (
    ("manor beside its twin", ("wacky_manor", "wacky_manor")),
    ("manor beside a crowd", ("wacky_manor", "crowd")),
    ("manor beside an oracle", ("wacky_manor", "oracle")),
)
MIXED_TICKS, MIXED_TICKS_QUICK = 12, 4
#: The ways the mixed fleets run: one process on the in-process gate, one process on
#: Redis (the worlds are lanes), a process per world on Redis (a tenant each): as a
#: fleet over processes, and as separate runs (``manor run`` each, no parent).
MIXED_WAYS = ("in_process", "redis_one_process", "redis_two_processes", "redis_two_runs")
#: From the last process's ``ready`` to the instant every process starts at: time for the
#: parent to tell them all and for each to read it.
START_AFTER_READY_S = 0.1


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: 1.0 when every value is equal, 1/n when one has it all."""
    if not values or not any(values):
        return 1.0
    return sum(values) ** 2 / (len(values) * sum(value * value for value in values))


def units(context: BenchContext) -> int:
    return 2 * len(PROCESSES) + 2


def run(context: BenchContext) -> dict[str, Any]:
    config, scene = context.configure()
    with _redis(config) as url:
        if url is None:
            return {"available": False, "note": "no Redis reachable: set --gate-url (or MANOR_GATE_URL), or install redis-server"}
        size = config.settings.gate.first_size
        seconds = ADMISSION_S_QUICK if context.quick else ADMISSION_S
        ticks = TICKS_QUICK if context.quick else TICKS
        admission = []
        for processes in PROCESSES:
            admission.append(_admission(url, processes, size, seconds))
            context.advance(1)
        makespan = []
        for processes in PROCESSES:
            makespan.append(_makespans(context, url, processes, ticks))
            context.advance(1)
        fleet = _fleet(context, url, ticks)
        context.advance(1)
        mixed = _mixed(context, url, MIXED_TICKS_QUICK if context.quick else MIXED_TICKS)
        context.advance(1)
    return {
        "available": True,
        "url": url,
        "gate_size": size,
        "waiters_per_process": WAITERS,
        "latency_scale": LATENCY_SCALE,
        "ticks": ticks,
        "admission": admission,
        "makespan": makespan,
        "ratio": min(point["ratio"] for point in makespan),
        "fleet": fleet,
        "mixed": mixed,
    }


@contextmanager
def _redis(config: Config) -> Iterator[str | None]:
    """The Redis to measure on: ``gate.url``, else one started here, else ``None``."""
    if config.settings.gate.url:
        yield config.settings.gate.url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    yield None
                    return
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.kill()
        server.wait()


def _spawn(what: str, job: dict[str, Any]) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "manor.bench.redis_gate", what, json.dumps(job)]
    # Unbuffered: ``_together`` reads the "ready" line alone, ``_collect`` the rest.
    return subprocess.Popen(argv, bufsize=0, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _together(processes: list[subprocess.Popen[bytes]]) -> list[subprocess.Popen[bytes]]:
    """Once every process has said it is ready, the same start instant for each."""
    for process in processes:
        assert process.stdout is not None
        process.stdout.readline()  # "ready", or nothing from one that failed (``_collect`` says why)
    start_at = f"{time.time() + START_AFTER_READY_S!r}\n".encode()
    for process in processes:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(start_at)
            process.stdin.flush()
    return processes


def _collect(processes: list[subprocess.Popen[bytes]]) -> list[dict[str, Any]]:
    """Each process's one JSON line.

    Raises:
        SharedGateError: a process failed (its last line says why).
    """
    figures = []
    for process in processes:
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            lines = stderr.decode(errors="replace").strip().splitlines() or ["(nothing on stderr)"]
            raise SharedGateError(f"redis-gate benchmark: a process failed: {lines[-1]}")
        figures.append(json.loads(stdout))
    return figures


def _admission(url: str, processes: int, size: int, seconds: float) -> dict[str, Any]:
    job = {"url": url, "name": f"bench-{uuid.uuid4().hex[:8]}", "size": size, "seconds": seconds}
    figures = _collect(_together([_spawn("admission", job) for _ in range(processes)]))
    latencies = [latency for figure in figures for latency in figure["latencies"]]
    admitted = [figure["admitted"] for figure in figures]
    return {
        "processes": processes,
        "admitted": sum(admitted),
        "admissions_per_s": round(sum(admitted) / seconds, 1),
        "latency_after_release_ms": {
            "samples": len(latencies),
            "p50": round(percentile(latencies, 50) * 1000, 3),
            "p95": round(percentile(latencies, 95) * 1000, 3),
            "max": round(max(latencies, default=0.0) * 1000, 3),
        },
        "fairness": round(jain(admitted), 4),
    }


def _makespans(context: BenchContext, url: str, processes: int, ticks: int) -> dict[str, Any]:
    """The same worlds on the in-process gate (one process) and on Redis (a process each)."""
    job = {"url": url, "name": f"bench-{uuid.uuid4().hex[:8]}", "ticks": ticks, "sources": _sources(context), "latency_scale": LATENCY_SCALE}
    jobs = [{**job, "world": world} for world in range(processes)]
    local = interrupts.run(_worlds_in_process, context, processes, ticks)
    shared = _collect(_together([_spawn("world", job) for job in jobs]))
    local_mean = sum(spans for world in local for spans in world["makespans"]) / sum(len(world["makespans"]) for world in local)
    shared_mean = sum(spans for world in shared for spans in world["makespans"]) / sum(len(world["makespans"]) for world in shared)
    return {
        "processes": processes,
        "in_process_makespan_mean_s": round(local_mean, 4),
        "redis_makespan_mean_s": round(shared_mean, 4),
        "ratio": round(local_mean / shared_mean, 4),
        "fairness": round(jain([world["calls"] / world["elapsed_s"] for world in shared]), 4),
        "in_process_fairness": round(jain([world["calls"] / world["elapsed_s"] for world in local]), 4),
        "degraded": sum(world["degraded"] for world in shared),
    }


def _fleet(context: BenchContext, url: str, ticks: int) -> dict[str, Any]:
    """A fleet over processes on the Redis gate against the same fleet in one process
    on the in-process gate."""
    values = {"run.clock": "real", "run.ticks": ticks, "gate.url": url, "gate.name": f"bench-{uuid.uuid4().hex[:8]}"}
    sources = [*context.sources, Source("redis-gate benchmark", BENCH_ORDINAL, values)]
    configured = configure_worlds(sources, FLEET_WORLDS)
    alone = build_fleet(configured, backends=lambda index: scene_sim(*configured[index], latency_scale=LATENCY_SCALE))
    interrupts.run(alone.run, ticks)
    jobs = [
        Part(sources=sources, worlds=FLEET_WORLDS, scenes=[], indices=indices, sim_latency_scale=LATENCY_SCALE)
        for indices in parts(FLEET_WORLDS, FLEET_PROCESSES)
    ]
    spread = ProcessFleet(jobs, ticks)
    interrupts.run(spread.run)
    local, shared = alone.summary(), spread.summary()
    local_mean, shared_mean = local["total"]["tick_seconds"]["mean"], shared["total"]["tick_seconds"]["mean"]
    return {
        "worlds": FLEET_WORLDS,
        "processes": FLEET_PROCESSES,
        "in_process_makespan_mean_s": round(local_mean, 4),
        "processes_makespan_mean_s": round(shared_mean, 4),
        "ratio": round(local_mean / shared_mean, 4),
        "fairness": shared["fairness"],
        "in_process_fairness": local["fairness"],
        "peak_platform_sessions": shared["total"]["peak_platform_sessions"],
        "degraded": shared["total"]["degraded"],
    }


def _mixed(context: BenchContext, url: str, ticks: int) -> dict[str, Any]:
    """The mixed fleets each way (module docstring): the manor's tick figures and its
    slowdowns against beside its twin."""
    from .fleet import mixed_scenes

    scaled = {
        "run.clock": "real", "run.policy": "pipeline", "run.ticks": ticks,
        "gate.timeout_s": 30.0 * LATENCY_SCALE, "gate.claim_s": 2.0 * LATENCY_SCALE,
    }  # fmt: skip
    ticks_of: dict[str, dict[str, dict[str, float]]] = {way: {} for way in MIXED_WAYS}
    with tempfile.TemporaryDirectory() as folder:
        generated = mixed_scenes(Path(folder))
        for name, entries in MIXED:
            scenes = [generated.get(entry, entry) for entry in entries]
            for way in MIXED_WAYS:
                values = {**scaled} if way == "in_process" else {**scaled, "gate.url": url, "gate.name": f"bench-{uuid.uuid4().hex[:8]}"}
                sources = [*context.sources, Source("redis-gate benchmark", BENCH_ORDINAL, values)]
                configured = configure_worlds(sources, len(scenes), scenes)
                if way == "redis_two_runs":
                    runs = _collect(
                        _together(
                            [
                                _spawn("run", {"sources": _sources_of(sources, scenes[index], scene_seed(*configured[index])), "ticks": ticks, "latency_scale": LATENCY_SCALE})
                                for index in range(len(scenes))
                            ]
                        )
                    )
                    worlds = [{**run, **attrs.asdict(tenant), "tenant": tenant.name} for run, tenant in zip(runs, fleet_tenants(configured, scenes), strict=True)]
                    add_shares(worlds, [[tuple(span) for span in run["spans"]] for run in runs])
                    summary, makespans = {"worlds": worlds}, runs[0]["makespans"]
                elif way == "redis_two_processes":
                    jobs = [
                        Part(sources=sources, worlds=len(scenes), scenes=scenes, indices=indices, sim_latency_scale=LATENCY_SCALE)
                        for indices in parts(len(scenes), len(scenes))
                    ]
                    spread = ProcessFleet(jobs, ticks)
                    interrupts.run(spread.run)
                    summary, makespans = spread.summary(), spread.makespans[0]
                else:
                    gate = gate_for(configured[0][0].settings.gate, world="bench mixed fleet") if way == "redis_one_process" else None
                    summary, makespans = interrupts.run(_mixed_in_one_process, configured, scenes, ticks, gate)
                manor = summary["worlds"][0]
                ticks_of[way][name] = {
                    "mean": manor["tick_seconds"]["mean"], "p95": manor["tick_seconds"]["p95"], "degraded": manor["degraded"],
                    "first": makespans[0], "after_first": sum(makespans[1:]) / len(makespans[1:]) if len(makespans) > 1 else makespans[0],
                    "shares": [{key: world[key] for key in _SHARE_KEYS} for world in summary["worlds"]],
                }  # fmt: skip
    rows = []
    for name, _ in MIXED:
        row: dict[str, Any] = {"fleet": name}
        for way in MIXED_WAYS:
            figures, twin = ticks_of[way][name], ticks_of[way][MIXED[0][0]]
            row[way] = {
                "manor_tick_mean_s": round(figures["mean"], 4), "manor_tick_p95_s": round(figures["p95"], 4),
                "manor_degraded": figures["degraded"], "shares": figures["shares"],
                "manor_vs_twin_mean": round(figures["mean"] / twin["mean"], 4), "manor_vs_twin_p95": round(figures["p95"] / twin["p95"], 4),
                "manor_first_tick_s": round(figures["first"], 4),
                "manor_vs_twin_mean_after_first": round(figures["after_first"] / twin["after_first"], 4),
            }  # fmt: skip
        for way in MIXED_WAYS[1:]:
            for key in ("manor_vs_twin_mean", "manor_vs_twin_p95", "manor_vs_twin_mean_after_first"):
                row[way][f"{key}_vs_in_process"] = round(row[way][key] / row["in_process"][key], 4)
        rows.append(row)
    return {"ticks": ticks, "latency_scale": LATENCY_SCALE, "fleets": rows}


#: What the mixed fleets report of each world's share of the gate (``manor.fleet.shares``).
_SHARE_KEYS = ("tenant", "weight", "admissions_share", "backlogged_share", "share_per_weight", "session_s_backlogged", "gate_wait_s")


async def _mixed_in_one_process(configured: Any, scenes: list[str], ticks: int, gate: SharedGate | None) -> tuple[dict[str, Any], list[float]]:
    """A mixed fleet in this process, on ``gate`` (default: an in-process one): its
    summary, and the manor's (the first world's) tick makespans."""
    fleet = build_fleet(
        configured, gate=gate, tenants=fleet_tenants(configured, scenes),
        backends=lambda index: scene_sim(*configured[index], latency_scale=LATENCY_SCALE),
    )  # fmt: skip
    async with fleet.gate.connected():
        await fleet.run(ticks)
    return fleet.summary(), list(fleet.worlds[0].statistics.makespans)


def _sources(context: BenchContext) -> list[dict[str, Any]]:
    """The user's settings, for the processes to configure themselves alike."""
    return _as_json(context.sources)


def _as_json(sources: Sequence[Source]) -> list[dict[str, Any]]:
    return [{"name": source.name, "ordinal": source.ordinal, "values": dict(source.values), "spelling": dict(source.spelling), "textual": source.textual} for source in sources]


def _sources_of(sources: Sequence[Source], scene: str, seed: int) -> list[dict[str, Any]]:
    """``sources`` for a run of ``scene`` with ``seed`` (a mixed fleet's world, run on its own)."""
    return _as_json([*sources, Source("redis-gate benchmark: one run", BENCH_ORDINAL + 1, {"run.scene": scene, "run.seed": seed})])


def _engine(config: Config, scene: Scene, world: int, gate: SharedGate, latency_scale: float) -> tuple[Any, RunStatistics]:
    """World ``world`` of the scene (seed + world), its latencies scaled to real time."""
    backend = scene_sim(config, scene, seed=scene_seed(config, scene) + world, latency_scale=latency_scale)
    statistics = RunStatistics()
    return build_engine(config, scene, backend=backend, instruments=[statistics], gate=gate), statistics


def _world_figures(statistics: RunStatistics, elapsed: float) -> dict[str, Any]:
    return {"makespans": statistics.makespans, "calls": statistics.ok, "degraded": statistics.degraded, "elapsed_s": elapsed}


async def _worlds_in_process(context: BenchContext, processes: int, ticks: int) -> list[dict[str, Any]]:
    config, scene = context.configure({"run.clock": "real"})
    gate = gate_for(config.settings.gate)
    worlds = [_engine(config, scene, world, gate, LATENCY_SCALE) for world in range(processes)]
    figures: list[dict[str, Any]] = [{}] * processes

    async def one(index: int) -> None:
        engine, statistics = worlds[index]
        started = trio.current_time()
        await engine.loop.run(ticks)
        figures[index] = _world_figures(statistics, trio.current_time() - started)

    async with trio.open_nursery() as nursery:
        for index in range(processes):
            nursery.start_soon(one, index)
    return figures


# -- the processes ----------------------------------------------------------------------


async def _start_together() -> None:
    """Say ``ready``; sleep until the instant the parent sends once all are (``_together``)."""
    print("ready", flush=True)
    start_at = float(await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True))
    await trio.sleep(max(0.0, start_at - time.time()))


async def _admission_process(job: dict[str, Any]) -> dict[str, Any]:
    from ..admission.redis_gate import RedisGate

    gate = RedisGate(job["url"], job["name"], size=job["size"], world="bench")
    admitted = 0
    async with gate.connected():
        await _start_together()
        with trio.move_on_after(job["seconds"]):

            async def caller() -> None:
                nonlocal admitted
                while True:
                    permit = await gate.acquire(timeout=60)
                    admitted += 1
                    permit.release()

            async with trio.open_nursery() as nursery:
                for _ in range(WAITERS):
                    nursery.start_soon(caller)
    return {"admitted": admitted, "latencies": gate.admission_latencies()}


async def _world_process(job: dict[str, Any]) -> dict[str, Any]:
    from ..run.engine import configure

    sources = [Source(**source) for source in job["sources"]]
    config, scene = configure([*sources, Source("redis-gate benchmark", BENCH_ORDINAL, {"run.clock": "real"})])
    shared = msgspec.structs.replace(config.settings.gate, url=job["url"], name=job["name"])
    gate = gate_for(shared, world=f"world {job['world']}")
    engine, statistics = _engine(config, scene, job["world"], gate, job["latency_scale"])
    async with gate.connected():
        await _start_together()
        started = trio.current_time()
        await engine.loop.run(job["ticks"])
        return _world_figures(statistics, trio.current_time() - started)


async def _run_process(job: dict[str, Any]) -> dict[str, Any]:
    """One world as ``manor run`` runs it on the shared gate (its engine, a tenant of its
    own), its latencies scaled: its tick figures."""
    from ..run.engine import configure

    config, scene = configure([Source(**source) for source in job["sources"]])
    gate = gate_for(config.settings.gate, world=f"{scene.spec.name} seed {scene_seed(config, scene)}")
    backend = scene_sim(config, scene, latency_scale=job["latency_scale"])
    statistics, service = RunStatistics(), WorldService()
    engine = build_engine(config, scene, backend=backend, instruments=[statistics, service], gate=gate)
    # Both runs start together, and each joins the gate as it starts, as ``manor run``
    # does just before its first tick: a tenant's claim runs from its join.
    await _start_together()
    async with gate.connected():
        await engine.loop.run(job["ticks"])
    # Its calls' spans at the gate on the machine's monotonic clock, which both runs share.
    offset = time.perf_counter() - trio.current_time()
    spans = [shifted(span, offset) for span in service.spans]
    return {
        "tick_seconds": statistics.tick_seconds(), "makespans": statistics.makespans, "degraded": statistics.degraded,
        "spans": spans, **admission_figures(service.spans),
    }  # fmt: skip


def _main(argv: Sequence[str]) -> None:
    what, job = argv[0], json.loads(argv[1])
    work = {"admission": _admission_process, "world": _world_process, "run": _run_process}[what]
    print(json.dumps(trio.run(work, job)))


SUITE = Suite(
    name="redis-gate",
    title="the gate shared through Redis: admissions, latency after a release, makespans against the in-process gate",
    units=units,
    run=run,
)

if __name__ == "__main__":
    _main(sys.argv[1:])
