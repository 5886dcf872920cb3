"""The simulated backend's moving platform capacity: refusals as a server answers them,
exact and the same every run under the virtual clock; off by default."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing

from manor.calls import Request
from manor.config import standard_sources
from manor.config.backends import CapacityStep, PlatformCapacity
from manor.config.layering import flags_source
from manor.errors import ConfigError, SessionLimitError
from manor.providers import SimProfile, SimProvider, collect
from manor.records import TickRecord
from manor.run.engine import build_engine, configure
from manor.worlds.manor import CallerKind


def _request(agent: str, tick: int = 0) -> Request:
    return Request(caller=CallerKind.CHARACTER, agent=agent, tick=tick)


def _capacity(*steps: tuple[float, int], by: str = "tick", retry_after_s: float | None = None) -> PlatformCapacity:
    return PlatformCapacity(by=by, steps=tuple(CapacityStep(at=at, sessions=n) for at, n in steps), retry_after_s=retry_after_s)  # type: ignore[arg-type]


class TestSimProvider:
    @pytest.mark.trio
    async def test_calls_beyond_the_capacity_are_refused_at_once(self, autojump_clock: trio.testing.MockClock) -> None:
        """Capacity 2 at tick 0, 1 from tick 1: the third call of tick 0 and the second
        of tick 1 are refused by the server at the instant they arrive."""
        sim = SimProvider(default=SimProfile(latency_s=1.0), capacity=_capacity((0, 2), (1, 1), retry_after_s=2.5))
        outcomes: list[tuple[str, float, object]] = []

        async def call(agent: str, tick: int) -> None:
            try:
                await collect(sim, _request(agent, tick))
                outcomes.append((agent, trio.current_time(), "ok"))
            except SessionLimitError as exc:
                outcomes.append((agent, trio.current_time(), (exc.refused_by, exc.retry_after, str(exc))))

        async with trio.open_nursery() as nursery:
            for agent in ("a", "b", "c"):
                nursery.start_soon(call, agent, 0)
                await trio.testing.wait_all_tasks_blocked()
        async with trio.open_nursery() as nursery:
            for agent in ("d", "e"):
                nursery.start_soon(call, agent, 1)
                await trio.testing.wait_all_tasks_blocked()
        assert sorted(outcomes, key=lambda outcome: (outcome[1], outcome[0])) == [  # calls ending together: by name
            ("c", 0.0, ("server", 2.5, "simulated platform full: 2 of 2 sessions in use")),
            ("a", 1.0, "ok"),
            ("b", 1.0, "ok"),
            ("e", 1.0, ("server", 2.5, "simulated platform full: 1 of 1 sessions in use")),
            ("d", 2.0, "ok"),
        ]
        assert sim.arrival_order_matters()

    @pytest.mark.trio
    async def test_by_time_counts_from_the_first_call_and_streams_count_too(self, autojump_clock: trio.testing.MockClock) -> None:
        """By time: no limit until 5 s after the first call, then 1; a stream holds its
        session until it ends."""
        sim = SimProvider(default=SimProfile(latency_s=10.0), capacity=_capacity((5, 1), by="time"))
        await trio.sleep(100)  # the clock's own start does not count
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect, sim, _request("a"))
            nursery.start_soon(collect, sim, _request("b"))  # both before 5 s: no limit
            await trio.sleep(6)
            with pytest.raises(SessionLimitError, match="2 of 1"):
                async for _ in sim.invoke(_request("c")):
                    pass
        events = [event async for event in sim.invoke(_request("d"))]
        assert events[-1].text

    def test_off_by_default_and_order_free(self) -> None:
        sim = SimProvider()
        assert sim.capacity is None and not sim.arrival_order_matters()

    def test_steps_must_increase(self) -> None:
        with pytest.raises(msgspec.ValidationError, match="increasing order"):
            msgspec.convert({"steps": [{"at": 2, "sessions": 3}, {"at": 1, "sessions": 4}]}, PlatformCapacity)


def _engine_ticks(tmp_path: Path, capacity: str, gate: int) -> list[TickRecord]:
    path = tmp_path / "manor.toml"
    path.write_text(f'[backends.moving]\nkind = "sim"\ncapacity = {capacity}\n[backend]\ndefault = "moving"\n', encoding="utf-8")
    config, scene = configure(standard_sources(config_path=path, environ={}, flags=flags_source({"gate.size": gate, "platform.limit": 0}, {})))
    ticks: list[TickRecord] = []

    async def run() -> None:
        engine = build_engine(config, scene)
        for _ in range(4):
            ticks.append(await engine.loop.step())

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    return ticks


def test_a_run_against_a_moving_capacity_is_the_same_every_time(tmp_path: Path) -> None:
    """Gate 8 over capacity 6, then 3 from tick 2: the server's refusals, who gets them
    and every makespan are the same in every run, however trio orders its tasks.

    A refused call frees its gate slot at once, so the next one is let through to be
    refused too: of a tick's 14 calls, all but the capacity are refused (the fail-fast
    cascade a gate that learns the limit is there to stop)."""
    capacity = "{retry_after_s = 1, steps = [{at = 0, sessions = 6}, {at = 2, sessions = 3}]}"
    first = _engine_ticks(tmp_path, capacity, gate=8)
    refused = [sum(call.refused_by == "server" for call in tick.calls) for tick in first]
    assert [tick.tick for tick in first] == [1, 2, 3, 4]
    assert refused == [14 - 6, 14 - 3, 14 - 3, 14 - 3]
    for _ in range(15):
        assert _engine_ticks(tmp_path, capacity, gate=8) == first


def test_a_bad_capacity_table_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "manor.toml"
    path.write_text('[backends.moving]\nkind = "sim"\ncapacity = {steps = [{at = 0, sessions = 0}]}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"backends\.moving\.capacity\.steps\[0\]\.sessions"):
        configure(standard_sources(config_path=path, environ={}))
