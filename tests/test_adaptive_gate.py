"""The learned gate (``gate.size = "auto"``): its controller under the virtual clock, the
gate's pause on retry-after, a run whose save replays it exactly, and the size shared
through Redis."""

from __future__ import annotations

import contextlib
import math
import textwrap
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from in_process import manor_here
from redis_server import SEEN_WITHIN_S

from manor.admission.adaptive import (
    LEARNED_KEY,
    PROBE_CALLS,
    Adjustment,
    LearnedSize,
    RecordedAdjustments,
    apply_to_gate,
)
from manor.admission.gate import Gate
from manor.calls import Done, Event, RateLimits, Request
from manor.config import resolve
from manor.config.backends import CapacityStep, PlatformCapacity
from manor.config.layering import Source, built_in_source
from manor.errors import ConfigError, ProviderError, SessionLimitError
from manor.providers.provider import Provider
from manor.run.engine import build_engine, configure, scene_sim
from manor.saves.reader import read_save

_REFUSED = SessionLimitError("429 too many requests")
_ANSWER = Done(text="yes")


def _learned(size: int, smallest: int = 1, largest: int = 16) -> tuple[Gate, LearnedSize, list[Adjustment]]:
    gate = Gate(size=size)
    made: list[Adjustment] = []
    learning = LearnedSize(gate, smallest, largest)

    def apply(adjustment: Adjustment) -> None:
        made.append(adjustment)
        apply_to_gate(gate, adjustment)

    learning.apply = apply
    return gate, learning, made


async def _admissions(gate: Gate, count: int, *, hold_s: float = 0.0) -> list[tuple[int, float]]:
    """``count`` new tickets' callers, arriving together and each holding its permit
    ``hold_s``: each ticket with the instant it was admitted, in the order admitted."""
    admitted: list[tuple[int, float]] = []

    async def call(ticket: int) -> None:
        permit = await gate.acquire(ticket)
        admitted.append((permit.ticket, trio.current_time()))
        await trio.sleep(hold_s)
        permit.release()

    async with trio.open_nursery() as nursery:
        for ticket in gate.issue(count):
            nursery.start_soon(call, ticket)
    return admitted


def _in_flight(learning: LearnedSize, count: int) -> list[int]:
    """``count`` calls let through: what each hands back at its end."""
    return [learning.admitted() for _ in range(count)]


class TestShrink:
    def test_a_refusal_halves_the_size_but_never_above_what_the_platform_bore(self) -> None:
        """16 with 7 in flight refused: min(16 // 2, 7 - 1) = 6."""
        gate, learning, made = _learned(16)
        epochs = _in_flight(learning, 7)
        learning.ended(6, epochs[6], _REFUSED)
        assert gate.size == 6 and learning.ceiling == 7
        assert made == [Adjustment(ticket=6, why="refused by the server with 7 in flight", size=6)]

    def test_a_refusal_at_full_use_halves_it(self) -> None:
        gate, learning, _ = _learned(8)
        epochs = _in_flight(learning, 8)
        learning.ended(7, epochs[7], _REFUSED)
        assert gate.size == 4

    def test_calls_sent_before_the_shrink_do_not_shrink_it_again(self) -> None:
        gate, learning, made = _learned(8)
        epochs = _in_flight(learning, 8)
        learning.ended(7, epochs[7], _REFUSED)
        learning.ended(6, epochs[6], _REFUSED)  # sent before the shrink: no news
        assert gate.size == 4 and len(made) == 1
        later = learning.admitted()
        learning.ended(8, later, _REFUSED)  # sent after it: shrinks again
        assert gate.size == 2

    def test_never_below_the_smallest(self) -> None:
        gate, learning, _ = _learned(4, smallest=3)
        epochs = _in_flight(learning, 2)
        learning.ended(1, epochs[1], _REFUSED)
        assert gate.size == 3

    def test_refusals_by_the_limiter_other_failures_and_final_refusals_change_nothing(self) -> None:
        gate, learning, made = _learned(8)
        epochs = _in_flight(learning, 4)
        learning.ended(0, epochs[0], SessionLimitError("own limiter", refused_by="limiter"))
        learning.ended(1, epochs[1], ProviderError("boom"))
        learning.ended(2, epochs[2], SessionLimitError("spend cap", final=True))
        learning.ended(3, epochs[3], None)  # cancelled
        assert gate.size == 8 and made == []

    def test_the_bounds_are_checked(self) -> None:
        with pytest.raises(ValueError, match="above gate.max"):
            LearnedSize(Gate(size=2), 5, 4)


