"""A call's task born at its admission (``manor.tick.admitted``): judged when made, in
line at the gate without a task (``Gate.arrive``), its task started when the gate lets
it through — with the same records as calls that wait at the gate in tasks of their own."""

from __future__ import annotations

import math

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from scenes_fixture import fixed_scene, make_engine, run_engine
from scenes_fixture import settings as config_settings

from manor.admission.gate import Gate, Permit
from manor.calls import Done, Request
from manor.errors import GateTimeout, ProviderError
from manor.layers import BreakerLayer, Layer, Observer
from manor.layers.stack import JUDGE_EACH, Inner, Listener
from manor.records import TickRecord
from manor.run.engine import build_engine
from manor.tick.admitted import CALL_TASK
from manor.tick.instruments import Instrument
from manor.worlds import load_scene


def _call_tasks() -> int:
    """The calls' tasks alive in this trio run."""
    count = 0
    tasks = [trio.lowlevel.current_root_task()]
    while tasks:
        task = tasks.pop()
        count += task.name == CALL_TASK
        tasks.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return count


class _TaskCounter(Instrument):
    """The most call tasks alive at once, looked at as each call is let through."""

    def __init__(self) -> None:
        self.most = 0

    def call_admitted(self, request: Request, admitted_at: float) -> None:
        self.most = max(self.most, _call_tasks())


class _PassThrough(Layer):
    """A layer above the gate that wraps its calls (more than judging them): the stack
    cannot be split at the gate, and each call waits there in a task of its own."""

    priority = 40

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        return await inner(request, listener)


class TestTasksBornAtAdmission:
    def test_no_more_call_tasks_alive_than_the_gate_lets_through(self) -> None:
        """Twelve calls, a gate of 5: never more than 5 call tasks at once."""
        counter = _TaskCounter()
        engine = make_engine(fixed_scene(), instruments=[counter])
        assert engine.loop.gate.size == 5
        [tick] = run_engine(engine, 1)
        assert len(tick.calls) == 12
        assert 0 < counter.most <= 5

    def test_a_layer_that_wraps_above_the_gate_keeps_a_task_a_call(self) -> None:
        """The old way, still there for stacks it cannot split: every call a task."""
        counter = _TaskCounter()
        config = config_settings(platform_limit=6, run_order="fifo")
        engine = build_engine(config, fixed_scene(), instruments=[counter], layers=[_PassThrough()])
        run_engine(engine, 1)
        assert counter.most == 12


class _Judging(Observer):
    """A third party's judging layer above the gate: it counts the calls it judges and
    the outcomes it hears, and says nothing of its judgement in advance
    (``Observer.judgement_now`` as the base class has it)."""

    priority = 15

    def __init__(self) -> None:
        self.judged = 0
        self.heard = 0

    def before(self, request: Request) -> object:
        self.judged += 1
        return self.judged

    def after(self, request: Request, state: object, done: Done | None, error: BaseException | None) -> None:
        self.heard += 1


class TestJudgedAtOnce:
    def test_a_third_partys_observer_judges_every_call_itself(self) -> None:
        """Beside a closed breaker, which judges a tick's calls at once, an observer
        that does not say its judgement in advance is asked for each call: every call
        judged and heard once, in a stack still split at the gate."""
        judging = _Judging()
        config = config_settings(platform_limit=6, run_order="fifo")
        engine = build_engine(config, fixed_scene(), layers=[judging])
        assert engine.loop.gated.split is not None
        [tick] = run_engine(engine, 1)
        assert judging.judged == judging.heard == len(tick.calls) == 12

    @pytest.mark.trio
    async def test_an_open_circuit_judges_each_call(self, autojump_clock: trio.testing.MockClock) -> None:
        """Only a closed circuit judges a tick's calls at once; an open one judges each
        (and refuses it), a half-open one too (its first call is the trial)."""
        breaker = BreakerLayer(failures=1, cooldown=5.0)
        assert breaker.judgement_now() is False
        breaker.after(Request(caller="character", agent="a", tick=1, ticket=0), False, None, ProviderError("no"))
        assert breaker.judgement_now() is JUDGE_EACH


def _records(ticks: list[TickRecord]) -> list[object]:
    return [msgspec.to_builtins(tick) for tick in ticks]


