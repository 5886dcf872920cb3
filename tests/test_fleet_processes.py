"""``manor fleet --processes P``: a fleet's worlds in P OS processes sharing one gate
through a real redis-server, against a ``manor serve-agent`` server that answers 429
when more calls reach it than the gate allows; the report of a fleet in one process;
bad input in one line; a process that fails; a signal that stops every process."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
from agent_servers import serving, stats
from hypothesis import given
from hypothesis import strategies as st
from in_process import manor_here
from scenes_fixture import fixed_latency_scene

from manor.admission.redis_gate import gate_status
from manor.fleet.in_process import parts
from manor.fleet.processes import PeakSessions
from manor.saves import read_save
from manor.wording import counted

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, /proc")

CALLS_PER_TICK = 14
RUN_KEYS = {
    "scene", "policy", "order", "ticks", "seed", "platform_limit", "gate_size", "calls", "ok", "degraded", "degradations",
    "platform_rejections", "repairs", "errors", "first_error", "peak_platform_sessions", "tick_seconds", "tokens", "cost", "world_hash", "world",
}  # fmt: skip
#: Longest any one wait of these tests may take, on a loaded machine.
PATIENCE_S = 60.0


def _environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("MANOR_")}


#: ``manor`` as its script runs it, but with ``STOP_GRACE_S`` at ``PATIENCE_S``: how long
#: the parent lets a process it stops close its saves before it kills it. 5 s is plenty
#: on a quiet machine and was missed by 0.34 s on a loaded one; what these tests check
#: is that every process stops by itself (its figures came), not how fast.
_PATIENT_MANOR = f"""
import manor.fleet.processes
from manor.cli import command
manor.fleet.processes.STOP_GRACE_S = {PATIENCE_S}
command()
"""


def _manor(argv: list[str], cwd: Path, **options: Any) -> subprocess.Popen[str]:
    """``manor ARGV``, its output piped unless ``options`` say otherwise."""
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.Popen([sys.executable, "-m", "manor", *argv], cwd=cwd, env=_environment(), text=True, **options)


def _fleet(argv: list[str], cwd: Path, **options: Any) -> subprocess.Popen[str]:
    """``manor fleet ...`` (``argv`` starts with ``fleet``) as ``_manor`` starts it, its
    parent patient with processes it stops (``_PATIENT_MANOR``)."""
    assert argv[0] == "fleet"
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.Popen([sys.executable, "-c", _PATIENT_MANOR, *argv], cwd=cwd, env=_environment(), text=True, **options)


def _ended(process: subprocess.Popen[str]) -> tuple[str, str]:
    """Its stdout and stderr, once it has ended by itself (within ``PATIENCE_S``). If it
    has not, it and its processes are killed (they would run on for the rest of the
    suite), and the test fails naming each process still running, its state, and what
    the parent said: a fleet that once hung here under load (1 run of 5 at load 3) left
    nothing else to go on."""
    try:
        return process.communicate(timeout=PATIENCE_S)
    except subprocess.TimeoutExpired:
        running = {}
        for pid in _children(process.pid):
            with contextlib.suppress(OSError):
                state = next(line for line in (Path("/proc") / str(pid) / "status").read_text().splitlines() if line.startswith("State:"))
                running[pid] = (state, (Path("/proc") / str(pid) / "wchan").read_text())
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"still running after {PATIENCE_S:g} s: the parent and its processes {running}; the parent said {err!r}") from None


def _served_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "manor.toml"
    path.write_text(f'[backends.local]\nkind = "openai"\nbase_url = "{url}/v1"\nmodel = "manor"\n[backend]\ndefault = "local"\n', encoding="utf-8")
    return path


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie nobody has reaped)."""
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def _ticks(save: Path) -> int:
    try:
        return len(read_save(save).ticks)
    except Exception:  # noqa: BLE001 - not there yet, or caught inside its header
        return 0


def _wait_for_ticks(process: subprocess.Popen[str], saves: list[Path], ticks: int) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not all(_ticks(save) >= ticks for save in saves):
        if process.poll() is not None:
            pytest.fail(f"the fleet ended before it was stopped: {process.communicate()[1]}")
        assert time.monotonic() < deadline, "the fleet never got under way"
        time.sleep(0.05)