class TestGrow:
    def test_a_window_at_full_use_grows_it_by_one_up_to_the_largest(self) -> None:
        gate, learning, made = _learned(2, largest=3)
        for _ in range(2):  # a window of 2 calls answered with the gate full
            epochs = _in_flight(learning, 2)
            for ticket, epoch in enumerate(epochs):
                learning.ended(ticket, epoch, _ANSWER)
        assert gate.size == 3 and [m.size for m in made] == [3]
        for _ in range(6):
            epochs = _in_flight(learning, 3)
            for ticket, epoch in enumerate(epochs):
                learning.ended(ticket, epoch, _ANSWER)
        assert gate.size == 3  # gate.max

    def test_a_gate_that_is_not_full_learns_nothing(self) -> None:
        gate, learning, made = _learned(4)
        for ticket in range(50):
            learning.ended(ticket, learning.admitted(), _ANSWER)  # one call in flight at a time
        assert gate.size == 4 and made == []

    def test_it_grows_to_the_size_refused_only_after_probe_calls_answered(self) -> None:
        gate, learning, made = _learned(16)
        epochs = _in_flight(learning, 5)
        learning.ended(4, epochs[4], _REFUSED)  # 5 refused: size 4, ceiling 5
        for ticket, epoch in enumerate(epochs[:4]):
            learning.ended(ticket, epoch, _ANSWER)  # these were at full use (4 of 4)
        assert gate.size == 4
        answered = 4
        while gate.size == 4:
            epochs = _in_flight(learning, 4)
            for epoch in epochs:
                learning.ended(100 + answered, epoch, _ANSWER)
                answered += 1
        assert answered >= PROBE_CALLS
        assert made[-1].size == 5 and "trying 5 again" in made[-1].why

    @pytest.mark.trio
    async def test_growth_waits_until_nobody_waits(self, autojump_clock: trio.testing.MockClock) -> None:
        """Growing would let a waiter through at the instant another is let through."""
        gate, learning, _ = _learned(1, largest=4)
        held = await gate.acquire()
        waiting = trio.Event()
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                permit = await gate.acquire()
                waiting.set()
                permit.release()

            nursery.start_soon(wait)
            await trio.sleep(1)
            learning.ended(held.ticket, learning.admitted(), _ANSWER)  # a window of 1, but one waits
            assert gate.size == 1
            held.release()
            await waiting.wait()
            learning.ended(9, learning.admitted(), _ANSWER)
        assert gate.size == 2


class TestPause:
    @pytest.mark.trio
    async def test_retry_after_pauses_admissions_until_it_has_passed(self, autojump_clock: trio.testing.MockClock) -> None:
        gate, learning, made = _learned(4)
        await trio.sleep(1)
        epochs = _in_flight(learning, 1)
        learning.ended(0, epochs[0], SessionLimitError("429", retry_after=2.5))
        assert made[-1].paused_until == 3.5 and gate.paused_until == 3.5
        assert await _admissions(gate, 3) == [(0, 3.5), (1, 3.5), (2, 3.5)]

    @pytest.mark.trio
    async def test_rate_headers_saying_none_remain_pause_until_the_reset(self, autojump_clock: trio.testing.MockClock) -> None:
        gate, learning, made = _learned(4)
        learning.ended(0, learning.admitted(), Done(text="ok", rates=RateLimits(requests_remaining=0, requests_reset_s=1.5)))
        assert made == [Adjustment(ticket=0, why="no request remains for 1.5s (rate headers)", paused_until=1.5)]
        permit = await gate.acquire()
        assert trio.current_time() == 1.5
        permit.release()

    @pytest.mark.trio
    async def test_a_waiter_times_out_during_a_pause_and_the_next_is_admitted_at_its_end(self, autojump_clock: trio.testing.MockClock) -> None:
        from manor.errors import GateTimeout

        gate = Gate(size=2)
        gate.pause(5.0)
        first, second = gate.issue(2)
        times: list[Any] = []
        async with trio.open_nursery() as nursery:

            async def impatient() -> None:
                with pytest.raises(GateTimeout):
                    await gate.acquire(first, timeout=1)
                times.append(("timed out", trio.current_time()))

            async def patient() -> None:
                permit = await gate.acquire(second)
                times.append(("admitted", trio.current_time()))
                permit.release()

            nursery.start_soon(impatient)
            nursery.start_soon(patient)
        assert times == [("timed out", 1.0), ("admitted", 5.0)]

    @pytest.mark.trio
    async def test_calls_in_flight_go_on_and_their_releases_admit_nobody_during_a_pause(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=1)
        held = await gate.acquire()
        admitted: list[float] = []
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                permit = await gate.acquire()
                admitted.append(trio.current_time())
                permit.release()

            nursery.start_soon(wait)
            await trio.sleep(1)
            gate.pause(4.0)
            await trio.sleep(1)
            held.release()  # at 2: the slot is free, the pause holds the waiter
        assert admitted == [4.0]


