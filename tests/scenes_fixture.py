"""Small scenes and engines for tick-loop tests: built in memory or written to tmp_path.

Every simulated agent here has a fixed latency (``jitter=0``), so virtual-time
makespans can be computed by hand and asserted exactly.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncGenerator, Collection, Iterable, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import trio
import trio.testing

from manor.calls import Event, Request
from manor.config import Config, resolve
from manor.config.layering import built_in_source, flags_source, layer_defaults_source
from manor.content import AgentSpec, Scene, SceneSpec
from manor.errors import ProviderError
from manor.providers import Provider, SimProfile
from manor.records import StoryEntry, TickRecord
from manor.run.engine import Engine, build_engine
from manor.tick.instruments import Instrument

__all__ = [
    "TEN_LATENCIES",
    "FailingFor",
    "TickRecorder",
    "fifo_makespan",
    "fixed_scene",
    "make_engine",
    "run_engine",
    "settings",
    "write_agent",
    "write_scene",
]

#: Ten characters' fixed latencies (s), c0..c9, used by the exact-makespan tests.
TEN_LATENCIES: tuple[float, ...] = (3.0, 1.0, 2.0, 4.0, 1.5, 2.5, 0.5, 3.5, 2.0, 1.0)


def _agent(name: str, latency: float, role: str = "character") -> AgentSpec:
    return AgentSpec(name=name, role=role, sim=SimProfile(latency_s=latency, jitter=0.0))  # type: ignore[arg-type]


def fixed_scene(
    latencies: Sequence[float] = TEN_LATENCIES,
    *,
    narrator: float = 0.2,
    summariser: float = 0.3,
    beats: int = 0,
    speakers: Sequence[str] = (),
    platform_limit: int = 6,
    seed: int = 7,
    rooms: Sequence[str] = ("hall", "library"),
) -> Scene:
    """A scene whose characters ``c0``, ``c1``... take exactly ``latencies[i]`` seconds."""
    characters = {f"c{i}": _agent(f"C{i}", latency) for i, latency in enumerate(latencies)}
    keys = {
        "rooms": list(rooms),
        "narrator": "narrator",
        "summariser": "summariser",
        "beats": {"per_tick": beats, "speakers": list(speakers) or (["c0"] if beats else [])},
    }
    spec = SceneSpec(name="fixed", seed=seed, platform_limit=platform_limit, cast=tuple(characters), world_keys=keys)
    others = {"narrator": _agent("Narrator", narrator, "narrator"), "summariser": _agent("Summariser", summariser, "summariser")}
    return Scene(spec=spec, path="<memory>", characters=characters, others=others)


def settings(**values: Any) -> Config:
    """Settings from built-in and gate-layer defaults plus ``values`` as flags.

    Keys are config keys with ``_`` for ``.`` between section and field
    (``platform_limit=6`` is ``platform.limit``). No manor.toml, no environment.
    """
    flags = {key.replace("_", ".", 1): value for key, value in values.items()}
    return resolve([built_in_source(), layer_defaults_source(), flags_source(flags, {})])


def make_engine(scene: Scene, *, backend: Provider | None = None, instruments: Iterable[Instrument] = (), **values: Any) -> Engine:
    """An engine for ``scene``; the platform limit defaults to the scene's own, and the
    ticket order to fifo: these tests work out makespans and admission orders by hand
    as fifo list schedules (``fifo_makespan``), so a test about another order names it
    (``run_order="longest-first"``, the built-in default)."""
    values.setdefault("platform_limit", scene.spec.platform_limit)
    values.setdefault("run_order", "fifo")
    return build_engine(settings(**values), scene, backend=backend, instruments=instruments)


class TickRecorder(Instrument):
    """Keeps every tick record and story, and the order hooks were called in."""

    def __init__(self) -> None:
        self.ticks: list[TickRecord] = []
        self.stories: list[list[StoryEntry]] = []

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.ticks.append(record)
        self.stories.append(list(story))


def run_engine(engine: Engine, ticks: int, interval: float = 0.0) -> list[TickRecord]:
    """Run ``ticks`` ticks under a virtual clock starting at 0; return their records."""
    recorder = TickRecorder()
    engine.loop.add_instrument(recorder)
    trio.run(engine.loop.run, ticks, interval, clock=trio.testing.MockClock(autojump_threshold=0))
    return recorder.ticks


def fifo_makespan(latencies: Sequence[float], slots: int) -> float:
    """The makespan of a list schedule: jobs in order, each on the first slot free."""
    free = [0.0] * slots
    end = 0.0
    for latency in latencies:
        start = heapq.heappop(free)
        heapq.heappush(free, start + latency)
        end = max(end, start + latency)
    return end


class FailingFor(Provider):
    """A backend that fails the calls of chosen ``(tick, caller kind)`` pairs with
    ``ProviderError`` and passes every other call to ``inner``."""

    def __init__(self, inner: Provider, failing: Collection[tuple[int, str]]) -> None:
        self.inner = inner
        self.failing = set(failing)

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        if (request.tick, request.caller) in self.failing:
            raise ProviderError(f"{request.agent}: scripted failure")
        async with aclosing(self.inner.invoke(request)) as events:
            async for event in events:
                yield event


def write_agent(folder: Path, agent_id: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{agent_id}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def write_scene(root: Path, text: str, name: str = "scene", agents: Mapping[str, str] | None = None) -> Path:
    """Write ``<root>/scenes/<name>.toml`` and any ``<root>/agents/<id>.toml``."""
    for agent_id, agent_text in (agents or {}).items():
        write_agent(root / "agents", agent_id, agent_text)
    folder = root / "scenes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


_FIXED_AGENT = 'name = "{name}"\nrole = "{role}"\n[sim]\nlatency_s = {latency}\njitter = 0.0\n'
_THREE_CHARACTERS = """
name = "{title}"
seed = 11
platform_limit = 3
rooms = ["hall", "garden"]
cast = ["ann", "bob", "cy"]
[beats]
per_tick = 1
speakers = ["ann", "bob"]
"""


def fixed_latency_scene(root: Path, latency: float, name: str) -> Path:
    """A scene of five calls a tick — three characters, the narrator, the summariser — and
    one beat, every call taking exactly ``latency`` s, through a gate of 2 (platform 3)."""
    roles = {"ann": "character", "bob": "character", "cy": "character", "narrator": "narrator", "summariser": "summariser"}
    agents = {agent: _FIXED_AGENT.format(name=agent.title(), role=role, latency=latency) for agent, role in roles.items()}
    return write_scene(root, _THREE_CHARACTERS.format(title=name.title()), name, agents)
