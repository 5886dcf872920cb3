"""Assembling a tick loop from settings and a scene: gate, limiter, backend, layers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import final

import attrs
import msgspec

from ..admission.adaptive import Adjustment, LearnedSize, RecordedAdjustments
from ..admission.gate import Gate, SharedGate
from ..admission.limiter import SessionLimiter
from ..admission.tickets import Tickets
from ..config import Config, Source, resolve, scene_source, with_backends
from ..config.schema import GateSettings
from ..content import Scene
from ..layers import (
    BreakerLayer,
    CostLayer,
    GateLayer,
    Layer,
    PlatformLayer,
    Stack,
    TimeoutLayer,
)
from ..providers import Provider, SimProvider
from ..providers.routing import routing_provider
from ..tick.instruments import Instrument
from ..tick.loop import TickLoop
from ..tick.policies import make_policy
from ..tick.prediction import LatencyPredictor
from ..worlds import create_world, load_scene, scene_keys, world_class

__all__ = ["Engine", "build_engine", "configure", "gate_for", "scene_seed", "scene_sim"]


@final
@attrs.frozen
class Engine:
    """A tick loop and the parts it was built from, for reports and dashboards, as
    ``build_engine`` makes it from the settings and the scene::

        config, scene = configure(standard_sources())
        engine = build_engine(config, scene)
        trio.run(engine.loop.run, 20, clock=trio.testing.MockClock(autojump_threshold=0))

    Attributes:
        cost: the layer that enforces the cost budget (``cost.budget``); ``None``
            without a budget. What the calls cost is counted from their records either
            way (``RunStatistics``).
        run_id: names this run to the outside (an Agno session is per run). Random,
            so it never enters the world, its hash or a record: a run is still the
            same every time.
        learning: what sizes the gate when ``gate.size`` is "auto" (the recorded
            adjustments, in a replay); ``None`` for a gate of a set size.
    """

    loop: TickLoop
    scene: Scene
    config: Config
    cost: CostLayer | None
    breaker: BreakerLayer
    run_id: str
    learning: LearnedSize | RecordedAdjustments | None = None

    @property
    def seed(self) -> int:
        """The run's seed: ``run.seed`` when set, else the scene's."""
        return scene_seed(self.config, self.scene)


def configure(sources: list[Source]) -> tuple[Config, Scene]:
    """Resolve the settings with the scene's own (platform limit, seed) at ordinal 150.

    The scene to load is itself a setting, so the sources are resolved twice: once to
    find the scene, once more with it.

    Raises:
        ConfigError: a bad setting, or an agent on a backend no table defines.
        ContentError: the scene cannot be loaded.
    """
    run = resolve(sources).settings.run
    scene = load_scene(run.scene, agents=run.agents)
    spec = scene.spec
    config = resolve([*sources, scene_source(scene.path, {"platform.limit": spec.platform_limit, "run.seed": spec.seed})])
    return with_backends(config, _agent_files(scene), scene.path), scene


def build_engine(
    config: Config,
    scene: Scene,
    *,
    backend: Provider | None = None,
    instruments: Iterable[Instrument] = (),
    run_id: str | None = None,
    gate: SharedGate | None = None,
    limiter: SessionLimiter | None = None,
    tickets: Tickets | None = None,
    layers: Iterable[Layer] = (),
    adjustments: Mapping[int, Sequence[Adjustment]] | None = None,
    learning: LearnedSize | None = None,
) -> Engine:
    """Build the engine the settings describe, for ``scene``.

    Args:
        backend: the backend to wrap; by default each agent's configured backend (the
            simulated one, seeded, unless manor.toml names others).
        run_id: the run's id (``Engine.run_id``); by default a fresh random hex id.
        gate, limiter, tickets: the gate, the platform's session limiter and the
            dealer of gate tickets this engine shares with others (the worlds of a
            fleet, ``manor.fleet``); by default its own, as the settings size them:
            an in-process ``Gate``, whatever ``gate.url`` says (a replay never shares
            its gate), so the commands that run live pass ``open_run``'s
            (``manor.run.opening``).
        layers: more layers for the calls through the gate (a replay's recorded
            admissions).
        adjustments: with ``gate.size`` "auto", the recorded run's adjustments of its
            gate, by ticket, to make again instead of learning (a replay).
        learning: with ``gate.size`` "auto", the learning of the ``gate`` this engine
            shares with others, fed by all their calls (a fleet's worlds: ``build_fleet``,
            which has every world's loop hear its changes); by default its own.

    Raises:
        ConfigError: (only without ``backend``) an agent on a backend no table defines,
            or an environment variable a backend in use needs (an API key) is unset.
        ContentError: the scene's world cannot be loaded, or refuses the scene.
    """
    s = config.settings
    seed = scene_seed(config, scene)
    if run_id is None:
        run_id = uuid.uuid4().hex  # from the OS, not the random module: no seeded draw moves
    if backend is None:
        assignment = config.assign_backends(_agent_files(scene), scene.path)
        config.backends.check_environment((chosen.backend for chosen in assignment.values()), os.environ)
        backend = routing_provider(assignment, config.backends, scene_sim(config, scene), run_id)
    if gate is None:
        gate = gate_for(s.gate)
    learner: LearnedSize | RecordedAdjustments | None = learning
    if s.gate.learns and learner is None:
        assert s.gate.max is not None  # resolve() derives it
        learner = LearnedSize(gate, s.gate.min, s.gate.max) if adjustments is None else RecordedAdjustments(adjustments, gate)
    if limiter is None:
        limiter = SessionLimiter(s.platform.limit)
    # Only layers that act on a call: what calls cost and how long they took is counted
    # from their records, once a tick (``RunStatistics``), not watched call by call.
    # The cost layer is the budget's enforcement, so it is there when a budget is.
    cost = CostLayer(price_per_1k_tokens=s.cost.price_per_1k_tokens, budget=s.cost.budget) if s.cost.budget else None
    breaker = BreakerLayer(failures=s.breaker.failures, cooldown=s.breaker.cooldown_s)
    shared: list[Layer] = [*([cost] if cost else []), breaker, TimeoutLayer(s.call.timeout_s), PlatformLayer(limiter)]
    loop = TickLoop(
        world=create_world(scene, seed),
        gate=gate,
        limiter=limiter,
        gated=Stack(backend, [*shared, GateLayer(gate, timeout=s.gate.timeout_s, adjuster=learner), *layers]),
        direct=Stack(backend, shared),
        policy=make_policy(s.run.policy, s.run.batch_size, seed),
        predictor=LatencyPredictor({agent_id: agent.sim.latency_s for agent_id, agent in scene.agents.items()}),
        order=s.run.order,
        tick_deadline=s.run.tick_deadline_s,
        price_per_1k_tokens=s.cost.price_per_1k_tokens,
        repair_attempts=s.call.repair_attempts,
        tickets=tickets,
        gate_wait_s=s.gate.unavailable_wait_s,
        instruments=instruments,
    )
    if learner is not None and learning is None:
        learner.apply = loop.adjust_gate  # recorded as live changes (a save's, a replay's)
    return Engine(loop, scene, config, cost, breaker, run_id, learner)


def gate_for(s: GateSettings, *, world: str | None = None) -> SharedGate:
    """The gate settings ``s`` describe, not yet connected: shared through Redis when
    ``world`` is given and ``gate.url`` set, else this process's own ``Gate`` (a replay
    or a benchmark never shares its gate).

    Args:
        world: what this process runs, as ``manor gate status`` lists it.
    """
    if world is None or not s.url:
        return Gate(size=s.first_size, rate=s.rate, burst=s.burst, claim_s=s.claim_s)
    from ..admission.redis_gate import (
        RedisGate,  # Redis is touched only for a shared gate
    )

    return RedisGate(
        s.url, s.name, size=s.first_size, rate=s.rate, burst=s.burst, lease_s=s.lease_s, claim_s=s.claim_s, world=world,
        tenant=s.tenant, weight=s.weight, max_sessions=s.max_sessions or None,
    )  # fmt: skip


def scene_seed(config: Config, scene: Scene) -> int:
    """The run's seed: ``run.seed`` when set, else the scene's."""
    seed = config.settings.run.seed
    return seed if seed is not None else scene.spec.seed


def scene_sim(config: Config, scene: Scene, *, seed: int | None = None, latency_scale: float = 1.0) -> SimProvider:
    """The scene's simulated backend, seeded and set up from the settings.

    Args:
        seed: its seed, if not the run's.
        latency_scale: every agent's latency times this (a benchmark's worlds that
            sleep their latencies on the real clock, shortened).
    """
    s = config.settings
    world = world_class(scene.spec.world)
    profiles = {agent_id: agent.sim for agent_id, agent in scene.agents.items()}
    if latency_scale != 1.0:
        profiles = {agent_id: msgspec.structs.replace(profile, latency_s=profile.latency_s * latency_scale) for agent_id, profile in profiles.items()}
    return SimProvider(
        profiles,
        seed=scene_seed(config, scene) if seed is None else seed,
        names={agent_id: agent.name for agent_id, agent in scene.characters.items()},
        rooms=scene.keys(scene_keys(world)).places(),
        styles={kind: caller.style for kind, caller in world.callers.items()},
        error_rate=s.sim.error_rate,
        hang_rate=s.sim.hang_rate,
        invalid_rate=s.sim.invalid_rate,
        max_sessions=s.backend.sessions,
    )


def _agent_files(scene: Scene) -> dict[str, str]:
    """Agent id -> the backend its agent file names."""
    return {agent_id: agent.backend for agent_id, agent in scene.agents.items()}
