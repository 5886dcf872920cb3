"""Replaying saves: exact round trips for every policy, the shipped examples, verify
reporting the first differing tick, what-if replays, and the replay backend itself."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from saves_fixture import EXAMPLES, FORMAT_1, SAVES, record, rewrite_payloads

from manor.calls import Request
from manor.cli import main
from manor.config import flags_source
from manor.errors import ProviderError
from manor.providers import MockProvider, Provider, collect
from manor.records import StoryEntry, TickRecord
from manor.replay import (
    RecordedResponse,
    RecordedRun,
    ReplayBackend,
    recorded_summary,
    replay,
)
from manor.saves import read_save
from manor.tick.instruments import Instrument
from manor.worlds.manor import CallerKind

#: Runs that must replay exactly: every policy, with faults, timeouts, deadlines, a
#: breaker that opens, a token bucket and longest-first tickets.
ROUND_TRIPS: dict[str, dict[str, Any]] = {
    "pipeline": {"run__policy": "pipeline"},
    "batch": {"run__policy": "batch"},
    "legacy": {"run__policy": "legacy"},
    "legacy retrying on a platform of 3": {"run__policy": "legacy", "platform__limit": 3, "run__batch_size": 4},
    "pipeline with faults and timeouts": {
        "run__policy": "pipeline", "sim__error_rate": 0.1, "sim__hang_rate": 0.05, "call__timeout_s": 5.0, "gate__timeout_s": 3.0,
    },
    "legacy with faults and a tick deadline": {
        "run__policy": "legacy", "sim__error_rate": 0.1, "sim__hang_rate": 0.05, "call__timeout_s": 5.0, "run__tick_deadline_s": 9.0,
    },
    "batch, longest first, token bucket, deadline": {
        "run__policy": "batch", "sim__hang_rate": 0.05, "run__tick_deadline_s": 8.0, "run__order": "longest-first", "gate__rate": 2.0,
    },
    "pipeline with a breaker that opens": {"run__policy": "pipeline", "sim__error_rate": 0.5, "breaker__failures": 2, "gate__size": 8},
}  # fmt: skip


class _Ticks(Instrument):
    def __init__(self) -> None:
        self.ticks: list[TickRecord] = []

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.ticks.append(record)


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert err == ""
    return code, json.loads(out)


class TestRoundTrip:
    """run -> save -> replay --verify is exact: every tick record, to the bit."""

    @pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
    def test_replay_reproduces_every_tick_record(self, name: str, tmp_path: Path) -> None:
        path = tmp_path / "run.msav"
        summary, _ = record(path, **ROUND_TRIPS[name])
        save = read_save(path)
        ticks = _Ticks()
        result = replay(save, instruments=[ticks])
        assert result.verified and result.mismatch is None
        assert result.drawn == 0
        # Every call's text, tokens, ticket, outcome, and queued/admitted/finished times.
        assert ticks.ticks == save.records
        assert result.summary() == summary

    def test_the_fault_runs_do_degrade(self, tmp_path: Path) -> None:
        """The round trips above cover degraded calls of every kind they aim at."""
        reasons = set()
        for name, settings in ROUND_TRIPS.items():
            summary, _ = record(tmp_path / f"{len(reasons)}-{name}.msav", **settings)
            reasons |= {reason for kinds in summary["degradations"].values() for reason, n in kinds.items() if n}
        assert reasons == {"platform_rejected", "provider_error", "call_timeout", "gate_timeout", "cancelled", "circuit_open"}

    @pytest.mark.parametrize("policy", ["pipeline", "batch", "legacy"])
    def test_verify_from_the_command_line(self, policy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "run.msav"
        assert main(["run", "--ticks", "6", "--policy", policy, "--json", "--save", str(path)]) == 0
        run = json.loads(capsys.readouterr().out)
        code, report = cli_json(capsys, "replay", str(path), "--verify", "--json")
        assert code == 0
        assert report == {"ticks": 6, "verified": True, "first_mismatch": None, "world_hash": run["world_hash"]}


class TestExampleSaves:
    """The saves shipped in saves/ still replay exactly: a format or engine change that
    breaks old saves fails here."""

    @pytest.mark.parametrize("name", EXAMPLES)
    def test_an_example_verifies(self, name: str, capsys: pytest.CaptureFixture[str]) -> None:
        code, report = cli_json(capsys, "replay", str(SAVES / name), "--verify", "--json")
        assert code == 0
        assert report["verified"] is True and report["ticks"] == 20 and report["first_mismatch"] is None

    def test_the_examples_are_one_scene_and_seed_under_two_policies(self) -> None:
        legacy, pipeline = (recorded_summary(read_save(SAVES / name)) for name in ("wacky_manor_legacy.msav", "wacky_manor_pipeline.msav"))
        assert (legacy["scene"], legacy["seed"], legacy["policy"]) == ("The Wacky Manor", 1789, "legacy")
        assert (pipeline["scene"], pipeline["seed"], pipeline["policy"]) == ("The Wacky Manor", 1789, "pipeline")
        assert legacy["degraded"] > 0 and legacy["platform_rejections"]["by_limiter"] > 0
        assert pipeline["degraded"] == 0 and pipeline["platform_rejections"]["total"] == 0


class TestSavesRecordedUnderFifo:
    """longest-first became the default order: a save recorded under fifo still replays
    under fifo, whatever its format and however its order row came about."""

    @staticmethod
    def _header_edit(fmt: int, order_row: str) -> Any:
        def edit(index: int, frame: Any) -> Any:
            if index == 0:
                rows = frame["settings"]
                if order_row == "missing":  # a save from before run.order existed
                    rows = [row for row in rows if row[0] != "run.order"]
                elif order_row == "derived":
                    rows = [[k, v, "derived: by an older Manor" if k == "run.order" else o] for k, v, o in rows]
                frame["settings"] = rows
                frame["format"] = fmt  # the shipped saves are format 1
                if fmt == 2:
                    frame["run_id"] = "an-old-run"
            return frame

        return edit

    @pytest.mark.parametrize("fmt", [1, 2])
    @pytest.mark.parametrize("order_row", ["missing", "derived", "built-in default"])
    def test_a_fifo_save_replays_under_fifo(self, fmt: int, order_row: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "old.msav"
        path.write_bytes(rewrite_payloads((FORMAT_1 / "wacky_manor_pipeline.msav").read_bytes(), self._header_edit(fmt, order_row)))
        code, report = cli_json(capsys, "replay", str(path), "--verify", "--json")
        assert (code, report["verified"], report["first_mismatch"]) == (0, True, None)
        assert recorded_summary(read_save(path))["order"] == "fifo"

    def test_the_new_default_is_a_what_if_away(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Replayed under longest-first, the shipped fifo save's ticks are shorter."""
        code, what_if = cli_json(capsys, "replay", str(SAVES / "wacky_manor_pipeline.msav"), "--order", "longest-first", "--json")
        assert code == 0
        assert (what_if["recorded"]["order"], what_if["order"]) == ("fifo", "longest-first")
        assert what_if["tick_seconds"]["mean"] < what_if["recorded"]["tick_seconds"]["mean"]


