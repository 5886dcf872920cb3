"""The shared gate's edges: a call's recorded end against its release on the real clock,
a save made while the gate's server was down, waiting for a lost gate, a gate sized past
the platform."""

from __future__ import annotations

import json
import math
import re
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any
from pathlib import Path

import pytest
import trio
import trio.testing
from in_process import manor_here
from lost_gate import LOST, LosableGate, LoseGate
from redis_server import RedisServer

from manor.admission.redis_gate import RedisGate, gate_status
from manor.cli import main
from manor.errors import SharedGateError, leaves, redacted_url
from manor.records import CallRecord, StoryEntry, TickRecord
from manor.replay.recorded import peak_platform_sessions
from manor.run.engine import Engine, build_engine
from manor.tick.instruments import Instrument
from scenes_fixture import TickRecorder, fixed_scene, make_engine, settings


def _most_in_flight(calls: list[CallRecord]) -> int:
    """The most calls whose recorded [admitted, finished) spans overlap at one instant."""
    return peak_platform_sessions(calls)


class TestRecordedEnd:
    def test_on_the_real_clock_no_recorded_overlap_exceeds_the_gate(self) -> None:
        """Many short calls on the real clock: a call's end is stamped when the gate takes
        its slot back, so the call that slot admits next never starts before it ends."""
        size = 3
        engine = make_engine(fixed_scene([0.001] * 24, narrator=0.001, summariser=0.001), gate_size=size, platform_limit=size + 1)
        recorder = TickRecorder()
        engine.loop.add_instrument(recorder)
        trio.run(engine.loop.run, 12, 0.0)  # the real clock
        calls = [call for tick in recorder.ticks for call in tick.calls]
        assert len(calls) == 12 * 26 and all(call.ok for call in calls)
        assert _most_in_flight(calls) == size
        for call in calls:
            assert call.admitted_at is not None and call.queued_at <= call.admitted_at <= call.finished_at


class _LoseRedis(Instrument):
    """Kills the gate's Redis as tick ``at`` ends; starts it again, if ``back``, when the
    loop says it waits for the gate."""

    def __init__(self, server: RedisServer, at: int, *, back: bool) -> None:
        self.server, self.at, self.back = server, at, back
        self.waits: list[tuple[str, float]] = []

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        if record.tick == self.at:
            self.server.kill()

    def gate_lost(self, message: str, limit_s: float) -> None:
        self.waits.append((message, limit_s))
        if self.back:
            self.server.start()


def _on_redis(server: RedisServer, lose: _LoseRedis, gate_wait_s: float) -> tuple[Engine, TickRecorder, RedisGate]:
    gate = RedisGate(server.url, "lost", size=2, lease_s=1.0)
    engine = build_engine(settings(platform_limit=3, gate_size=2), fixed_scene([0.002] * 4, narrator=0.002, summariser=0.002), gate=gate)
    engine.loop.gate_wait_s = gate_wait_s
    recorder = TickRecorder()
    engine.loop.add_instrument(recorder)
    engine.loop.add_instrument(lose)
    return engine, recorder, gate


def _found_no_gate(record: TickRecord) -> bool:
    return all(call.reason == "gate_unavailable" for call in record.calls)


class TestGateLost:
    def test_a_tick_that_found_no_gate_is_followed_by_a_wait_for_it_not_by_empty_ticks(self, redis_server: RedisServer) -> None:
        """Redis lost after tick 2 and back a moment later: one tick finds no gate, the
        loop waits for it (saying so once), and the run's other ticks are all ok."""
        lose = _LoseRedis(redis_server, at=2, back=True)
        engine, recorder, gate = _on_redis(redis_server, lose, gate_wait_s=30.0)

        async def main() -> None:
            async with gate.connected():
                await engine.loop.run(8)

        trio.run(main)  # the real clock
        assert len(recorder.ticks) == 8
        assert [_found_no_gate(record) for record in recorder.ticks] == [False, False, True, False, False, False, False, False]
        assert all(call.ok for record in recorder.ticks if not _found_no_gate(record) for call in record.calls)
        ((message, limit),) = lose.waits
        assert "Redis unreachable" in message and limit == 30.0

    def test_a_gate_lost_longer_than_the_wait_stops_the_run_in_one_line(self, redis_server: RedisServer) -> None:
        lose = _LoseRedis(redis_server, at=1, back=False)
        engine, recorder, gate = _on_redis(redis_server, lose, gate_wait_s=1.5)
        started = time.monotonic()

        async def main() -> None:
            async with gate.connected():
                await engine.loop.run(8)

        with pytest.raises(BaseException) as raised:  # in the Redis client's exception groups
            trio.run(main)
        (error,) = leaves(raised.value)
        assert isinstance(error, SharedGateError)
        assert re.fullmatch(r"gate redis://.*Redis unreachable: .*; no gate for 1.5s: stopped after tick 2", str(error))
        assert time.monotonic() - started >= 1.5
        assert [_found_no_gate(record) for record in recorder.ticks] == [False, True]
        assert len(lose.waits) == 1


