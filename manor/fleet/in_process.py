"""Many worlds in one process, on one platform: every call of every world through one gate.

The platform's session limit belongs to the account, not to a world. A fleet runs N
worlds side by side in one trio run, each a whole engine (its world, policy, predictor,
breaker, backend), sharing the account's parts: one gate of the platform limit − 1,
in which each world queues in a lane of its own and the lanes take turns
(``manor.admission.lanes``: fair), one platform ``SessionLimiter``, and one ``TicketOffice`` that
deals the tickets of each instant in world order (``manor.admission.tickets``: the same every run).

Under the virtual clock a fleet is exact and repeatable like a single run: the same
worlds and seeds give the same records and hashes every time. World ``i`` runs its
scene with the scene's seed plus the number of worlds before it of the same scene:
``--worlds 4`` runs seeds s, s+1, s+2, s+3; ``--scenes a,b`` runs each scene with its
own seed, as ``manor run`` would.

Two things a single run allows are refused, because what they decide would depend on
which world's task trio runs first: the ``legacy`` policy (no gate: every world at the
fail-fast platform at once) and a gate larger than the platform limit.

A learned gate (``gate.size = "auto"``) is one for the fleet: one ``LearnedSize`` on the
one gate, which every world's calls feed (a refusal to any world shrinks it for all) and
whose every change each world's loop hears (its save records it, its report counts it).

The fleet's gate can itself be shared with other processes through Redis (``gate.url``,
``manor.admission.redis_gate``): the worlds' lanes then take turns in the order this process
sends its waiters to the server, which serves the processes first come, first served.
Such a fleet runs on the real clock, so it is not repeatable. Its worlds can also be
spread over several processes (``parts``; ``manor.fleet.processes``), each a fleet of
its part of the worlds, their reports joined into one (``fleet_total``, ``fairness``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, final

import attrs
import trio

from ..admission.adaptive import Adjustment, LearnedSize, apply_to_gate
from ..admission.gate import SharedGate
from ..admission.limiter import SessionLimiter
from ..admission.tickets import TicketOffice
from ..config import Config, Source
from ..config.layering import FLAGS
from ..content import Scene
from ..errors import ConfigError
from ..limits import DEFAULT_WORLDS, MAX_WORLDS
from ..providers import Provider
from ..records import CallRecord, StoryEntry, TickRecord
from ..run.engine import Engine, build_engine, configure, gate_for, scene_seed
from ..tick.instruments import Instrument
from ..tick.loop import TickLoop
from ..tick.statistics import RunStatistics, tick_seconds
from .shares import CallSpan, Tenant, admission_figures, jain_index, tenant_shares

__all__ = [
    "DEFAULT_WORLDS",
    "FLEET",
    "MAX_WORLDS",
    "SHARED_KEYS",
    "Fleet",
    "FleetWorld",
    "WorldService",
    "add_shares",
    "build_fleet",
    "configure_worlds",
    "fairness",
    "fleet_tenants",
    "fleet_total",
    "parts",
    "scene_share",
]

#: The ordinal of what the fleet sets for each world (its scene, its seed): above the
#: command line, whose ``--seed`` and ``--scene`` are the fleet's starting point.
FLEET = FLAGS + 50


#: Settings every world must share: they size the account's one platform and one gate.
SHARED_KEYS = ("platform.limit", "gate.size", "gate.max", "gate.min", "gate.rate", "gate.burst")


@final
class WorldService(Instrument):
    """What one world of a fleet got from the shared gate: the platform sessions it
    held at once (at most), and when its last tick ended."""

    def __init__(self) -> None:
        self.sessions = 0
        self.peak_sessions = 0
        self.finished_at: float | None = None
        #: Every call's span at the gate, for the tenants' shares (``manor.fleet.shares``).
        self.spans: list[CallSpan] = []

    def call_admitted(self, request: object, admitted_at: float) -> None:
        # Admitted by the gate, the call opens its platform session at once: a fleet's
        # gate is never larger than the platform, so the limiter never refuses it.
        self.sessions += 1
        self.peak_sessions = max(self.peak_sessions, self.sessions)

    def call_finished(self, record: CallRecord) -> None:
        if record.admitted_at is not None:
            self.sessions -= 1
        self.spans.append((record.queued_at, record.admitted_at, record.finished_at))

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.finished_at = record.finished_at


@final
@attrs.frozen
class FleetWorld:
    """One world of a fleet: its number, its engine, what is counted of it, and the
    tenant it is at the shared gate."""

    index: int
    engine: Engine
    statistics: RunStatistics
    service: WorldService
    tenant: Tenant


@final
@attrs.define(eq=False)
class Fleet:
    """Worlds that share one gate, one platform limiter and one ticket office.

    Build one with ``build_fleet``.
    """

    worlds: tuple[FleetWorld, ...]
    gate: SharedGate
    limiter: SessionLimiter
    office: TicketOffice
    _started_at: float | None = attrs.field(default=None, init=False)

    async def run(self, ticks: int, interval: float = 0.0) -> None:
        """Run ``ticks`` ticks of every world, side by side (each world paced by
        ``interval`` on its own, as ``TickLoop.run``)."""
        self._started_at = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.office.run)
            try:
                async with trio.open_nursery() as worlds:
                    for world in self.worlds:
                        worlds.start_soon(world.engine.loop.run, ticks, interval)
            finally:
                nursery.cancel_scope.cancel()

    @property
    def ticks(self) -> list[int]:
        """Ticks finished, world by world."""
        return [world.statistics.ticks for world in self.worlds]

    def summary(self) -> dict[str, Any]:
        """The fleet's figures, as ``manor fleet --json`` prints them: ``worlds`` (each
        the object ``manor run --json`` prints, with ``index``, ``elapsed_s``,
        ``calls_per_s``, its tenant's figures and its share of the gate's session-time:
        ``manor.fleet.shares``), ``total`` and ``fairness``."""
        worlds = self.world_summaries()
        add_shares(worlds, [world.service.spans for world in self.worlds])
        makespans = [span for world in self.worlds for span in world.statistics.makespans]
        total = fleet_total(worlds, peak_platform_sessions=self.limiter.statistics().peak, makespans=makespans)
        return {"worlds": worlds, "total": total, "fairness": fairness(worlds)}

    def world_summaries(self) -> list[dict[str, Any]]:
        """Each world's figures, as ``summary`` lists them."""
        return [self._world_summary(world) for world in self.worlds]

    def _world_summary(self, world: FleetWorld) -> dict[str, Any]:
        summary = world.statistics.summary(world.engine)
        # The world's own sessions: the limiter's peak is the whole fleet's (``total``).
        summary["peak_platform_sessions"] = world.service.peak_sessions
        finished = world.service.finished_at
        elapsed = 0.0 if finished is None or self._started_at is None else finished - self._started_at
        tenant = world.tenant
        return {
            "index": world.index,
            **summary,
            "elapsed_s": round(elapsed, 6),
            "calls_per_s": round(summary["ok"] / elapsed, 6) if elapsed > 0 else None,
            "tenant": tenant.name,
            "weight": tenant.weight,
            "max_sessions": tenant.max_sessions,
            **admission_figures(world.service.spans),
        }