class TestVerifyReportsTheFirstDifference:
    @pytest.mark.parametrize(
        ("field", "value", "detail"),
        [
            # The recorded backend took 100 s: replayed, the 60 s call timeout cuts it off.
            ("finished_at", lambda call: call["admitted_at"] + 100.0, "character hobbes: ok recorded, call_timeout replayed"),
            # A response that is not the one the recorded world hash was made from.
            ("text", lambda call: "I say something nobody said.", "every call ended as recorded, yet the world differs"),
        ],
    )
    def test_an_altered_call_is_found_at_its_tick(self, field: str, value: Any, detail: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Tick 5's first call altered: ticks 1-4 match, 5 does not, and verify says why."""
        path = tmp_path / "run.msav"
        record(path, run__ticks=8)

        def change(index: int, frame: Any) -> Any:
            if index == 5:
                call = frame["record"]["calls"][0]
                call[field] = value(call)
            return frame

        altered = tmp_path / "altered.msav"
        altered.write_bytes(rewrite_payloads(path.read_bytes(), change))
        code, report = cli_json(capsys, "replay", str(altered), "--verify", "--json")
        assert code == 1
        assert report["verified"] is False and report["first_mismatch"] == 5 and report["ticks"] == 8
        assert main(["replay", str(altered), "--verify"]) == 1
        out = capsys.readouterr().out
        assert out.startswith(f"{altered}: tick 5 differs from the recording: {detail}")

    def test_a_changed_starting_world_is_tick_0(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "run.msav"
        record(path, run__ticks=2)
        altered = tmp_path / "altered.msav"
        altered.write_bytes(rewrite_payloads(path.read_bytes(), lambda i, d: {**d, "world": {**d["world"], "hash": "00" * 16}} if i == 0 else d))
        code, report = cli_json(capsys, "replay", str(altered), "--verify", "--json")
        assert (code, report["first_mismatch"]) == (1, 0)


class TestWhatIf:
    """The same recorded calls under other settings, side by side with the recording."""

    def test_a_what_if_equals_running_those_settings(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """With the simulated backend, the recorded responses are what it would answer:
        replaying a pipeline run with gate 3 gives exactly the figures of a run with gate 3."""
        path = tmp_path / "run.msav"
        recorded, _ = record(path)
        direct, _ = record(tmp_path / "gate3.msav", gate__size=3)
        code, what_if = cli_json(capsys, "replay", str(path), "--gate-size", "3", "--json")
        assert code == 0
        assert what_if.pop("recorded") == recorded
        assert what_if.pop("drawn") == 0
        assert what_if == direct
        assert direct["tick_seconds"]["mean"] > recorded["tick_seconds"]["mean"]

    def test_legacy_replayed_as_pipeline_draws_the_rejected_calls(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The legacy example's rejected scene beats never reached the backend: a
        pipeline replay draws exactly those, and takes as long as a pipeline run."""
        save = SAVES / "wacky_manor_legacy.msav"
        code, what_if = cli_json(capsys, "replay", str(save), "--policy", "pipeline", "--json")
        assert code == 0
        recorded = what_if["recorded"]
        assert what_if["drawn"] == recorded["degradations"]["scene_beat"]["platform_rejected"] == 20
        assert (what_if["policy"], what_if["degraded"], what_if["platform_rejections"]["total"]) == ("pipeline", 0, 0)
        pipeline = recorded_summary(read_save(SAVES / "wacky_manor_pipeline.msav"))
        assert what_if["tick_seconds"] == pipeline["tick_seconds"]
        run_keys = set(pipeline)
        assert set(what_if) == run_keys | {"recorded", "drawn"}

    def test_the_side_by_side_table(self, capsys: pytest.CaptureFixture[str]) -> None:
        code = main(["replay", str(SAVES / "wacky_manor_legacy.msav"), "--policy", "pipeline", "--platform-limit", "8"])
        out = " ".join(capsys.readouterr().out.split())
        assert code == 0
        assert "replayed with --policy pipeline, --platform-limit 8" in out
        assert "recorded" in out and "replayed" in out
        assert "no gate / 6" in out and "7 / 8" in out  # the gate is derived again from the new limit
        assert "responses drawn from the simulated backend (the recording has none for them): 20" in out

    def test_verify_refuses_what_if_flags(self, capsys: pytest.CaptureFixture[str]) -> None:
        code = main(["replay", str(SAVES / "wacky_manor_legacy.msav"), "--verify", "--gate-size", "8"])
        out, err = capsys.readouterr()
        assert (code, out) == (1, "")
        assert err == "manor: error: --verify replays the recorded settings; it cannot be combined with --gate-size\n"


# -- the replay backend ----------------------------------------------------------------


def _request(tick: int = 1, agent: str = "hobbes", attempt: int = 0) -> Request:
    return Request(caller=CallerKind.CHARACTER, agent=agent, tick=tick, attempt=attempt)


def _fallback(asked: list[Request]) -> MockProvider:
    """Answers "drawn" after 0.5 s, noting each request in ``asked``."""

    async def handler(request: Request) -> str:
        asked.append(request)
        await trio.sleep(0.5)
        return "drawn"

    return MockProvider(handler)


def _backend(*responses: RecordedResponse, fallback: Provider | None = None) -> ReplayBackend:
    return ReplayBackend({(1, "character", "hobbes"): list(responses)}, fallback=fallback or _fallback([]))


class TestReplayBackend:
    @pytest.mark.trio
    async def test_a_recorded_answer_comes_after_the_recorded_latency(self, autojump_clock: trio.testing.MockClock) -> None:
        backend = _backend(RecordedResponse(kind="answer", attempt=0, opened_at=100.0, finished_at=101.75, text="Quite.", input_tokens=3, output_tokens=1))
        start = trio.current_time()
        done = await collect(backend, _request())
        assert trio.current_time() - start == 1.75
        assert (done.text, done.usage.input_tokens, done.usage.output_tokens) == ("Quite.", 3, 1)
        assert backend.drawn == 0

    @pytest.mark.trio
    async def test_opened_at_the_recorded_instant_it_ends_at_the_recorded_instant(self, autojump_clock: trio.testing.MockClock) -> None:
        """opened + (finished - opened) is not always finished in floating point; a
        replayed call opened at the recorded instant ends at the recorded instant."""
        opened, finished = 32.97907328453511, 103.1976675722046
        assert opened + (finished - opened) != finished
        backend = _backend(RecordedResponse(kind="answer", attempt=0, opened_at=opened, finished_at=finished, text="x"))
        await trio.sleep_until(opened)
        assert trio.current_time() == opened
        await collect(backend, _request())
        assert trio.current_time() == finished

    @pytest.mark.trio
    async def test_a_recorded_error_is_raised_after_its_latency(self, autojump_clock: trio.testing.MockClock) -> None:
        backend = _backend(RecordedResponse(kind="error", attempt=0, opened_at=5.0, finished_at=7.0))
        with pytest.raises(ProviderError, match="the recorded backend failed"):
            await collect(backend, _request())
        assert trio.current_time() == 2.0

    @pytest.mark.trio
    async def test_an_unanswered_call_never_answers(self, autojump_clock: trio.testing.MockClock) -> None:
        backend = _backend(RecordedResponse(kind="unanswered", attempt=0, opened_at=0.0, finished_at=5.0))
        with trio.move_on_after(1000) as scope:
            await collect(backend, _request())
        assert scope.cancelled_caught

    @pytest.mark.trio
    async def test_calls_without_a_response_are_drawn_and_counted(self, autojump_clock: trio.testing.MockClock) -> None:
        """Each response is used once; another tick, agent or a used-up key is drawn."""
        asked: list[Request] = []
        fallback = _fallback(asked)
        backend = _backend(RecordedResponse(kind="answer", attempt=0, opened_at=0.0, finished_at=1.0, text="recorded"), fallback=fallback)
        texts = [(await collect(backend, request)).text for request in (_request(), _request(), _request(tick=2), _request(agent="ghost"))]
        assert texts == ["recorded", "drawn", "drawn", "drawn"]
        assert backend.drawn == 3 == len(asked)

    @pytest.mark.trio
    async def test_the_exact_attempt_first_then_another_try_of_the_same_call(self, autojump_clock: trio.testing.MockClock) -> None:
        backend = _backend(
            RecordedResponse(kind="answer", attempt=1, opened_at=0.0, finished_at=1.0, text="second try"),
            RecordedResponse(kind="answer", attempt=2, opened_at=0.0, finished_at=1.0, text="third try"),
        )
        assert (await collect(backend, _request(attempt=2))).text == "third try"
        assert (await collect(backend, _request(attempt=0))).text == "second try"
        assert backend.drawn == 0


class TestRecordedRun:
    """RecordedRun: a save's settings resolved once, its figures without an engine."""

    @pytest.mark.parametrize("policy", ["pipeline", "legacy"])
    def test_the_recorded_figures_are_the_run_s_and_build_no_engine(self, tmp_path: Path, policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """A save's figures are those its run printed; working them out builds no engine."""
        summary, _ = record(tmp_path / "run.msav", run__policy=policy, run__ticks=5)
        monkeypatch.setattr("manor.replay.recorded.build_engine", _no_engine)
        assert RecordedRun.from_save(read_save(tmp_path / "run.msav")).summary() == summary

    def test_a_replay_resolves_the_recorded_settings_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The recorded settings and a what-if's are each resolved once per replay."""
        from manor.replay import recorded

        resolved: list[int] = []
        real = recorded.resolve
        monkeypatch.setattr(recorded, "resolve", lambda sources: resolved.append(len(sources)) or real(sources))
        save = read_save(SAVES / "wacky_manor_pipeline.msav")
        result = replay(save, flags_source({"gate.size": 2}, {"gate.size": "--gate-size"}))
        assert resolved == [2, 3]
        assert result.recording.recorded.settings.gate.size == 5 and result.engine.loop.gate.size == 2


def _no_engine(*args: object, **kwargs: object) -> None:
    raise AssertionError("the recorded figures built an engine")