class TestRateHeaders:
    """Rate headers saying how many requests remain, and when they reset, bound the calls
    let through until then (``Gate.allow``)."""

    @pytest.mark.trio
    async def test_the_gate_admits_the_allowed_calls_then_pauses_until_the_reset(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=4)
        gate.allow(2, 5.0)
        assert sorted(await _admissions(gate, 4, hold_s=1)) == [(0, 0.0), (1, 0.0), (2, 5.0), (3, 5.0)]
        assert gate.paused_until == 5.0

    @pytest.mark.trio
    async def test_an_allowance_whose_window_reset_bounds_nothing(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=4)
        gate.allow(1, 2.0)
        await trio.sleep(2)
        permits = [await gate.acquire() for _ in range(3)]
        assert trio.current_time() == 2.0 and gate.paused_until is None
        for permit in permits:
            permit.release()

    @pytest.mark.trio
    async def test_a_later_allowance_replaces_the_earlier(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=4)
        gate.allow(1, 9.0)
        gate.allow(3, 4.0)
        permits = [await gate.acquire() for _ in range(3)]
        assert trio.current_time() == 0.0 and gate.paused_until == 4.0
        permit = await gate.acquire()
        assert trio.current_time() == 4.0
        for held in [*permits, permit]:
            held.release()

    @pytest.mark.trio
    async def test_remaining_requests_in_an_answer_become_an_allowance(self, autojump_clock: trio.testing.MockClock) -> None:
        _, learning, made = _learned(4)
        await trio.sleep(1)
        learning.ended(0, learning.admitted(), Done(text="ok", rates=RateLimits(requests_remaining=2, requests_reset_s=3)))
        assert made == [Adjustment(ticket=0, why="2 requests remain for 3s (rate headers)", allowed=2, allowed_until=4.0)]
        assert learning.last == made[-1]

    @pytest.mark.trio
    async def test_no_token_left_pauses_and_a_count_without_a_reset_bounds_nothing(self, autojump_clock: trio.testing.MockClock) -> None:
        gate, learning, made = _learned(4)
        learning.ended(0, learning.admitted(), Done(text="ok", rates=RateLimits(tokens_remaining=0, tokens_reset_s=2)))
        assert made == [Adjustment(ticket=0, why="no token remains for 2s (rate headers)", paused_until=2.0)]
        learning.ended(1, learning.admitted(), Done(text="ok", rates=RateLimits(requests_remaining=3, tokens_remaining=900)))
        assert len(made) == 1 and gate.paused_until == 2.0

    @pytest.mark.trio
    @pytest.mark.parametrize("family", ["openai", "anthropic"])
    async def test_a_server_counting_requests_per_window_never_refuses(self, family: str, autojump_clock: trio.testing.MockClock) -> None:
        """A stand-in server allowing 3 requests per 10 s window, saying on every answer
        how many remain and when the window resets: the learned gate sends none into a
        429, and the calls beyond the window's wait for its reset."""
        import datetime

        import httpx

        from manor.calls import Request
        from manor.layers import GateLayer, Stack
        from manor.providers.openai import OpenAIProvider
        from manor.worlds.manor import CallerKind

        per_window, window = 3, 10.0
        seen: list[float] = []

        async def handler(request: httpx.Request) -> httpx.Response:
            now = trio.current_time()
            start = now // window * window
            used = sum(1 for at in seen if at >= start)
            if used >= per_window:
                return httpx.Response(429, json={"error": {"type": "rate_limit_error", "message": "window used up"}})
            seen.append(now)
            await trio.sleep(0.5)  # the answer's headers are sent when it is ready
            left, reset = per_window - used - 1, start + window - trio.current_time()
            if family == "openai":
                headers = {"x-ratelimit-remaining-requests": str(left), "x-ratelimit-reset-requests": f"{reset:.3f}s"}
            else:
                # An instant to the second, as Anthropic writes it: rounded up, not to
                # send the calls back a hair before the reset by the wall clock.
                instant = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=reset + 1)
                instant = instant.replace(microsecond=0)
                headers = {"anthropic-ratelimit-requests-remaining": str(left), "anthropic-ratelimit-requests-reset": instant.isoformat()}
            body = b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
            return httpx.Response(200, headers={"content-type": "text/event-stream", **headers}, content=body)

        gate = Gate(size=8)
        learning = LearnedSize(gate, 1, 8)
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        stack = Stack(OpenAIProvider("http://model.invalid/v1", model="m", client=client), [GateLayer(gate, adjuster=learning)])

        async def one() -> None:
            await stack.call(Request(caller=CallerKind.CHARACTER, agent="butler", prompt="hi"))

        await one()  # answered at 0.5: 2 remain until 10
        await trio.sleep(0.5)
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(one)
        # Two of the five sent at once, the other three when the window resets (within
        # the second Anthropic's instants are written to).
        late = 0.01 if family == "openai" else 1.0
        assert seen[:3] == [0.0, 1.0, 1.0] and all(10.0 <= at <= 10.0 + late for at in seen[3:]) and len(seen) == 6


