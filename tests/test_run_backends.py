"""``manor run`` of the default scene on real backends at ``manor serve-agent``: the gate
keeps the server's capacity from being exceeded, a wider gate is rejected as flow
control, and a cast can mix backends."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio
import trio.testing
from agent_servers import serving, stats
from in_process import manor_here

from manor.calls import Done
from manor.config import Config, standard_sources
from manor.content import Scene
from manor.providers.routing import RoutingProvider
from manor.run.engine import build_engine, configure
from manor.saves import read_save
from manor.serve import AgentHost, RunSpec
from manor.serve.host import HostFull

#: Calls a tick of the Wacky Manor makes: 10 characters, narrator, summariser, 2 beats.
CALLS_PER_TICK = 14
TICKS = 3


def _openai(name: str, url: str, model: str = "manor") -> str:
    return f'[backends.{name}]\nkind = "openai"\nbase_url = "{url}/v1"\nmodel = "{model}"\n'


async def _manor_run(tmp_path: Path, config: str, *flags: str) -> dict:
    """``manor run --json`` as a real process, with ``config`` as its manor.toml."""
    path = tmp_path / "manor.toml"
    path.write_text(config, encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if not name.startswith("MANOR_")}
    argv = [sys.executable, "-m", "manor", "run", "--json", "--config", str(path), "--ticks", str(TICKS), *flags]
    result = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def _rejected(summary: dict) -> int:
    return sum(reasons["platform_rejected"] for reasons in summary["degradations"].values())


class TestGateAgainstServeAgent:
    @pytest.mark.trio
    async def test_a_gate_the_size_of_the_capacity_is_never_rejected(self, tmp_path: Path) -> None:
        """Capacity 3, answering 429 when full; --platform-limit 4 makes the gate 3: no 429, ever."""
        async with serving(capacity=3, reject_when_full=True, latency=0.05) as (url, _):
            config = _openai("local", url) + '[backend]\ndefault = "local"\n'
            summary = await _manor_run(tmp_path, config, "--clock", "real", "--platform-limit", "4")
            server = await stats(url)
        assert (summary["gate_size"], summary["platform_limit"]) == (3, 4)
        assert summary["calls"] == summary["ok"] == TICKS * CALLS_PER_TICK
        assert summary["degraded"] == 0 and summary["platform_rejections"]["total"] == 0
        assert server["rejected"] == 0 and server["submitted"] == server["completed"] == TICKS * CALLS_PER_TICK
        assert server["peak_running"] == 3  # the capacity used to the full, never beyond

    def test_a_gate_wider_than_the_capacity_is_rejected_as_flow_control(self, tmp_path: Path) -> None:
        """Gate 5 over capacity 3: every 429 the server sends is one platform_rejected
        call, counted as the server's, its message kept; the save replays exactly."""
        save = tmp_path / "wide.msav"

        async def served() -> tuple[dict, dict]:
            async with serving(capacity=3, reject_when_full=True, latency=0.05) as (url, _):
                config = _openai("local", url) + '[backend]\ndefault = "local"\n'
                # Platform unlimited, so Manor's own limiter rejects nothing: every rejection is the server's.
                summary = await _manor_run(tmp_path, config, "--clock", "real", "--platform-limit", "0", "--gate-size", "5", "--save", str(save))
                return summary, await stats(url)

        # The run against the server under trio; its save replayed after, by 'manor
        # replay' in this process (which runs trio itself).
        summary, server = trio.run(served)
        assert summary["gate_size"] == 5
        assert server["rejected"] > 0
        assert _rejected(summary) == summary["degraded"] == server["rejected"]
        assert summary["platform_rejections"] == {"total": server["rejected"], "by_limiter": 0, "by_server": server["rejected"], "retried": 0}
        assert summary["ok"] == server["completed"] and server["peak_running"] == 3
        messages = {row["message"] for row in summary["errors"]}
        assert {row["reason"] for row in summary["errors"]} == {"platform_rejected"}
        assert messages and all("429" in message for message in messages)
        assert sum(row["count"] for row in summary["errors"]) == server["rejected"]
        # The server's refusals reached the backend: a replay gives them back as refusals.
        refusers = {call.refused_by for frame in read_save(save).ticks for call in frame.record.calls if call.reason == "platform_rejected"}
        assert refusers == {"server"}
        verified = manor_here("replay", str(save), "--verify", "--json")
        assert verified.returncode == 0 and json.loads(verified.stdout)["verified"] is True, verified.stderr
        what_if = manor_here("replay", str(save), "--gate-size", "3", "--json")
        replayed = json.loads(what_if.stdout)
        assert replayed["recorded"]["platform_rejections"] == summary["platform_rejections"]
        assert replayed["platform_rejections"]["by_server"] > 0  # not turned into answers


class TestMixedCast:
    @pytest.mark.trio
    async def test_narrator_and_summariser_on_other_backends_than_the_characters(self, tmp_path: Path) -> None:
        """Characters on one server, the narrator on a bigger one, the summariser a command."""
        summarise = [sys.executable, "-c", "import sys; sys.stdout.write(f'{len(sys.stdin.read().split())} words')"]
        async with serving(capacity=3, latency=0.05) as (small, _), serving(agents=("storyteller",), capacity=1, latency=0.05) as (big, _):
            config = (
                _openai("small", small)
                + _openai("big", big, model="storyteller")
                + f'[backends.script]\nkind = "command"\nargv = {json.dumps(summarise)}\n'
                + '[backend]\ndefault = "small"\n[agent_backends]\nnarrator = "big"\nsummariser = "script"\n'
            )
            summary = await _manor_run(tmp_path, config)  # the clock is derived: real
            small_stats, big_stats = await stats(small), await stats(big)
        assert summary["ok"] == TICKS * CALLS_PER_TICK and summary["degraded"] == 0
        assert big_stats["completed"] == TICKS  # one narration a tick
        assert small_stats["completed"] == TICKS * (CALLS_PER_TICK - 2)  # characters and beats


