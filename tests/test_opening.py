"""open_run: one way to open a live run — gate, what runs, clock, connection, saves."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from manor.admission.gate import Gate
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.run.engine import Engine, build_engine, configure
from manor.run.opening import gate_connected, open_run
from manor.saves import SaveWriter, read_save


def _configured(**values: Any) -> list[Any]:
    return [configure([built_in_source(), layer_defaults_source(), flags_source({"run.ticks": 3, **values}, {})])]


def test_the_gate_is_built_from_the_settings_and_handed_to_what_runs() -> None:
    """One gate of the settings' size, the very one the engine's loop uses."""
    (config, scene), = _configured(**{"gate.size": 3})
    live = open_run([(config, scene)], lambda gate: build_engine(config, scene, gate=gate))
    assert isinstance(live.gate, Gate) and live.gate.size == 3
    assert live.runs.loop.gate is live.gate


def test_the_clock_is_virtual_unless_a_world_needs_real_time() -> None:
    """Virtual by default; real (None) when any world's settings say real."""
    virtual, real = _configured()[0], _configured(**{"run.clock": "real"})[0]
    assert isinstance(open_run([virtual], lambda gate: None).clock, trio.testing.MockClock)
    assert open_run([virtual, real], lambda gate: None).clock is None
    made = open_run([virtual], lambda gate: "runs", virtual=lambda runs: trio.testing.MockClock(rate=runs == "runs"))
    assert isinstance(made.clock, trio.testing.MockClock) and made.clock.rate == 1


def test_run_makes_the_saves_then_runs_connected_on_its_clock(tmp_path: Path) -> None:
    """The saves exist before the first tick; the run's time is the virtual clock's."""
    (config, scene), = _configured()
    live = open_run([(config, scene)], lambda gate: build_engine(config, scene, gate=gate))

    async def main(engine: Engine) -> float:
        assert [writer.ticks for writer in live.saves] == [0]
        await engine.loop.run(3)
        return trio.current_time()

    took = live.run(main, after=str, saves=lambda engine: [SaveWriter.create(tmp_path / "a.msav", engine)])
    assert took > 0  # simulated latencies passed, on the virtual clock
    live.saves[0].check()
    assert len(read_save(tmp_path / "a.msav").ticks) == 3


def test_what_was_built_is_frozen_while_the_run_runs_and_given_back_after() -> None:
    """``manor run`` and ``manor fleet`` alike: the worlds and engines built before the
    run are out of the collector's reach during it (``what_is_built_frozen``), in the
    collector's again once it ends."""
    gc.unfreeze()  # an earlier test may have left objects frozen
    (config, scene), = _configured()
    live = open_run([(config, scene)], lambda gate: build_engine(config, scene, gate=gate))
    world = live.runs.loop.world

    async def main(engine: Engine) -> bool:
        await engine.loop.run(1)
        return gc.get_freeze_count() > 0 and not _walked(world)

    assert live.run(main, after=str)
    assert gc.get_freeze_count() == 0 and _walked(world)


def _walked(thing: object) -> bool:
    """Whether the collector's generations hold ``thing`` (frozen objects are in none)."""
    return any(found is thing for found in gc.get_objects())


@pytest.mark.trio
async def test_a_connected_gate_tells_its_notice_once() -> None:
    """What a gate has to say once connected goes to the caller's notice, once."""

    class NoticedGate:
        notices = ("a gate of another size", "a tenant of another weight")

        @asynccontextmanager
        async def connected(self) -> AsyncIterator[None]:
            record.append("connect")
            yield
            record.append("disconnect")

    record: list[str] = []
    async with gate_connected(NoticedGate(), record.append):  # type: ignore[arg-type]
        record.append("run")
    assert record == ["connect", "a gate of another size", "a tenant of another weight", "run", "disconnect"]