def _verifies(*saves: Path) -> list[dict[str, Any]]:
    """Each save's ``manor replay --verify --json`` report, all of them verified. Run in
    this process: a start-up of Manor costs more than a replay of a few ticks, and what
    is checked is the saves the processes wrote, not the replay command's process."""
    reports = []
    for save in saves:
        done = manor_here("replay", str(save), "--verify", "--json")
        report = json.loads(done.stdout) if done.returncode == 0 else {}
        if not report.get("verified"):
            said = manor_here("replay", str(save), "--verify")
            pytest.fail(done.stdout + done.stderr + said.stdout + said.stderr)
        reports.append(report)
    return reports


def _slow_fleet(tmp_path: Path, redis_url: str, *flags: str) -> tuple[list[str], Path]:
    """The argv of a long fleet of 4 worlds in 2 processes (five 0.05 s calls a tick each
    through a gate of 2), saving to its save dir; and that dir."""
    scene = fixed_latency_scene(tmp_path, 0.05, "slow")
    saves = tmp_path / "saves"
    argv = [
        "fleet", "--worlds", "4", "--processes", "2", "--scene", str(scene), "--ticks", "100000", "--save-dir", str(saves),
        "--gate-url", redis_url, "--gate-name", f"slow-{uuid.uuid4().hex[:8]}", *flags,
    ]  # fmt: skip
    return argv, saves


#: What a world of a fleet in processes says of its tenant, as one in one process: its
#: shares counted on the monotonic clock every process of the machine shares.
TENANT_KEYS = {
    "tenant", "weight", "max_sessions", "admissions", "gate_wait_s",
    "admissions_share", "backlogged_share", "share_per_weight", "session_s_backlogged",
}  # fmt: skip

