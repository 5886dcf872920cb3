"""``manor trace``: a save as Chrome trace-event JSON, checked event by event."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from saves_fixture import SAVES

from manor.cli import main
from manor.replay import recorded_summary
from manor.saves import chrome_trace, read_save
from manor.worlds.manor import CALLERS as MANOR_CALLERS

PIPELINE = SAVES / "wacky_manor_pipeline.msav"
LEGACY = SAVES / "wacky_manor_legacy.msav"


@pytest.fixture(scope="module", params=[PIPELINE, LEGACY], ids=["pipeline", "legacy"])
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The example save and its trace, written by the command."""
    output = tmp_path_factory.mktemp("trace") / "trace.json"
    assert main(["trace", str(request.param), "-o", str(output)]) == 0
    return request.param, json.loads(output.read_text(encoding="utf-8"))


def calls_of(path: Path) -> list[Any]:
    save = read_save(path)
    return [call for frame in save.ticks for call in (*frame.superseded, *frame.record.calls)]


class TestTrace:
    def test_every_event_is_well_formed(self, exported: tuple[Path, dict[str, Any]]) -> None:
        _, trace = exported
        assert trace["displayTimeUnit"] == "ms"
        for event in trace["traceEvents"]:
            assert event["ph"] in {"M", "X", "C", "i"}
            assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
            if event["ph"] != "M":
                assert event["ts"] >= 0
            if event["ph"] == "X":
                assert event["dur"] >= 0

    def test_one_named_track_per_caller(self, exported: tuple[Path, dict[str, Any]]) -> None:
        path, trace = exported
        names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
        processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
        assert set(processes.values()) == {"character", "narrator", "summariser", "scene beat", "gate"}
        callers = {(call.caller, call.agent) for call in calls_of(path)}
        tracks = {(processes[pid], name) for (pid, _), name in names.items() if processes[pid] != "gate"}
        scene = read_save(path).scene
        assert tracks == {(caller.replace("_", " "), f"{scene.agents[agent].name} ({agent})") for caller, agent in callers}
        assert ("character", "Hobbes (hobbes)") in tracks and ("scene beat", "The Grey Lady (ghost)") in tracks

    def test_every_call_waits_then_runs_on_its_track(self, exported: tuple[Path, dict[str, Any]]) -> None:
        """A waiting span per call, a running span per call let through; spans on one
        track never overlap."""
        path, trace = exported
        calls = calls_of(path)
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] in {"gate", "call"}]
        assert sum(e["cat"] == "gate" for e in spans) == len(calls)
        assert sum(e["cat"] == "call" for e in spans) == sum(call.admitted_at is not None for call in calls)
        rejected = [e for e in spans if e["name"] == "waiting → platform_rejected"]
        assert len(rejected) == sum(call.reason == "platform_rejected" and call.admitted_at is None for call in calls)
        by_track: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
        for span in spans:
            by_track[span["pid"], span["tid"]].append(span)
        for track in by_track.values():
            track.sort(key=lambda e: (e["ts"], e["cat"] == "call"))
            for before, after in zip(track, track[1:]):
                assert before["ts"] + before["dur"] <= after["ts"] + 0.001
        first = next(e for e in spans if e["cat"] == "call" and e["args"]["outcome"] == "ok")
        assert first["args"]["text"] and first["args"]["output_tokens"] > 0

    def test_the_gate_counters(self, exported: tuple[Path, dict[str, Any]]) -> None:
        """Calls in flight peak at the gate size (pipeline) or the platform's peak (legacy,
        no gate); nothing is left in flight or queued at the end."""
        path, trace = exported
        samples = [e for e in trace["traceEvents"] if e["ph"] == "C"]
        assert [e["ts"] for e in samples] == sorted({e["ts"] for e in samples})  # one sample per instant
        in_flight = [e["args"]["in flight"] for e in samples]
        queued = [e["args"]["queued"] for e in samples]
        assert min(in_flight) >= 0 and min(queued) >= 0
        assert (in_flight[-1], queued[-1]) == (0, 0)
        summary = recorded_summary(read_save(path))
        if summary["policy"] == "pipeline":
            assert max(in_flight) == summary["gate_size"] == 5
            assert max(queued) > 0
        else:
            assert max(in_flight) == summary["peak_platform_sessions"] == 6

    def test_ticks_are_markers(self, exported: tuple[Path, dict[str, Any]]) -> None:
        _, trace = exported
        markers = [e for e in trace["traceEvents"] if e["ph"] == "i"]
        assert [e["name"] for e in markers] == [f"tick {n}" for n in range(1, 21)]
        assert all(e["s"] == "g" for e in markers)
        assert markers[0]["ts"] == 0
        spans = [e for e in trace["traceEvents"] if e.get("cat") == "tick"]
        assert [e["ts"] for e in spans] == [e["ts"] for e in markers]

    def test_the_trace_names_the_run(self, exported: tuple[Path, dict[str, Any]]) -> None:
        path, trace = exported
        other = trace["otherData"]
        assert (other["scene"], other["ticks"], other["seed"]) == ("The Wacky Manor", 20, 1789)
        assert other["policy"] == ("legacy" if path == LEGACY else "pipeline")

    def test_the_command_replaces_its_output_and_says_what_it_wrote(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        output = tmp_path / "trace.json"
        output.write_text("old", encoding="utf-8")
        assert main(["trace", str(PIPELINE), "-o", str(output)]) == 0
        out = capsys.readouterr().out
        events = len(chrome_trace(read_save(PIPELINE))["traceEvents"])
        assert out.startswith(f"{output}: {events} trace events for 20 ticks")
        assert len(json.loads(output.read_text(encoding="utf-8"))["traceEvents"]) == events
        assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]

    def test_caller_kinds_are_processes_in_order(self, exported: tuple[Path, dict[str, Any]]) -> None:
        _, trace = exported
        order = {e["args"]["name"]: e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name"}
        assert [order[kind.replace("_", " ")] for kind in MANOR_CALLERS] == [1, 2, 3, 4]


def test_a_degraded_calls_spans_say_what_failed(tmp_path: Path) -> None:
    """A run saved in format 2 keeps each failure's message: the trace shows it."""
    save, output = tmp_path / "legacy.msav", tmp_path / "trace.json"
    assert main(["run", "--policy", "legacy", "--ticks", "3", "--json", "--save", str(save)]) == 0
    assert main(["trace", str(save), "-o", str(output)]) == 0
    spans = [e for e in json.loads(output.read_text(encoding="utf-8"))["traceEvents"] if e["ph"] == "X" and e["cat"] in {"gate", "call"}]
    refused = [e["args"] for e in spans if e["args"]["reason"] == "platform_rejected"]
    assert refused and all(args["error"] == "platform full: 6 of 6 sessions in use" and args["refused_by"] == "limiter" for args in refused)
    assert all("error" not in e["args"] for e in spans if e["args"]["outcome"] == "ok")