class TestReplayed:
    def test_recorded_adjustments_are_made_at_the_end_of_the_same_calls(self) -> None:
        gate = Gate(size=8)
        recorded = RecordedAdjustments({3: [Adjustment(ticket=3, why="refused", size=5)]}, gate)
        recorded.ended(2, recorded.admitted(), _ANSWER)
        assert gate.size == 8
        recorded.ended(3, recorded.admitted(), _ANSWER)  # whatever the outcome: as recorded
        assert gate.size == 5


class TestSettings:
    def test_auto_starts_at_the_max_derived_from_the_platform_limit(self) -> None:
        config = resolve([built_in_source(), Source("flags", 400, {"gate.size": "auto", "platform.limit": 6})])
        gate = config.settings.gate
        assert gate.learns and gate.max == 5 and gate.first_size == 5 and config.origins["gate.max"].startswith("derived")
        unlimited = resolve([built_in_source(), Source("flags", 400, {"gate.size": "auto", "platform.limit": 0})])
        assert unlimited.settings.gate.first_size == 16

    def test_a_min_above_the_max_is_one_line(self) -> None:
        with pytest.raises(ConfigError, match="gate.min 9 .* is above gate.max 5"):
            resolve([built_in_source(), Source("flags", 400, {"gate.size": "auto", "gate.min": 9, "platform.limit": 6})])

    def test_a_fixed_size_is_as_it_was(self) -> None:
        config = resolve([built_in_source(), Source("flags", 400, {"gate.size": 4})])
        assert not config.settings.gate.learns and config.settings.gate.first_size == 4


# -- runs -----------------------------------------------------------------------------------

_MOVING = {"steps": (CapacityStep(at=0, sessions=6), CapacityStep(at=6, sessions=3))}


def _engine_run(ticks: int = 10) -> tuple[list[Any], Any]:
    config, scene = configure([built_in_source(), Source("test", 400, {"gate.size": "auto", "gate.max": 16, "platform.limit": 0})])
    backend = scene_sim(config, scene)
    backend.capacity = PlatformCapacity(**_MOVING)  # type: ignore[arg-type]
    engine = build_engine(config, scene, backend=backend)
    records: list[Any] = []

    async def main() -> None:
        for _ in range(ticks):
            records.append(await engine.loop.step())

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return records, engine