class TestReport:
    @pytest.mark.slow(5)
    def test_four_worlds_in_two_processes_report_and_save_as_one_fleet(self, tmp_path: Path, redis_url: str) -> None:
        """4 worlds, 2 processes, a gate of 3, a server of capacity 3 that refuses the
        fourth call: no refusal; the report of a fleet in one process (its worlds' seeds,
        totals that add up, a peak of at most the gate); every save verifies."""
        gate, size, ticks = f"procs-{uuid.uuid4().hex[:8]}", 3, 2
        saves = tmp_path / "saves"
        calls = 4 * ticks * CALLS_PER_TICK

        async def served() -> tuple[str, str, dict[str, Any]]:
            async with serving(capacity=size, reject_when_full=True, latency=0.05) as (url, _):
                config = _served_config(tmp_path, url)
                argv = [
                    "fleet", "--worlds", "4", "--processes", "2", "--json", "--config", str(config), "--seed", "1", "--ticks", str(ticks),
                    "--gate-url", redis_url, "--gate-name", gate, "--gate-size", str(size), "--platform-limit", "0", "--save-dir", str(saves),
                ]  # fmt: skip
                process = _fleet(argv, tmp_path)
                with trio.fail_after(PATIENCE_S):
                    while (status := await gate_status(redis_url, gate)) is None or len(status.holders) < 2:
                        await trio.sleep(0.02)
                assert sorted(holder.world for holder in status.holders) == [
                    "fleet of 4 worlds of The Wacky Manor: worlds 0, 2",
                    "fleet of 4 worlds of The Wacky Manor: worlds 1, 3",
                ]
                out, err = await trio.to_thread.run_sync(lambda: process.communicate(timeout=2 * PATIENCE_S))
                server = await stats(url)
            assert process.returncode == 0, err
            status = await gate_status(redis_url, gate)  # the processes have ended
            assert status is not None and status.holders == () and status.statistics.admitted == calls
            return out, err, server

        # The fleet under trio (the server, the gate's status); its saves verified after,
        # by ``manor replay`` in this process, which runs trio itself.
        out, err, server = trio.run(served)
        *warnings, saved = err.splitlines()
        assert saved == f"manor: saved {ticks} ticks of 4 worlds to {saves}"
        assert all(line.startswith("manor: warning: a tick of each of the 4 worlds") for line in warnings)  # the simulator's forecast
        summary = json.loads(out)
        assert server["rejected"] == 0 and server["peak_running"] <= size
        assert server["submitted"] == server["completed"] == calls
        worlds = summary["worlds"]
        assert [(world["index"], world["seed"]) for world in worlds] == [(0, 1), (1, 2), (2, 3), (3, 4)]
        for world in worlds:
            assert set(world) == RUN_KEYS | {"index", "elapsed_s", "calls_per_s"} | TENANT_KEYS
            assert world["ok"] == world["calls"] == ticks * CALLS_PER_TICK and world["elapsed_s"] > 0
        total = summary["total"]
        assert (total["worlds"], total["gate_size"], total["calls"], total["ok"], total["degraded"]) == (4, size, calls, calls, 0)
        assert sum(total["degradations"]["character"].values()) == 0
        assert 1 <= total["peak_platform_sessions"] <= size
        assert total["tick_seconds"]["max"] == max(world["tick_seconds"]["max"] for world in worlds)
        # The worlds' shares of the gate's session-time, from their spans on the clock the
        # processes share: every world a tenant of weight 1, as in one process.
        assert math.isclose(sum(world["admissions_share"] for world in worlds), 1.0, abs_tol=1e-5)
        assert all(world["session_s_backlogged"] >= 0 for world in worlds)
        assert 0 < summary["fairness"]["jain_share_per_weight"] <= 1 and 0 < summary["fairness"]["makespan_min_max"] <= 1
        reports = _verifies(*(saves / f"world-{world['index']}-wacky_manor.msav" for world in worlds))
        for world, report in zip(worlds, reports, strict=True):
            assert report["world_hash"] == world["world_hash"] and report["fleet"] == {"world": world["index"], "worlds": 4}

    def test_more_processes_than_worlds_runs_one_world_each(self, tmp_path: Path, redis_url: str) -> None:
        scene = fixed_latency_scene(tmp_path, 0.01, "quick")
        argv = ["fleet", "--worlds", "2", "--processes", "3", "--scene", str(scene), "--ticks", "1", "--gate-url", redis_url, "--gate-name", f"few-{uuid.uuid4().hex[:8]}"]
        done = manor_here(*argv, cwd=tmp_path)  # the parent here: its warning and table are checked, not its process
        assert (done.returncode, done.stderr) == (0, "manor: warning: --processes 3 for 2 worlds: 2 processes, one world each\n")
        assert " ".join(done.stdout.split()).startswith("fleet — 2 worlds of Quick in 2 processes, 1 tick, one gate of 2 / platform 3")

    @pytest.mark.parametrize("processes", [1, 2])
    @pytest.mark.slow(3.5)
    def test_a_world_s_cap_holds_on_redis(self, tmp_path: Path, redis_url: str, processes: int) -> None:
        """``--scenes capped:1:1,free``, 4 worlds on a Redis gate of 3, in one process and
        in two: no capped world ever has two calls in flight, from its save's admissions
        (each save verifies), and the fleet ends with every call answered."""
        capped, free = fixed_latency_scene(tmp_path, 0.05, "capped"), fixed_latency_scene(tmp_path, 0.05, "free")
        saves = tmp_path / "saves"
        argv = [
            "fleet", "--worlds", "4", "--processes", str(processes), "--scenes", f"{capped}:1:1,{free}", "--ticks", "3", "--json",
            "--gate-size", "3", "--platform-limit", "4", "--gate-url", redis_url, "--gate-name", f"caps-{uuid.uuid4().hex[:8]}",
            "--save-dir", str(saves),
        ]  # fmt: skip
        done = manor_here(*argv, cwd=tmp_path)  # the parent here: the worlds' processes hold the caps
        assert done.returncode == 0, done.stderr
        worlds = json.loads(done.stdout)["worlds"]
        assert [world["max_sessions"] for world in worlds] == [1, None, 1, None]
        assert all(world["ok"] == world["calls"] == 18 for world in worlds)
        for world in worlds:
            save = saves / f"world-{world['index']}-{'free' if world['index'] % 2 else 'capped'}.msav"
            peak = _peak_in_flight(read_save(save).ticks)
            assert peak <= 1 if world["max_sessions"] == 1 else peak >= 1
            _verifies(save)


def _peak_in_flight(ticks: Any) -> int:
    """The most calls of a world in flight at once, from its records' admissions."""
    steps = sorted((at, step) for tick in ticks for call in tick.record.calls for at, step in ((call.admitted_at, 1), (call.finished_at, -1)))
    held = peak = 0
    for _, step in steps:
        held += step
        peak = max(peak, held)
    return peak