def _losing(at: int, for_s: float, **values: Any) -> tuple[Engine, LoseGate]:
    """An engine of 1 s calls whose gate is lost as tick ``at`` ends, for ``for_s``."""
    gate = LosableGate(size=2)
    lose = LoseGate(gate, at, for_s)
    scene = fixed_scene([1.0] * 4, narrator=1.0, summariser=1.0)
    engine = build_engine(settings(platform_limit=3, gate_size=2, run_order="fifo", **values), scene, gate=gate, instruments=[lose])  # type: ignore[arg-type]
    return engine, lose


class TestGateLostUnderTheVirtualClock:
    """``gate.unavailable_wait_s``: how long a run waits for a lost gate between ticks,
    looking after pauses that double from 0.25 s to 4 s (exact, under MockClock)."""

    def test_the_wait_is_the_setting_and_ends_in_one_line_at_its_end(self) -> None:
        engine, lose = _losing(at=1, for_s=math.inf, gate_unavailable_wait_s=10.0)
        with pytest.raises(SharedGateError) as raised:
            trio.run(engine.loop.run, 5, 0.0, clock=trio.testing.MockClock(autojump_threshold=0))
        lost_at = lose.started[1]  # tick 2 found no gate at once
        assert lose.waits == [(lost_at, LOST, 10.0)]
        assert str(raised.value) == f"{LOST}; no gate for 10s: stopped after tick 2"
        assert len(lose.started) == 2

    def test_the_next_tick_starts_at_the_first_look_that_finds_the_gate(self) -> None:
        """Lost for 3 s: looks at +0.25, +0.75, +1.75, +3.75 (found): tick 3 starts then."""
        engine, lose = _losing(at=1, for_s=3.0, gate_unavailable_wait_s=10.0)
        trio.run(engine.loop.run, 4, 0.0, clock=trio.testing.MockClock(autojump_threshold=0))
        assert len(lose.started) == 4 and len(lose.waits) == 1
        assert lose.started[2] - lose.started[1] == 3.75

    def test_by_default_it_waits_120_s_and_the_flag_and_variable_set_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        engine, _ = _losing(at=1, for_s=math.inf)
        assert engine.loop.gate_wait_s == 120.0
        monkeypatch.setenv("MANOR_GATE_UNAVAILABLE_WAIT_S", "7")
        for flags, value, source in (((), 7.0, "environment"), (("--gate-unavailable-wait", "0"), 0.0, "command line")):
            done = manor_here("config", "--json", *flags)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["gate.unavailable_wait_s"] == {"value": value, "source": source}

    def test_zero_stops_at_the_first_tick_that_found_no_gate(self) -> None:
        engine, lose = _losing(at=2, for_s=math.inf, gate_unavailable_wait_s=0.0)
        with pytest.raises(SharedGateError, match="no gate for 0s: stopped after tick 3$"):
            trio.run(engine.loop.run, 5, 0.0, clock=trio.testing.MockClock(autojump_threshold=0))
        assert lose.waits[0][0] == lose.started[2]