def test_a_learned_run_is_the_same_every_time() -> None:
    """trio shuffles its run queue differently each run: the records never change."""
    first, engine = _engine_run()
    assert engine.learning is not None and engine.learning.last is not None
    for _ in range(5):
        again, _ = _engine_run()
        assert again == first


def _write_config(tmp_path: Path, retry_after: float | None = None) -> Path:
    extra = f", retry_after_s = {retry_after}" if retry_after is not None else ""
    path = tmp_path / "manor.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            [backends.moving]
            kind = "sim"
            capacity = {{by = "tick"{extra}, steps = [{{at = 0, sessions = 6}}, {{at = 5, sessions = 3}}]}}
            """
        )
    )
    return path


def test_a_save_of_a_learned_gate_replays_exactly(tmp_path: Path) -> None:
    config = _write_config(tmp_path, retry_after=1.5)
    save = tmp_path / "learned.msav"
    ran = manor_here(
        "run", "--config", str(config), "--backend", "moving", "--ticks", "14", "--platform-limit", "0", "--gate-size", "auto",
        "--gate-max", "16", "--save", str(save), "--json", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    summary = msgspec.json.decode(ran.stdout)
    sizes = summary["gate_sizes"]
    assert sizes["start"] == 16 and sizes["min"] <= 3 and sizes["changes"] == len(sizes["history"]) >= 2
    assert sizes["history"][0]["why"].startswith("refused by the server with 7 in flight; retry-after 1.5s")
    changes = [change for frame in read_save(save).ticks for change in frame.changes]
    assert changes and all(change.key == LEARNED_KEY for change in changes)
    verified = manor_here("replay", str(save), "--verify", cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "matches the recording after every tick" in verified.stdout


def test_a_fleet_learns_one_size_from_every_worlds_refusals_and_its_saves_replay(tmp_path: Path) -> None:
    """``manor fleet --gate-size auto``: one learned size for the one gate, every world's
    refusals feeding it, every world's report and save holding every change; each
    world's save replays exactly; the same fleet run again gives the same records."""
    config = _write_config(tmp_path, retry_after=1.5)
    args = ["fleet", "--config", str(config), "--backend", "moving", "--worlds", "3", "--ticks", "12", "--platform-limit", "0",
            "--gate-size", "auto", "--gate-max", "16", "--json"]  # fmt: skip
    ran = manor_here(*args, "--save-dir", str(tmp_path / "saves"), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    worlds = msgspec.json.decode(ran.stdout)["worlds"]
    histories = [world["gate_sizes"]["history"] for world in worlds]
    assert all([(h["size"], h["why"]) for h in history] == [(h["size"], h["why"]) for h in histories[0]] for history in histories)
    assert histories[0][0]["size"] < 16 and worlds[0]["gate_sizes"]["final"] <= 3
    assert sum(world["platform_rejections"]["by_server"] for world in worlds) >= 2  # refusals of more than one call
    for save in sorted((tmp_path / "saves").iterdir()):
        verified = manor_here("replay", str(save), "--verify", cwd=tmp_path)
        assert verified.returncode == 0 and "match the recording after every tick" in verified.stdout, verified.stdout + verified.stderr
    again = manor_here(*args, cwd=tmp_path)
    assert [w["world_hash"] for w in msgspec.json.decode(again.stdout)["worlds"]] == [w["world_hash"] for w in worlds]
    assert [w["gate_sizes"] for w in msgspec.json.decode(again.stdout)["worlds"]] == [w["gate_sizes"] for w in worlds]


def test_gate_size_flag_takes_auto_or_a_number(tmp_path: Path) -> None:
    ran = manor_here("config", "--gate-size", "auto", cwd=tmp_path)
    assert ran.returncode == 0 and "auto" in ran.stdout
    bad = manor_here("run", "--gate-size", "many", cwd=tmp_path)
    assert bad.returncode == 2 and "invalid size value: 'many'" in bad.stderr


# -- Redis ----------------------------------------------------------------------------------


@pytest.mark.trio
async def test_one_process_refusal_shrinks_the_shared_gate_for_all(redis_url: str) -> None:
    from manor.admission.redis_gate import RedisGate

    name = f"test-{uuid.uuid4().hex[:10]}"
    async with RedisGate(redis_url, name, size=8, world="a").connected() as a, RedisGate(redis_url, name, size=8, world="b").connected() as b:
        learning = LearnedSize(a, 1, 8)
        epochs = [learning.admitted() for _ in range(5)]
        learning.ended(4, epochs[4], _REFUSED)  # min(8 // 2, 5 - 1) = 4
        assert a.size == 4
        with trio.fail_after(SEEN_WITHIN_S):
            while b.size != 4:
                await trio.sleep(0.01)
        learning.ended(3, epochs[3], SessionLimitError("429", retry_after=0.2))
        assert a.paused_until is not None and not math.isinf(a.paused_until)
        started = trio.current_time()
        permit = await a.acquire(timeout=10)
        assert trio.current_time() - started >= 0.15  # sent once the pause had passed
        permit.release()


class _Counting(Provider):
    """The simulated backend, its answers carrying rate headers: ``left`` requests remain
    until a reset ``reset_s`` away, on every answer."""

    def __init__(self, inner: Provider, left: int, reset_s: float) -> None:
        self.inner, self.rates = inner, RateLimits(requests_remaining=left, requests_reset_s=reset_s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        async with contextlib.aclosing(self.inner.invoke(request)) as events:
            async for event in events:
                yield msgspec.structs.replace(event, rates=self.rates) if isinstance(event, Done) else event


def test_a_save_with_allowances_from_rate_headers_replays_exactly(tmp_path: Path) -> None:
    """Answers saying 2 requests remain for 0.5 s: the learned gate's allowances are live
    changes of the save, made again by its replay at the ends of the same calls."""
    from manor.replay.run import replay
    from manor.saves.writer import SaveWriter

    config, scene = configure([built_in_source(), Source("test", 400, {"gate.size": "auto", "gate.max": 8, "platform.limit": 0})])
    engine = build_engine(config, scene, backend=_Counting(scene_sim(config, scene), left=2, reset_s=0.5))
    path = tmp_path / "counted.msav"
    writer = SaveWriter.create(path, engine)
    trio.run(engine.loop.run, 4, 0.0, clock=trio.testing.MockClock(autojump_threshold=0))
    writer.check()
    changes = [msgspec.convert(c.value, Adjustment) for frame in read_save(path).ticks for c in frame.changes if c.key == LEARNED_KEY]
    assert any(change.allowed == 2 for change in changes)
    replayed = replay(read_save(path))
    assert replayed.verified, replayed.mismatch


@pytest.mark.trio
async def test_a_pause_in_one_process_holds_every_process(redis_url: str) -> None:
    """A retry-after heard in one process: the server grants no slot to any process's
    call before it has passed, and grants them then, without a call to wake them."""
    from manor.admission.redis_gate import RedisGate

    name = f"test-{uuid.uuid4().hex[:10]}"
    async with RedisGate(redis_url, name, size=4, world="a").connected() as a, RedisGate(redis_url, name, size=4, world="b").connected() as b:
        paused_at = trio.current_time()
        a.pause(paused_at + 0.6)
        with trio.fail_after(SEEN_WITHIN_S):
            while a._pause_to is not None:  # told to the server
                await trio.sleep(0.01)
        assert b.paused_until is None  # not b's own: the server holds its calls
        permit = await b.acquire(timeout=10)
        waited = trio.current_time() - paused_at
        # Not before the pause's end; well before the acquire's own 10 s timeout (a loose
        # upper bound, so that a loaded machine cannot fail it).
        assert 0.55 <= waited < 5.0, waited
        permit.release()
        # A shorter pause asked for later changes nothing; once it has passed, no wait.
        a.pause(trio.current_time() + 0.01)
        with trio.fail_after(SEEN_WITHIN_S):
            while a._pause_to is not None:
                await trio.sleep(0.01)
        started = trio.current_time()
        permit = await b.acquire(timeout=10)
        assert trio.current_time() - started < 3.0
        permit.release()