class TestSameRecords:
    @settings(max_examples=12, deadline=None)
    @given(
        error_rate=st.sampled_from([0.0, 0.1, 0.3]),
        failures=st.integers(1, 5),
        cooldown=st.sampled_from([0.0, 1.0, 5.0]),
        budget=st.sampled_from([0.0, 0.002, 0.01]),
        gate_timeout=st.sampled_from([1.0, 3.0, 30.0]),
        rate=st.sampled_from([0.0, 2.0]),
        size=st.integers(1, 6),
        policy=st.sampled_from(["pipeline", "batch"]),
    )
    def test_as_when_every_call_waits_in_a_task(
        self, error_rate: float, failures: int, cooldown: float, budget: float, gate_timeout: float, rate: float, size: int, policy: str
    ) -> None:
        """Judged when made and started at admission, the calls of a run leave the
        records they leave when each waits at the gate in a task of its own: the
        judgement (breaker, budget) and the outcome keep their moments."""
        values = {
            "sim_error_rate": error_rate, "breaker_failures": failures, "breaker_cooldown_s": cooldown,
            "cost_budget": budget, "cost_price_per_1k_tokens": 0.001, "gate_timeout_s": gate_timeout,
            "gate_rate": rate, "gate_size": size, "run_policy": policy, "run_seed": 11,
        }  # fmt: skip
        scene = load_scene("wacky_manor")
        split = build_engine(config_settings(**values), scene)
        whole = build_engine(config_settings(**values), scene, layers=[_PassThrough()])
        assert split.loop.gated.split is not None and whole.loop.gated.split is None
        assert _records(run_engine(split, 12)) == _records(run_engine(whole, 12))
        assert split.loop.gate.statistics() == whole.loop.gate.statistics()


class _Admissions(Instrument):
    """Every call's admission as the instruments hear it."""

    def __init__(self) -> None:
        self.heard: list[tuple[int | None, float]] = []

    def call_admitted(self, request: Request, admitted_at: float) -> None:
        self.heard.append((request.ticket, admitted_at))


class TestAdmissionFromThePermit:
    def test_instruments_hear_each_admission_once_as_when_the_gate_says_it(self) -> None:
        """A call fired at admission learns its admission and its end from its permit,
        not from the gate layer's events: the instruments hear each admission once, at
        the same instant, and each record's admission and end are those of a call that
        hears the events (waiting at the gate in a task of its own)."""
        scene = load_scene("wacky_manor")
        values = {"gate_size": 3, "run_seed": 5, "run_policy": "pipeline"}
        heard_split, heard_whole = _Admissions(), _Admissions()
        split = build_engine(config_settings(**values), scene, instruments=[heard_split])
        whole = build_engine(config_settings(**values), scene, instruments=[heard_whole], layers=[_PassThrough()])
        assert split.loop.gated.split is not None and whole.loop.gated.split is None
        split_ticks, whole_ticks = run_engine(split, 4), run_engine(whole, 4)
        assert sorted(heard_split.heard) == sorted(heard_whole.heard)
        calls = [call for tick in split_ticks for call in tick.calls]
        assert len(heard_split.heard) == len(calls) == len({ticket for ticket, _ in heard_split.heard})
        assert sorted((call.ticket, call.admitted_at) for call in calls) == sorted(heard_split.heard)
        assert [(c.admitted_at, c.finished_at) for t in split_ticks for c in t.calls] == [
            (c.admitted_at, c.finished_at) for t in whole_ticks for c in t.calls
        ]