class TestBadInput:
    @pytest.mark.parametrize(
        ("argv", "status", "line"),
        [
            (["--processes", "2"], 1, "manor: error: --processes 2: the processes of a fleet share one gate through Redis; "
             "give its server with --gate-url, MANOR_GATE_URL or [gate] url in manor.toml"),
            (["--processes", "0"], 2, "manor fleet: error: argument --processes: 0 is not at least 1 (see 'manor fleet --help')"),
            (["--processes", "two"], 2, "manor fleet: error: argument --processes: 'two' is not a whole number (see 'manor fleet --help')"),
        ],
    )  # fmt: skip
    def test_bad_processes(self, tmp_path: Path, argv: list[str], status: int, line: str) -> None:
        done = manor_here("fleet", "--ticks", "1", *argv, cwd=tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (status, "", line + "\n")

    def test_an_unreachable_redis_is_one_line_before_any_process_or_save(self, tmp_path: Path) -> None:
        saves = tmp_path / "runs"
        process = _manor(["fleet", "--processes", "2", "--gate-url", "redis://127.0.0.1:1/0", "--save-dir", str(saves)], tmp_path)
        out, err = process.communicate(timeout=PATIENCE_S)
        assert (process.returncode, out) == (1, "")
        assert err.startswith("manor: error: gate redis://127.0.0.1:1/0 (gate manor): cannot reach Redis: ") and err.count("\n") == 1
        assert not saves.exists() and _children(process.pid) == []

    def test_the_part_command_is_not_listed_and_refuses_what_is_not_a_part(self, tmp_path: Path) -> None:
        listed = _manor(["--help"], tmp_path).communicate(timeout=PATIENCE_S)[0]
        assert "fleet-part" not in listed
        process = _manor(["fleet-part"], tmp_path, stdin=subprocess.PIPE)
        out, err = process.communicate('{"worlds": 2}\n', timeout=PATIENCE_S)
        assert (process.returncode, out) == (1, "")
        assert err == "manor: error: manor fleet-part: its stdin is not a part of a fleet (Object missing required field `sources`); 'manor fleet --processes' runs this command\n"


class TestFailures:
    @pytest.mark.slow(3)
    def test_a_process_killed_stops_the_others_and_says_which_worlds(self, tmp_path: Path, redis_url: str) -> None:
        """kill -9 of one process: the parent names its worlds and the signal in one
        line, exit 1; it stops the other, whose saves are closed; every save verifies."""
        argv, saves = _slow_fleet(tmp_path, redis_url)
        process = _fleet(argv, tmp_path)
        try:
            _wait_for_ticks(process, [saves / f"world-{index}-slow.msav" for index in range(4)], 1)
            victim, other = _children(process.pid)
            os.kill(victim, signal.SIGKILL)
            _, err = process.communicate(timeout=PATIENCE_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert process.returncode == 1
        assert re.fullmatch(rf"manor: error: fleet worlds (0, 2|1, 3) \(process {victim}\): killed by SIGKILL\n", err), err
        killed = [int(index) for index in re.findall(r"\d", err.split("fleet worlds ")[1][:4])]
        assert not _running(other)
        for index in range(4):
            assert read_save(saves / f"world-{index}-slow.msav").finished == (index not in killed)
        _verifies(*(saves / f"world-{index}-slow.msav" for index in range(4)))

    def test_a_process_that_fails_is_named_with_its_reason(self, tmp_path: Path, redis_url: str) -> None:
        argv, saves = _slow_fleet(tmp_path, redis_url, "--force")
        (saves / "world-1-slow.msav").mkdir(parents=True)
        process = _fleet(argv, tmp_path)
        _, err = _ended(process)
        assert process.returncode == 1
        assert re.fullmatch(rf"manor: error: fleet worlds 1, 3 \(process \d+\): {re.escape(str(saves))}/world-1-slow.msav: cannot create the save file: Is a directory\n", err), err


    @pytest.mark.slow(3)
    def test_processes_whose_parent_was_killed_stop_and_close_their_saves(self, tmp_path: Path, redis_url: str) -> None:
        argv, saves = _slow_fleet(tmp_path, redis_url)
        process = _fleet(argv, tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        paths = [saves / f"world-{index}-slow.msav" for index in range(4)]
        children: list[int] = []
        try:
            _wait_for_ticks(process, paths, 1)
            children = _children(process.pid)
            process.kill()
            process.wait()
            deadline = time.monotonic() + PATIENCE_S
            while any(_running(child) for child in children):
                assert time.monotonic() < deadline, "an orphaned process went on"
                time.sleep(0.05)
        finally:
            for child in children:
                if _running(child):
                    os.kill(child, signal.SIGKILL)
        assert len(children) == 2
        assert all(read_save(path).finished for path in paths)
        _verifies(*paths)


class TestSignals:
    @pytest.mark.parametrize(
        ("signum", "group", "status", "word"),
        [
            pytest.param(signal.SIGINT, True, 130, "interrupted", id="Ctrl-C to the process group"),
            pytest.param(signal.SIGINT, False, 130, "interrupted", id="SIGINT to the parent"),
            pytest.param(signal.SIGTERM, False, 143, "terminated", id="SIGTERM to the parent"),
        ],
    )  # fmt: skip
    @pytest.mark.slow(3.5)
    def test_a_signal_stops_every_process_and_closes_every_save(
        self, tmp_path: Path, redis_url: str, signum: int, group: bool, status: int, word: str
    ) -> None:
        """Signalled once every world has saved two ticks: one line naming the ticks and
        the saves, every process gone, none killed (each closed its saves and sent its
        worlds' figures), every save closed and verified."""
        argv, saves = _slow_fleet(tmp_path, redis_url, "--json")
        process = _fleet(argv, tmp_path, start_new_session=group)
        paths = [saves / f"world-{index}-slow.msav" for index in range(4)]
        try:
            _wait_for_ticks(process, paths, 2)
            children = _children(process.pid)
            if group:
                os.killpg(process.pid, signum)
            else:
                process.send_signal(signum)
            out, err = process.communicate(timeout=PATIENCE_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        ticks = sorted({len(read_save(path).ticks) for path in paths})
        done = counted(ticks[0] if len(ticks) == 1 else f"{ticks[0]}-{ticks[-1]}", "tick")
        assert process.returncode == status
        assert err == f"manor: {word} after {done} of 4 worlds; 4 saves in {saves}\n"
        assert len(children) == 2 and not any(_running(child) for child in children)
        assert all(read_save(path).finished for path in paths)
        _verifies(*paths)
        # The finished ticks' figures, every process's, as a whole fleet's report. A
        # process the parent had to kill (it outlived the STOP_GRACE_S after SIGTERM,
        # PATIENCE_S here) would not have sent them: that, not the clock of a loaded
        # machine, says none was.
        figures = json.loads(out)
        assert [world["index"] for world in figures["worlds"]] == [0, 1, 2, 3], "a process had to be killed"
        assert figures["interrupted"] == signal.Signals(signum).name
        saved = [read_save(path).ticks for path in paths]
        assert [(world["ticks"], world["calls"]) for world in figures["worlds"]] == [(len(t), sum(len(tick.record.calls) for tick in t)) for t in saved]


class TestParts:
    def test_world_i_runs_in_process_i_mod_p(self) -> None:
        assert parts(5, 2) == [[0, 2, 4], [1, 3]]
        assert parts(2, 3) == [[0], [1]]
        assert parts(1, 1) == [[0]]


@st.composite
def _reported_ticks(draw: st.DrawFn) -> tuple[list[list[tuple[float, list[tuple[float, float | None, float]]]]], list[int]]:
    """Worlds' ticks, each (its end, its calls' (queued, admitted or None, ended)) on a
    coarse grid (ties are common), and an order the worlds report them in (each world's
    in order)."""
    worlds = []
    for _ in range(draw(st.integers(1, 4))):
        ticks, now = [], 0
        for _ in range(draw(st.integers(1, 4))):
            start = now + draw(st.integers(0, 2))
            calls: list[tuple[float, float | None, float]] = []
            for _ in range(draw(st.integers(0, 4))):
                admitted = start + draw(st.integers(0, 3))
                ended = float(admitted + draw(st.integers(1, 3)))
                calls.append((float(start), float(admitted) if draw(st.booleans()) else None, ended))  # None: it timed out
            now = max([start, *(ended for _, _, ended in calls)]) + draw(st.integers(0, 1))
            ticks.append((float(now), calls))
        worlds.append(ticks)
    order = draw(st.permutations([world for world, ticks in enumerate(worlds) for _ in ticks]))
    return worlds, order


class TestPeakSessions:
    @given(_reported_ticks())
    def test_the_peak_is_the_most_calls_in_flight_at_once(self, reported: tuple[list[Any], list[int]]) -> None:
        """Counted as the ticks arrive, in any order across worlds, the peak is what
        counting every call at the end gives: a call ending at the instant another is
        admitted is not in flight with it."""
        worlds, order = reported
        peak = PeakSessions(len(worlds))
        sent = [0] * len(worlds)
        for world in order:
            ended_at, calls = worlds[world][sent[world]]
            sent[world] += 1
            peak.tick(world, ended_at, calls, last=sent[world] == len(worlds[world]))
        calls = [(admitted, ended) for ticks in worlds for _, tick_calls in ticks for _, admitted, ended in tick_calls if admitted is not None]
        expected = max((sum(admitted <= at < ended for admitted, ended in calls) for at, _ in calls), default=0)
        assert peak.finish() == expected
