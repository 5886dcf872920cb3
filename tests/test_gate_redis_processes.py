"""``manor run`` processes sharing one gate through a real redis-server, against a
``manor serve-agent`` server whose capacity is the gate's size and that answers 429
when full: the platform never sees more than the gate, a killed process gives its
permits back within the lease, a lost Redis degrades calls without losing the runs."""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
import queue
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
from agent_servers import serving, stats
from in_process import manor_here
from redis_server import SEEN_WITHIN_S, RedisServer

from manor.admission.redis_gate import gate_status
from manor.saves import read_save

CALLS_PER_TICK = 14


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "manor.toml"
    path.write_text(f'[backends.local]\nkind = "openai"\nbase_url = "{url}/v1"\nmodel = "manor"\n[backend]\ndefault = "local"\n', encoding="utf-8")
    return path


def _environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("MANOR_")}


def _manor_run(
    config: Path, redis_url: str, gate: str, size: int, seed: int, *flags: str, environment: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``manor run --json``, one world (``seed``), sharing the gate ``gate`` (with more
    ``environment`` variables)."""
    argv = [
        sys.executable, "-m", "manor", "run", "--json", "--config", str(config), "--seed", str(seed),
        "--gate-url", redis_url, "--gate-name", gate, "--gate-size", str(size), "--platform-limit", "0", *flags,
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=config.parent, env={**_environment(), **(environment or {})})


async def _finished(process: subprocess.Popen[bytes], timeout: float = 120.0) -> tuple[dict[str, Any], str]:
    """The run's JSON summary and its stderr, once it has ended well."""
    stdout, stderr = await trio.to_thread.run_sync(lambda: process.communicate(timeout=timeout))
    assert process.returncode == 0, stderr.decode()
    return json.loads(stdout), stderr.decode()


def _degradations(summary: dict[str, Any]) -> dict[str, int]:
    """A run's summary's degraded calls by caller kind and reason, the counts above 0."""
    return {f"{kind}.{reason}": count for kind, reasons in summary["degradations"].items() for reason, count in reasons.items() if count}


async def _holds_permits(redis_url: str, gate: str, pid: int) -> bool:
    status = await gate_status(redis_url, gate)
    return status is not None and any(holder.pid == str(pid) and holder.holding for holder in status.holders)


async def _status(redis_url: str, gate: str) -> Any:
    status = await gate_status(redis_url, gate)
    assert status is not None
    return status


class TestProcessesShareOneGate:
    @pytest.mark.trio
    @pytest.mark.slow(4)
    async def test_four_processes_never_go_past_the_server_capacity(self, tmp_path: Path, redis_url: str) -> None:
        """Four worlds in four processes, a gate of 3, a server of capacity 3 that
        refuses the fourth run: no refusal, a peak of at most 3, every call answered."""
        gate, size, ticks = f"fleet-{uuid.uuid4().hex[:8]}", 3, 2
        async with serving(capacity=size, reject_when_full=True, latency=0.05) as (url, _):
            config = _config(tmp_path, url)
            processes = [_manor_run(config, redis_url, gate, size, seed, "--ticks", str(ticks)) for seed in range(1, 5)]
            summaries = [(await _finished(process))[0] for process in processes]
            server = await stats(url)
        calls = 4 * ticks * CALLS_PER_TICK
        assert server["rejected"] == 0
        assert server["peak_running"] <= size
        assert server["submitted"] == server["completed"] == calls
        assert all(summary["ok"] == summary["calls"] == ticks * CALLS_PER_TICK for summary in summaries)
        assert sorted(summary["seed"] for summary in summaries) == [1, 2, 3, 4]  # a world each
        status = await _status(redis_url, gate)
        assert status.holders == () and status.statistics.in_flight == 0
        assert status.statistics.peak_in_flight == size and status.statistics.admitted == calls

    @pytest.mark.trio
    @pytest.mark.slow(3)
    async def test_a_fleet_shares_the_gate_with_other_processes(self, tmp_path: Path, redis_url: str) -> None:
        """``manor fleet`` of two worlds and a ``manor run`` on one gate of 3, a server of
        capacity 3 that refuses the fourth run: every call of the three worlds answered,
        and the fleet is one process at the gate."""
        gate, size, ticks = f"fleet-{uuid.uuid4().hex[:8]}", 3, 2
        async with serving(capacity=size, reject_when_full=True, latency=0.05) as (url, _):
            config = _config(tmp_path, url)
            argv = [
                sys.executable, "-m", "manor", "fleet", "--worlds", "2", "--json", "--config", str(config), "--seed", "1",
                "--gate-url", redis_url, "--gate-name", gate, "--gate-size", str(size), "--platform-limit", "0", "--ticks", str(ticks),
            ]  # fmt: skip
            fleet = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=_environment())
            single = _manor_run(config, redis_url, gate, size, 3, "--ticks", str(ticks))
            with trio.fail_after(60):
                while (status := await gate_status(redis_url, gate)) is None or len(status.holders) < 2:
                    await trio.sleep(0.02)
            assert {holder.world for holder in status.holders} == {"fleet of 2 worlds of The Wacky Manor", "The Wacky Manor seed 3"}
            fleet_summary, _ = await _finished(fleet)
            single_summary, _ = await _finished(single)
            server = await stats(url)
        assert server["rejected"] == 0 and server["peak_running"] <= size
        assert [world["seed"] for world in fleet_summary["worlds"]] == [1, 2]
        assert all(world["ok"] == world["calls"] == ticks * CALLS_PER_TICK for world in [*fleet_summary["worlds"], single_summary])
        assert fleet_summary["total"]["gate_size"] == size
        status = await _status(redis_url, gate)
        assert status.holders == () and status.statistics.admitted == 3 * ticks * CALLS_PER_TICK

    @pytest.mark.trio
    @pytest.mark.slow(3.5)
    async def test_two_invocations_are_two_tenants_without_a_flag(self, tmp_path: Path, redis_url: str) -> None:
        """Two ``manor run`` on one gate: each is a tenant of its own (its host and
        process id) with no flag; ``--tenant`` names one, whose weight and cap come from
        its settings, and the cap holds at the server."""
        gate, size, ticks = f"tenants-{uuid.uuid4().hex[:8]}", 3, 2
        async with serving(capacity=size, reject_when_full=True, latency=0.05) as (url, _):
            config = _config(tmp_path, url)
            plain = _manor_run(config, redis_url, gate, size, 1, "--ticks", str(ticks))
            guests = _manor_run(
                config, redis_url, gate, size, 2, "--ticks", str(ticks), "--tenant", "guests",
                environment={"MANOR_GATE_WEIGHT": "2", "MANOR_GATE_MAX_SESSIONS": "1"},
            )  # fmt: skip
            seen: dict[str, Any] = {}
            guests_held = 0
            while plain.poll() is None or guests.poll() is None:
                status = await gate_status(redis_url, gate)
                for tenant in status.tenants if status is not None else ():
                    seen[tenant.name] = tenant
                    if tenant.name == "guests":
                        guests_held = max(guests_held, tenant.holding)
                await trio.sleep(0.01)
            await _finished(plain)
            await _finished(guests)
            server = await stats(url)
        assert server["rejected"] == 0 and server["peak_running"] <= size
        host = os.uname().nodename
        assert set(seen) == {f"{host}:{plain.pid}", "guests"}
        assert (seen["guests"].weight, seen["guests"].max_sessions) == (2.0, 1)
        assert (seen[f"{host}:{plain.pid}"].weight, seen[f"{host}:{plain.pid}"].max_sessions) == (1.0, None)
        assert guests_held <= 1

    @pytest.mark.trio
    @pytest.mark.slow(10)
    async def test_a_process_killed_holding_permits_gives_them_back_within_the_lease(self, tmp_path: Path, redis_url: str) -> None:
        """kill -9 of a process while its calls hold the gate: the others carry on (their
        calls wait at most about a lease), and no permit is left at the server."""
        gate, size = f"kill-{uuid.uuid4().hex[:8]}", 2
        lease = tmp_path / "lease.toml"
        async with serving(capacity=size, reject_when_full=True, latency=0.2) as (url, _):
            config = _config(tmp_path, url)
            # Short, so that the test is; long enough that a loaded machine's late
            # renewal (every lease_s / 3) does not lose a living process's permit, which
            # the server would then grant again beyond the platform's capacity.
            lease.write_text(config.read_text() + "[gate]\nlease_s = 2.0\n", encoding="utf-8")
            victim = _manor_run(lease, redis_url, gate, size, 1, "--ticks", "50")
            with trio.fail_after(60):
                while not await _holds_permits(redis_url, gate, victim.pid):
                    await trio.sleep(0.02)
            others = [_manor_run(lease, redis_url, gate, size, seed, "--ticks", "2") for seed in (2, 3)]
            await trio.sleep(0.3)
            victim.send_signal(signal.SIGKILL)
            victim.communicate()
            summaries = [(await _finished(process))[0] for process in others]
            server = await stats(url)
        degraded = [(summary["calls"], summary["ok"], _degradations(summary), summary["first_error"]) for summary in summaries]
        assert all(summary["ok"] == summary["calls"] == 2 * CALLS_PER_TICK for summary in summaries), degraded
        assert server["rejected"] == 0 and server["peak_running"] <= size
        status = await _status(redis_url, gate)
        assert status.holders == () and status.statistics.in_flight == 0 and status.statistics.waiting == 0
        assert status.statistics.peak_in_flight <= size

    @pytest.mark.trio
    async def test_a_process_stopped_by_ctrl_c_gives_its_permits_back_at_once(self, tmp_path: Path, redis_url: str) -> None:
        gate = f"stop-{uuid.uuid4().hex[:8]}"
        async with serving(capacity=2, latency=0.5) as (url, _):
            process = _manor_run(_config(tmp_path, url), redis_url, gate, 2, 1, "--ticks", "50")
            with trio.fail_after(60):
                while not await _holds_permits(redis_url, gate, process.pid):
                    await trio.sleep(0.02)
            process.send_signal(signal.SIGINT)
            _, stderr = await trio.to_thread.run_sync(lambda: process.communicate(timeout=60))
            status = await _status(redis_url, gate)  # at once: no lease had to expire
        assert process.returncode == 130 and stderr.decode().startswith("manor: interrupted")
        assert status.holders == () and status.statistics.in_flight == 0

    @pytest.mark.slow(13)
    def test_redis_lost_mid_run_degrades_calls_the_runs_wait_for_it_and_their_saves_verify(self, tmp_path: Path, redis_server: RedisServer) -> None:
        gate, size, ticks = "lost", 3, 8
        saves = [tmp_path / f"world{seed}.msav" for seed in (1, 2)]

        async def lost() -> tuple[list[tuple[dict[str, Any], str]], dict[str, Any]]:
            async with serving(capacity=size, reject_when_full=True, latency=0.05) as (url, _):
                config = _config(tmp_path, url)
                processes = [
                    _manor_run(config, redis_server.url, gate, size, seed, "--ticks", str(ticks), "--save", str(save))
                    for seed, save in zip((1, 2), saves, strict=True)
                ]
                # Both processes on the gate (a process that finds no Redis at its start
                # ends in one line, which is not what this test is about), calls admitted.
                with trio.fail_after(60):
                    while (
                        status := await gate_status(redis_server.url, gate)
                    ) is None or len(status.holders) < 2 or status.statistics.admitted < 2 * CALLS_PER_TICK:
                        await trio.sleep(0.02)
                redis_server.kill()
                # Down long enough for a tick of each to find no gate; they wait for it
                # (GATE_WAIT_S), rather than burn their other ticks, and go on once it is back.
                await trio.sleep(1.5)
                redis_server.start()
                return [await _finished(process) for process in processes], await stats(url)

        # The runs under trio (the server, the gate's status); their saves replayed after,
        # by ``manor replay`` in this process, which runs trio itself.
        results, server = trio.run(lost)
        assert server["rejected"] == 0
        for (summary, stderr), save in zip(results, saves, strict=True):
            lost_calls = sum(reasons["gate_unavailable"] for reasons in summary["degradations"].values())
            assert lost_calls > 0 and summary["ticks"] == ticks
            assert summary["ok"] + lost_calls == summary["calls"] == ticks * CALLS_PER_TICK
            assert any(row["reason"] == "gate_unavailable" and "Redis unreachable" in row["message"] for row in summary["errors"])
            recorded = read_save(save)  # every value checked as it is read, gate_unavailable included
            assert len(recorded.ticks) == ticks and recorded.finished
            lost_recorded = sum(call.reason == "gate_unavailable" for frame in recorded.ticks for call in frame.record.calls)
            assert lost_recorded == lost_calls
            assert "saved" in stderr and "waiting up to 120s for the gate before the next tick" in stderr
            # The calls that found no gate find none again in the replay, when they did.
            replayed = manor_here("replay", str(save), "--verify")
            assert replayed.returncode == 0, replayed.stdout + replayed.stderr