def add_shares(worlds: Sequence[dict[str, Any]], spans: Sequence[Sequence[CallSpan]]) -> None:
    """Add to each world's figures (``Fleet.world_summaries``: its tenant's name, weight
    and cap, its admissions) its share of the admissions and of the gate's session-time
    (``manor.fleet.shares``), from its calls' ``spans`` at the gate, each world a tenant."""
    tenants = [Tenant(world["tenant"], world["weight"], world["max_sessions"]) for world in worlds]
    admissions = sum(world["admissions"] for world in worlds)
    for world, share in zip(worlds, tenant_shares(tenants, spans), strict=True):
        world["admissions_share"] = round(world["admissions"] / admissions, 6) if admissions else None
        world.update(share)


def fleet_total(worlds: Sequence[dict[str, Any]], *, peak_platform_sessions: int, makespans: Sequence[float]) -> dict[str, Any]:
    """The ``total`` of a fleet's report, from its worlds' figures (``Fleet.summary``'s
    ``worlds``; they share one gate and one platform, whose size and limit they give):
    the counts summed, the most platform sessions open at once over all worlds, and the
    tick makespans of every world together."""
    # Every world's caller kinds (worlds of other games have other kinds), in order.
    degradations: dict[str, dict[str, int]] = {}
    rejections = dict.fromkeys(worlds[0]["platform_rejections"], 0)
    for world in worlds:
        for kind, reasons in world["degradations"].items():
            counts = degradations.setdefault(kind, dict.fromkeys(reasons, 0))
            for reason, count in reasons.items():
                counts[reason] += count
        for key, count in world["platform_rejections"].items():
            rejections[key] += count
    return {
        "worlds": len(worlds),
        "gate_size": worlds[0]["gate_size"],
        "platform_limit": worlds[0]["platform_limit"],
        "calls": sum(world["calls"] for world in worlds),
        "ok": sum(world["ok"] for world in worlds),
        "degraded": sum(world["degraded"] for world in worlds),
        "degradations": degradations,
        "platform_rejections": rejections,
        "repairs": {key: sum(world["repairs"][key] for world in worlds) for key in ("asked", "repaired")},
        "peak_platform_sessions": peak_platform_sessions,
        "tick_seconds": tick_seconds(makespans),
    }