class TestCancelled:
    def test_calls_in_line_without_a_task_leave_the_gate(self) -> None:
        """A tick cancelled while calls wait at the gate without tasks: nothing is left
        waiting or in flight, and the calls' tickets stall nobody."""
        engine = make_engine(fixed_scene())
        gate = engine.loop.gate

        async def main() -> None:
            with trio.move_on_after(0.75):
                await engine.loop.step()
            assert gate.statistics().waiting == 0
            assert gate.statistics().in_flight == 0
            assert gate.statistics().cancelled == 7  # the 5 let through had their permits
            # The next ticket goes straight through.
            permit = await gate.acquire(gate.issue()[0])
            permit.release()

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.trio
class TestGateArrive:
    """``Gate.arrive``: a caller in line without a task."""

    async def test_admitted_at_once_with_a_free_slot(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=1)
        [ticket] = gate.issue()
        permit = gate.arrive(ticket, timeout=math.inf, wake=pytest.fail)
        assert type(permit) is Permit
        assert gate.statistics().in_flight == 1

    async def test_woken_with_its_permit_when_a_slot_frees(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=1)
        first, second = gate.issue(2)
        held = gate.arrive(first, timeout=math.inf, wake=pytest.fail)
        woken: list[Permit | None] = []
        arrival = gate.arrive(second, timeout=math.inf, wake=woken.append)
        assert type(arrival) is not Permit and woken == []
        await trio.sleep(2.0)
        held.release()  # type: ignore[union-attr]
        [permit] = woken
        assert permit is not None
        assert (permit.ticket, permit.queued_at, permit.admitted_at) == (second, 0.0, 2.0)
        assert gate.statistics().max_wait == 2.0

    async def test_the_last_watched_wait_handed_a_slot_leaves_no_deadline(self, autojump_clock: trio.testing.MockClock) -> None:
        """Callers parked without a task, with timeouts (the gate's timekeeper watches
        them), admitted one by one as slots are given back: while one is still watched
        the timekeeper keeps a deadline; once the last is admitted it holds none, so the
        virtual clock never jumps for it (the hand-over keeps the count of watched waits)."""
        gate = Gate(size=1)
        first, second, third = gate.issue(3)
        held = gate.arrive(first, timeout=math.inf, wake=pytest.fail)
        woken: list[Permit | None] = []
        gate.arrive(second, timeout=30.0, wake=woken.append)
        gate.arrive(third, timeout=40.0, wake=woken.append)
        await trio.testing.wait_all_tasks_blocked()
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline == 30.0
        await trio.sleep(1.0)
        held.release()  # type: ignore[union-attr]
        await trio.testing.wait_all_tasks_blocked()
        assert [permit.ticket for permit in woken if permit is not None] == [second]
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline < math.inf  # the third is watched
        woken[0].release()  # type: ignore[union-attr]
        await trio.testing.wait_all_tasks_blocked()
        assert [permit.ticket for permit in woken if permit is not None] == [second, third]
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline == math.inf
        woken[1].release()  # type: ignore[union-attr]

    async def test_arrives_at_the_instant_its_caller_read(self, autojump_clock: trio.testing.MockClock) -> None:
        """A tick reads the clock once for all its calls (``now``): each is queued then,
        and its wait at the gate is timed from then."""
        gate = Gate(size=1)
        first, second = gate.issue(2)
        await trio.sleep(5.0)
        held = gate.arrive(first, timeout=math.inf, wake=pytest.fail, now=4.0)
        woken = trio.Event()
        arrival = gate.arrive(second, timeout=3.0, wake=lambda permit: woken.set(), now=4.0)
        assert (held.queued_at, held.admitted_at) == (4.0, 4.0)  # type: ignore[union-attr]
        await woken.wait()
        assert trio.current_time() == 7.0  # its timeout counted from 4.0, not from 5.0
        with pytest.raises(GateTimeout):
            await gate.admitted(arrival)  # type: ignore[arg-type]

    async def test_woken_without_a_permit_at_its_timeout(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=1)
        first, second = gate.issue(2)
        gate.arrive(first, timeout=math.inf, wake=pytest.fail)
        woken = trio.Event()
        arrival = gate.arrive(second, timeout=3.0, wake=lambda permit: woken.set())
        await woken.wait()
        assert trio.current_time() == 3.0
        with pytest.raises(GateTimeout, match="no gate slot within 3s"):
            await gate.admitted(arrival)  # type: ignore[arg-type]
        assert gate.statistics().timeouts == 1

    async def test_the_token_bucket_head_waits_in_a_task(self, autojump_clock: trio.testing.MockClock) -> None:
        """Its wait for a token is timed: it is woken at once to make it in a task."""
        gate = Gate(size=5, rate=1.0, burst=1)
        first, second = gate.issue(2)
        gate.arrive(first, timeout=math.inf, wake=pytest.fail)  # the bucket's one token
        woken: list[Permit | None] = []
        arrival = gate.arrive(second, timeout=math.inf, wake=woken.append)
        assert woken == [None]
        permit = await gate.admitted(arrival)  # type: ignore[arg-type]
        assert (permit.ticket, trio.current_time()) == (second, 1.0)

    async def test_one_that_leaves_stalls_nobody(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=1)
        first, second, third = gate.issue(3)
        held = gate.arrive(first, timeout=math.inf, wake=pytest.fail)
        arrival = gate.arrive(second, timeout=math.inf, wake=pytest.fail)
        woken: list[Permit | None] = []
        gate.arrive(third, timeout=math.inf, wake=woken.append)
        assert gate.leave(arrival)  # type: ignore[arg-type]
        assert not gate.leave(arrival)  # type: ignore[arg-type]
        held.release()  # type: ignore[union-attr]
        assert [permit.ticket for permit in woken if permit is not None] == [third]
        assert gate.statistics().cancelled == 1
