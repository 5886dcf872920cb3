"""Settings changed while a run goes on (the dashboard's gate and policy keys) are
recorded in the save, and a replay makes them again at the same point."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from manor.config import flags_source, standard_sources
from manor.replay import replay
from manor.run.engine import build_engine, configure
from manor.saves import SaveWriter, read_save
from manor.saves.format import SettingChange
from manor.tick.policies import make_policy


def record_with_live_changes(path: Path) -> None:
    """Five ticks of the Wacky Manor: the gate shrunk to 3 between ticks 2 and 3, then
    to 2 and the policy switched to batch one second into tick 3."""
    config, scene = configure(standard_sources(environ={}))
    engine = build_engine(config, scene)
    writer = SaveWriter.create(path, engine)
    loop = engine.loop

    async def main() -> None:
        await loop.step()
        await loop.step()
        loop.resize_gate(3)

        async def during_tick_three() -> None:
            await trio.sleep(1.0)
            loop.resize_gate(2)
            loop.switch_policy(make_policy("batch", 3, 1789))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(during_tick_three)
            await loop.step()
        await loop.step()
        await loop.step()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    writer.close()


def test_the_save_holds_each_change_with_when_it_was_made(tmp_path: Path) -> None:
    """Between ticks: no time (it holds from the tick's start); during one: its time."""
    path = tmp_path / "live.msav"
    record_with_live_changes(path)
    save = read_save(path)
    changes = [frame.changes for frame in save.ticks]
    third_started = save.records[2].started_at
    assert changes[:2] == [(), ()]
    assert changes[2] == (
        SettingChange("gate.size", 3, None),
        SettingChange("gate.size", 2, third_started + 1.0),
        SettingChange("run.policy", "batch", third_started + 1.0),
        SettingChange("run.batch_size", 3, third_started + 1.0),
    )
    assert changes[3:] == [(), ()]


def test_a_replay_makes_the_changes_again_and_verifies(tmp_path: Path) -> None:
    """The recorded world hash holds after every tick, every tick takes its recorded
    time, and the replay ends with the gate and policy the recording ended with."""
    path = tmp_path / "live.msav"
    record_with_live_changes(path)
    result = replay(read_save(path))
    assert result.mismatch is None
    assert result.engine.loop.gate.size == 2
    assert result.engine.loop.policy.name == "batch"
    assert result.statistics.makespans == [r.makespan for r in read_save(path).records]


def test_a_what_if_keeps_what_it_overrides(tmp_path: Path) -> None:
    """A what-if on the gate size keeps its gate; the recorded policy switch still happens."""
    path = tmp_path / "live.msav"
    record_with_live_changes(path)
    result = replay(read_save(path), flags_source({"gate.size": 4}, {}))
    assert result.engine.loop.gate.size == 4
    assert result.engine.loop.policy.name == "batch"


def test_without_the_changes_the_replay_would_differ(tmp_path: Path) -> None:
    """The control: keep the starting gate and policy, and the ticks from 3 on take
    other times (the world hash, which depends on outcomes only, cannot tell)."""
    path = tmp_path / "live.msav"
    record_with_live_changes(path)
    recorded = [r.makespan for r in read_save(path).records]
    result = replay(read_save(path), flags_source({"gate.size": 5, "run.policy": "pipeline"}, {}))
    replayed = result.statistics.makespans
    assert replayed[:2] == recorded[:2]
    assert all(a != b for a, b in zip(replayed[2:], recorded[2:], strict=True))