class TestSizedPastThePlatform:
    @pytest.mark.trio
    async def test_a_gate_nobody_holds_that_keeps_another_size_is_said_so(self, redis_url: str) -> None:
        """A gate resized to 8 outlives its processes: the next process of size 5 shares
        it at 8 and says, in one line, that no process holds it and how to set it back;
        one that joins a gate in use says only that it is in use."""
        name = f"left-{uuid.uuid4().hex[:8]}"
        async with RedisGate(redis_url, name, size=5).connected() as first:
            first.size = 8
            with trio.fail_after(10):
                while (await gate_status(redis_url, name)).statistics.size != 8:  # type: ignore[union-attr]
                    await trio.sleep(0.02)
            async with RedisGate(redis_url, name, size=5).connected() as beside:
                (notice,) = beside.notices
                assert notice.split("; ")[0].endswith("is in use with size 8")
                assert "resize" not in notice
        later = RedisGate(redis_url, name, size=5)
        async with later.connected():
            assert later.size == 8
            assert later.notices == [
                (
                    f"gate {redacted_url(redis_url)} (gate {name}) is used by no process, yet keeps size 8; this process shares it "
                    "as it is (its own settings: size 5); 'manor gate resize 5' sets it to yours"
                )
            ]

    def test_resize_above_the_platform_limit_less_one_is_refused_unless_forced(
        self, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``manor gate resize`` in this process (its trio run needs the main thread's
        signals), the gate held meanwhile by a world in another thread."""
        name = f"resize-{uuid.uuid4().hex[:8]}"
        joined, leave = threading.Event(), threading.Event()

        async def hold() -> None:
            async with RedisGate(redis_url, name, size=5).connected():
                joined.set()
                await trio.to_thread.run_sync(leave.wait)

        holder = threading.Thread(target=trio.run, args=(hold,), daemon=True)
        holder.start()
        outcomes: list[tuple[int, tuple[str, ...], int, str, str]] = []
        try:
            assert joined.wait(60), "the gate was never joined"
            monkeypatch.chdir(tmp_path)
            for size, flags in ((8, ()), (6, ()), (5, ()), (8, ("--platform-limit", "0")), (7, ("--force",))):
                code = main(["gate", "resize", str(size), "--gate-url", redis_url, "--gate-name", name, *flags])
                out, err = capsys.readouterr()
                outcomes.append((size, flags, code, err.strip(), out.strip()))
        finally:
            leave.set()
            holder.join(60)
        refused = "manor: error: gate size {} is above the platform limit 6 less one (scene wacky_manor.toml): the platform would refuse calls past 6 in flight; --force sets it anyway, --platform-limit names another platform"
        assert outcomes == [
            (8, (), 1, refused.format(8), ""),
            (6, (), 1, refused.format(6), ""),
            (5, (), 0, "", f"gate {name} at {redis_url}: size 5 -> 5"),
            (8, ("--platform-limit", "0"), 0, "", f"gate {name} at {redis_url}: size 5 -> 8"),
            (7, ("--force",), 0, "", f"gate {name} at {redis_url}: size 8 -> 7"),
        ]


class TestReset:
    def test_reset_is_refused_while_a_process_is_on_the_gate_and_then_makes_the_next_process_set_it(
        self, redis_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A gate keeps the rate and burst of the process that made it after every
        process has left; ``manor gate reset`` deletes it (refused, in one line, while a
        process is on it), and the next process makes it with its own."""
        name = f"reset-{uuid.uuid4().hex[:8]}"
        joined, leave = threading.Event(), threading.Event()

        async def hold() -> None:
            async with RedisGate(redis_url, name, size=4, rate=50.0, burst=3).connected():
                joined.set()
                await trio.to_thread.run_sync(leave.wait)

        holder = threading.Thread(target=trio.run, args=(hold,), daemon=True)
        holder.start()
        try:
            assert joined.wait(60), "the gate was never joined"
            refused = main(["gate", "reset", "--gate-url", redis_url, "--gate-name", name])
            refusal = capsys.readouterr().err.strip()
        finally:
            leave.set()
            holder.join(60)
        assert refused == 1
        assert refusal == (
            f"manor: error: gate {redis_url} (gate {name}) is in use: 1 process on it, 0 permits held; "
            "it can be reset only while no process uses it ('manor gate status' lists them)"
        )
        kept = trio.run(gate_status, redis_url, name)
        assert kept is not None and (kept.rate, kept.burst, kept.statistics.size) == (50.0, 3, 4)

        assert main(["gate", "reset", "--gate-url", redis_url, "--gate-name", name]) == 0
        assert capsys.readouterr().out.strip() == (
            f"gate {name} at {redis_url}: reset (it had size 4, rate 50/s, burst 3, lease {kept.lease_s:g} s); "
            "the next process to use it makes it with its own settings"
        )
        assert trio.run(gate_status, redis_url, name) is None

        async def come_later() -> list[str]:
            later = RedisGate(redis_url, name, size=2)
            async with later.connected():
                return later.notices

        assert trio.run(come_later) == []
        remade = trio.run(gate_status, redis_url, name)
        assert remade is not None and (remade.rate, remade.statistics.size) == (0.0, 2)
        assert main(["gate", "reset", "--gate-url", redis_url, "--gate-name", f"never-{name}"]) == 1
        assert capsys.readouterr().err.strip().endswith("no process has used it (or the server lost it)")

    @pytest.mark.trio
    async def test_a_gate_left_with_another_rate_says_how_to_reset_it(self, redis_url: str) -> None:
        name = f"rate-{uuid.uuid4().hex[:8]}"
        async with RedisGate(redis_url, name, size=5, rate=50.0, burst=3).connected():
            pass
        later = RedisGate(redis_url, name, size=5)
        async with later.connected():
            (notice,) = later.notices
        assert notice.endswith(
            "yet keeps rate 50/s, burst 3; this process shares it as it is (its own settings: no rate); "
            "'manor gate reset' makes the next process set it anew"
        )