def _mixed_cast(tmp_path: Path, url: str, remote: str = "", on_remote: tuple[str, ...] = ("narrator",)) -> tuple[Config, Scene]:
    """Settings for a cast on openai at ``url``, but ``on_remote`` on an agno table there
    (``remote``: more lines of that table)."""
    path = tmp_path / "manor.toml"
    path.write_text(
        _openai("local", url)
        + f'[backends.remote]\nkind = "agno"\nbase_url = "{url}"\nagent_id = "agent"\n{remote}\n'
        + '[backend]\ndefault = "local"\n[agent_backends]\n'
        + "".join(f'{agent} = "remote"\n' for agent in on_remote),
        encoding="utf-8",
    )
    return configure(standard_sources(config_path=path, environ={}))


def test_http_backends_share_one_client_each_closed_when_the_run_ends(tmp_path: Path) -> None:
    """One client per HTTP backend for the whole run (openai and agno), none left open after."""
    seen = {}

    async def run() -> RoutingProvider:
        async with serving(capacity=3, latency=0.01) as (url, _):
            engine = build_engine(*_mixed_cast(tmp_path, url))
            await engine.loop.run(2)
            router = engine.loop.gated.backend
            assert isinstance(router, RoutingProvider)
            seen["during"] = router.statistics()
            return router

    router = trio.run(run)
    assert seen["during"].open_clients == 2
    assert seen["during"].calls == {"local": 2 * (CALLS_PER_TICK - 1), "remote": 2}
    assert router.statistics().open_clients == 0


def _sessions(tmp_path: Path, remote: str, *run_ids: str | None) -> list[tuple[str, dict[str, set[str]]]]:
    """Run two ticks per run id (None: the engine's own), narrator and summariser on the
    agno table ``remote`` describes: each run's id and agent -> the sessions it sent."""
    runs = []

    async def run() -> None:
        async with serving(capacity=3, latency=0.01) as (url, host):
            config, scene = _mixed_cast(tmp_path, url, remote, on_remote=("narrator", "summariser"))
            for run_id in run_ids:
                seen = {record.run_id for record in host.records()}
                engine = build_engine(config, scene, run_id=run_id)
                await engine.loop.run(2)
                sessions: dict[str, set[str]] = {}
                for record in host.records():
                    if record.run_id not in seen and record.session_id:  # the openai calls send none
                        agent = record.session_id.rpartition("-")[2]
                        sessions.setdefault(agent, set()).add(record.session_id)
                runs.append((engine.run_id, sessions))

    trio.run(run)
    return runs


def test_agno_sessions_are_one_per_agent_per_run(tmp_path: Path) -> None:
    """Two runs of one config: each agent keeps one session in a run, a new one next run."""
    (first, one), (second, two) = _sessions(tmp_path, "", None, None)
    assert first != second and len(first) == 32 and int(first, 16) >= 0
    assert one == {"narrator": {f"manor-{first}-narrator"}, "summariser": {f"manor-{first}-summariser"}}
    assert two == {"narrator": {f"manor-{second}-narrator"}, "summariser": {f"manor-{second}-summariser"}}


def test_agno_session_id_template_and_a_given_run_id(tmp_path: Path) -> None:
    ((run_id, sessions),) = _sessions(tmp_path, 'session_id = "{{story}}-{run}-{agent}"', "cafe01")
    assert run_id == "cafe01"
    assert sessions == {"narrator": {"{story}-cafe01-narrator"}, "summariser": {"{story}-cafe01-summariser"}}


class TestServeAgentHost:
    """What serve-agent must do for a gate of its capacity to be enough."""

    @pytest.mark.trio
    async def test_runs_arriving_together_fill_the_capacity_before_any_is_rejected(self, autojump_clock: trio.testing.MockClock) -> None:
        """Three runs in one instant all get a slot (one not yet dispatched still holds its place); a fourth is refused."""
        host = AgentHost(agents=("agent",), capacity=3, reject_when_full=True, latency=1.0)
        outcomes: dict[str, str] = {}

        async def client(name: str) -> None:
            try:
                async for _ in host.run(RunSpec(name, "agent", name)):
                    pass
                outcomes[name] = "answered"
            except HostFull:
                outcomes[name] = "rejected"

        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            async with trio.open_nursery() as clients:
                for name in "abcd":
                    clients.start_soon(client, name)
            nursery.cancel_scope.cancel()
        assert sorted(outcomes.values()) == ["answered"] * 3 + ["rejected"]
        assert host.statistics().peak_running == 3

    @pytest.mark.trio
    async def test_an_answer_quotes_a_long_message_only_in_part(self, autojump_clock: trio.testing.MockClock) -> None:
        """Otherwise a world's prompts, which quote last tick's answers, would grow every tick."""
        host = AgentHost(agents=("agent",), latency=0.0)
        message = " ".join(f"w{i}" for i in range(100))
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            events = [event async for event in host.run(RunSpec("r", "agent", message))]
            nursery.cancel_scope.cancel()
        assert isinstance(events[-1], Done)
        assert events[-1].text == "agent heard: " + " ".join(f"w{i}" for i in range(24)) + " …"