class TestCommandLine:
    @pytest.mark.parametrize(("command", "save_flag", "save_name"), [("run", "--save", "x.msav"), ("fleet", "--save-dir", "runs")])
    def test_an_unreachable_redis_at_start_is_one_line_and_no_save(self, tmp_path: Path, command: str, save_flag: str, save_name: str) -> None:
        save = tmp_path / save_name
        result = manor_here(command, "--gate-url", "redis://127.0.0.1:1/0", save_flag, str(save), cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr.splitlines() == [result.stderr.strip()]
        assert result.stderr.startswith("manor: error: gate redis://127.0.0.1:1/0 (gate manor): cannot reach Redis: ")
        assert not save.exists()

    def test_a_shared_gate_needs_the_real_clock(self, tmp_path: Path) -> None:
        result = manor_here("run", "--gate-url", "redis://127.0.0.1:1/0", "--clock", "virtual", cwd=tmp_path)
        assert result.returncode == 1
        assert "run.clock = virtual cannot time a gate shared through Redis" in result.stderr

    def test_the_password_in_the_url_is_never_shown(self, tmp_path: Path) -> None:
        result = manor_here("config", "--json", "--gate-url", "redis://:sesame99@127.0.0.1:1/0", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        rows = json.loads(result.stdout)
        assert rows["gate.url"] == {"value": "redis://:***@127.0.0.1:1/0", "source": "command line"}
        assert rows["run.clock"]["source"] == "derived: the gate is shared (gate.url)"
        assert "sesame99" not in result.stdout

    def test_gate_status_and_resize(self, redis_url: str) -> None:
        """``manor gate`` run here (it runs trio itself) while a trio run in a thread of
        this process holds a permit: the status shows the holder, a resize reaches it."""
        from manor.admission.redis_gate import RedisGate

        name = f"cli-{uuid.uuid4().hex[:8]}"
        handed: queue.Queue[tuple[trio.lowlevel.TrioToken, RedisGate, Any, trio.Event]] = queue.Queue()

        async def hold() -> None:
            async with RedisGate(redis_url, name, size=2, world="held here").connected() as gate:
                done = trio.Event()
                handed.put((trio.lowlevel.current_trio_token(), gate, await gate.acquire(timeout=10), done))
                await done.wait()

        async def resized(gate: RedisGate) -> None:
            with trio.fail_after(SEEN_WITHIN_S):
                while gate.size != 4:
                    await trio.sleep(0.01)

        def manor(*args: str) -> subprocess.CompletedProcess[str]:
            return manor_here("gate", *args, "--gate-url", redis_url, "--gate-name", name)

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            holder = pool.submit(trio.run, hold)
            try:
                token, gate, permit, done = handed.get(timeout=60)
            except queue.Empty:
                holder.result(timeout=0)  # its error, if it failed
                raise
            try:
                status = json.loads(manor("status", "--json").stdout)
                assert status["statistics"]["size"] == 2 and status["statistics"]["in_flight"] == 1
                assert (status["rate"], status["burst"]) == (0.0, 1)
                assert [(holder["world"], holder["holding"], holder["pid"]) for holder in status["holders"]] == [("held here", 1, str(os.getpid()))]
                resize = manor("resize", "4")
                assert resize.returncode == 0 and resize.stdout.strip().endswith("size 2 -> 4")
                trio.from_thread.run(resized, gate, trio_token=token)
                table = manor("status")
                assert "held here" in table.stdout and table.returncode == 0
                assert re.search(r"rate / burst\s*│\s*none", table.stdout), table.stdout
                trio.from_thread.run_sync(permit.release, trio_token=token)
            finally:
                trio.from_thread.run_sync(done.set, trio_token=token)
            holder.result()
        missing = manor_here("gate", "status", "--gate-url", redis_url, "--gate-name", "never-used")
        assert missing.returncode == 1 and missing.stderr.startswith("manor: error: gate never-used at ")


class TestBenchmark:
    @pytest.mark.slow(27)
    def test_the_suite_measures_admissions_and_makespans_across_processes(self, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        from manor.bench import redis_gate
        from manor.bench.report import evaluate_targets
        from manor.bench.suite import BenchContext
        from manor.config import standard_sources
        from manor.config.layering import flags_source

        monkeypatch.setattr(redis_gate, "PROCESSES", (1, 2))
        monkeypatch.setattr(redis_gate, "ADMISSION_S_QUICK", 0.2)
        # Every part runs on the real clock, the oracle's calls (18 s) most of all: the
        # scene's latencies (and the mixed fleets' gate timeout and claims) scaled by
        # 0.02, not 0.05. Every world still waits at the gate far less than its timeout.
        monkeypatch.setattr(redis_gate, "LATENCY_SCALE", 0.02)
        monkeypatch.setattr(redis_gate, "TICKS_QUICK", 1)
        monkeypatch.setattr(redis_gate, "MIXED_TICKS_QUICK", 1)
        sources = standard_sources(flags=flags_source({"gate.url": redis_url}, {}), environ={})
        figures = redis_gate.run(BenchContext(sources=sources, quick=True))
        assert figures["available"] and figures["url"] == redis_url
        assert [point["processes"] for point in figures["admission"]] == [1, 2]
        for point in figures["admission"]:
            assert point["admitted"] > 0 and point["latency_after_release_ms"]["samples"] > 0
            assert 0 < point["fairness"] <= 1
        for point in figures["makespan"]:
            assert point["ratio"] > 0 and point["degraded"] == 0
        assert figures["ratio"] == min(point["ratio"] for point in figures["makespan"])
        fleet = figures["fleet"]  # manor fleet --processes, against the same fleet in one process
        assert (fleet["worlds"], fleet["processes"], fleet["degraded"]) == (4, 2, 0)
        assert fleet["ratio"] > 0 and 1 <= fleet["peak_platform_sessions"] <= figures["gate_size"]
        assert 0 < fleet["fairness"]["jain_share_per_weight"] <= 1 and 0 < fleet["in_process_fairness"]["jain_share_per_weight"] <= 1
        mixed = figures["mixed"]  # the mixed fleets in process, in one process on Redis, in two
        assert [row["fleet"] for row in mixed["fleets"]] == [name for name, _ in redis_gate.MIXED]
        for row in mixed["fleets"]:
            assert row["in_process"]["manor_vs_twin_mean"] > 0 and row["in_process"]["manor_degraded"] == 0
            for way in ("redis_one_process", "redis_two_processes", "redis_two_runs"):
                assert row[way]["manor_vs_twin_mean_vs_in_process"] > 0
            for way in redis_gate.MIXED_WAYS:  # each world's share of the gate, every way
                shares = row[way]["shares"]
                assert len(shares) == 2 and math.isclose(sum(world["admissions_share"] for world in shares), 1.0, abs_tol=1e-5)
        targets = evaluate_targets({"redis-gate": figures})
        assert sum("redis-gate.mixed" in target["target"] for target in targets) == 2 * 3 * 2  # crowd, oracle; three ways; mean, p95

    def test_without_redis_the_suite_says_so(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from manor.bench import redis_gate
        from manor.bench.report import evaluate_targets
        from manor.bench.suite import BenchContext
        from manor.config import standard_sources

        monkeypatch.setattr(redis_gate.shutil, "which", lambda name: None)
        figures = redis_gate.run(BenchContext(sources=standard_sources(environ={}), quick=True))
        assert figures == {"available": False, "note": "no Redis reachable: set --gate-url (or MANOR_GATE_URL), or install redis-server"}
        (target,) = evaluate_targets({"redis-gate": figures})
        assert target["met"] is None and "no Redis reachable" in target["note"]