def fairness(worlds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How evenly the gate served the worlds: ``jain_share_per_weight``, Jain's index of
    the backlogged tenants' session-time share over their due by weight (1.0: each got
    its due; 1/N: one got everything; ``manor.fleet.shares``), and ``makespan_min_max``,
    the shortest world's mean tick makespan over the longest's (1.0: alike). ``None``
    where there is nothing to compare (no tick ran, or no two tenants competed)."""
    ratios = [world["share_per_weight"] for world in worlds if world.get("share_per_weight") is not None]
    means = [world["tick_seconds"]["mean"] for world in worlds if world["ticks"]]
    return {
        "jain_share_per_weight": jain_index(ratios) if len(ratios) >= 2 else None,
        "makespan_min_max": round(min(means) / max(means), 6) if means and max(means) > 0 else None,
    }


def configure_worlds(sources: Sequence[Source], worlds: int | None = None, scenes: Sequence[str] = ()) -> list[tuple[Config, Scene]]:
    """The settings and scene of every world: ``worlds`` worlds of the scenes named, in
    turn (by default one world per scene; without ``scenes``, ``DEFAULT_WORLDS`` worlds
    of the configured scene).
    World ``i`` runs its scene's seed (``--seed``, else the scene's) plus the number of
    worlds before it of the same scene.

    Raises:
        ConfigError: a bad setting, or the worlds disagree on a setting they share
            (``SHARED_KEYS``: the scenes' own platform limits, say), or one the fleet
            cannot run deterministically (the legacy policy, a gate above the platform).
        ContentError: a scene cannot be loaded.
    """
    names: Sequence[str | None] = [scene_share(scene)[0] for scene in scenes] or (None,)
    count = worlds if worlds is not None else len(scenes) if scenes else DEFAULT_WORLDS
    if not 1 <= count <= MAX_WORLDS:
        raise ConfigError(f"manor fleet: {count} worlds: a fleet has 1 to {MAX_WORLDS:,} worlds")
    seen: Counter[str | None] = Counter()
    seeds: dict[str | None, int] = {}
    configured = []
    for index in range(count):
        name = names[index % len(names)]
        values: dict[str, Any] = {} if name is None else {"run.scene": name}
        if seen[name]:
            values["run.seed"] = seeds[name] + seen[name]
        config, scene = configure([*sources, Source(f"manor fleet, world {index}", FLEET, values)])
        seeds.setdefault(name, scene_seed(config, scene))
        seen[name] += 1
        configured.append((config, scene))
    _check_shared(configured)
    return configured


def scene_share(text: str) -> tuple[str, float, int | None]:
    """A ``--scenes`` entry: ``SCENE[:WEIGHT[:MAX_SESSIONS]]`` -> the scene, its
    worlds' weight at the gate (default 1) and their cap (default none).

    Raises:
        ConfigError: the weight is not a positive number or the cap not a whole number >= 1.
    """
    scene, *share = text.rsplit(":", 2) if text.count(":") <= 2 else [text]
    # A path with a drive or a colon of its own: only trailing numbers are a share.
    while share and not _is_number(share[0]):
        scene, share = f"{scene}:{share[0]}", share[1:]
    weight, cap = 1.0, None
    if share:
        weight = float(share[0])
        if not 0 < weight < math.inf:
            raise ConfigError(f"--scenes {text}: the weight {share[0]} is not a positive number")
    if len(share) > 1:
        if not share[1].isdigit() or int(share[1]) < 1:
            raise ConfigError(f"--scenes {text}: max_sessions {share[1]} is not a whole number of at least 1")
        cap = int(share[1])
    return scene, weight, cap


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def fleet_tenants(configured: Sequence[tuple[Config, Scene]], scenes: Sequence[str] = ()) -> list[Tenant]:
    """Each world's tenant at the shared gate: named by its scene's file (``name#2``,
    ``name#3``... for the second, third world of one scene), with the weight and cap its
    ``--scenes`` entry gives (``scene_share``; world ``i`` has entry ``i mod len``)."""
    stems = [Path(scene.path).stem for _, scene in configured]
    seen: Counter[str] = Counter()
    tenants = []
    for index, stem in enumerate(stems):
        seen[stem] += 1
        name = stem if seen[stem] == 1 else f"{stem}#{seen[stem]}"
        _, weight, cap = scene_share(scenes[index % len(scenes)]) if scenes else ("", 1.0, None)
        tenants.append(Tenant(name, weight, cap))
    return tenants


def _check_shared(configured: Sequence[tuple[Config, Scene]]) -> None:
    """The worlds agree on the account's settings, and on none the fleet refuses.

    Raises:
        ConfigError: see ``configure_worlds``.
    """
    for key in SHARED_KEYS:
        first: dict[object, str] = {}  # each value, and where its first world got it
        for index, (config, _) in enumerate(configured):
            first.setdefault(config.value(key), f"world {index}: {config.origins[key]}")
        if len(first) > 1:
            values = ", ".join(f"{value} ({where})" for value, where in first.items())
            env = "MANOR_" + key.replace(".", "_").upper()
            raise ConfigError(
                f"the worlds of a fleet share one platform and one gate, but their {key} differs: {values}; "
                f"set {key} once for every world (on the command line, in manor.toml or as {env})"
            )
    for config, _ in configured:
        if config.settings.run.policy == "legacy":
            raise ConfigError(
                f"{config.origins['run.policy']}: run.policy = legacy: a fleet's worlds share one gate, and legacy has none "
                "(who the fail-fast platform turns away would depend on which world trio runs first); use pipeline or batch"
            )
    config = configured[0][0]
    limit, size = config.settings.platform.limit, config.settings.gate.size
    if size != "auto" and limit and size > limit:
        raise ConfigError(
            f"{config.origins['gate.size']}: gate.size {size} is above platform.limit {limit}: in a fleet, which world's "
            "calls the platform turns away would depend on which world trio runs first; keep the gate at or below the limit"
        )


def build_fleet(
    configured: Sequence[tuple[Config, Scene]],
    *,
    indices: Sequence[int] | None = None,
    gate: SharedGate | None = None,
    instruments: Callable[[int], Iterable[Instrument]] = lambda index: (),
    backends: Callable[[int], Provider | None] = lambda index: None,
    tenants: Sequence[Tenant] | None = None,
) -> Fleet:
    """A fleet of the worlds ``configure_worlds`` returned, sharing one gate, platform
    limiter and ticket office sized by the first world's settings (all share them).

    Args:
        indices: each world's number in the whole fleet, when these worlds are some of
            it (the part one process runs: ``parts``); by default 0, 1, 2, ...
        gate: the gate every world shares; by default an in-process ``Gate``, so
            ``manor fleet`` passes ``open_run``'s (shared through Redis when
            ``gate.url`` is set).
        instruments: world number -> more instruments for that world's loop.
        backends: world number -> the backend to wrap (``None``: each agent's
            configured one, as ``build_engine``).
        tenants: each world's tenant at the gate (its weight and cap), in the order
            of ``configured``; by default ``fleet_tenants``' (weight 1, no cap).

    Raises:
        ConfigError: an agent on a backend no table defines, an environment variable
            a backend in use needs is unset, or a cap the gate cannot keep.
    """
    s = configured[0][0].settings
    if gate is None:
        gate = gate_for(s.gate)
    # A learned gate learns from every world's calls, and every world hears its changes.
    learning = None
    if s.gate.learns:
        assert s.gate.max is not None  # resolve() derives it
        learning = LearnedSize(gate, s.gate.min, s.gate.max)
    limiter = SessionLimiter(s.platform.limit)
    office = TicketOffice(gate)
    if tenants is None:
        tenants = fleet_tenants(configured)
    worlds = []
    numbers = range(len(configured)) if indices is None else indices
    for index, (config, scene), tenant in zip(numbers, configured, tenants, strict=True):
        if tenant.weight != 1.0 or tenant.max_sessions is not None:
            try:
                gate.set_share(index, tenant.weight, tenant.max_sessions)
            except ValueError as exc:
                raise ConfigError(f"world {index} ({tenant.name}): {exc}") from None
        statistics, service = RunStatistics(), WorldService()
        engine = build_engine(
            config, scene, backend=backends(index), instruments=[statistics, service, *instruments(index)],
            gate=gate, limiter=limiter, tickets=office.counter(index), learning=learning,
        )  # fmt: skip
        worlds.append(FleetWorld(index, engine, statistics, service, tenant))
    if learning is not None:
        learning.apply = _adjusting(gate, [world.engine.loop for world in worlds])
    return Fleet(tuple(worlds), gate, limiter, office)


def _adjusting(gate: SharedGate, loops: Sequence[TickLoop]) -> Callable[[Adjustment], None]:
    """How the fleet's learning changes the one gate: once, heard by every world's loop
    (each world's save records it, each world's report counts it), in world order."""

    def adjust(adjustment: Adjustment) -> None:
        apply_to_gate(gate, adjustment)
        for loop in loops:
            loop.gate_adjusted(adjustment)

    return adjust


def parts(worlds: int, processes: int) -> list[list[int]]:
    """The worlds each of ``processes`` processes runs of a fleet of ``worlds``: world
    ``i`` in process ``i mod processes`` (at most one process per world)."""
    return [list(range(first, worlds, processes)) for first in range(min(worlds, processes))]
