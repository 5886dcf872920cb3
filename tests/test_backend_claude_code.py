"""The claude-code backend against a stand-in program these tests write: it prints the
stream-json events Claude Code documents, and the failures it reports (a rate limit, a
usage cap, not logged in), chosen by words in the prompt."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import trio
from in_process import manor_here

from manor.calls import Done, Request, Started, TextDelta, Usage
from manor.errors import AccessRefused, CallTimeout, ProviderError, SessionLimitError
from manor.layers import Stack, TimeoutLayer
from manor.providers.claude_code import ClaudeCodeProvider, classify_failure
from manor.worlds.manor import CallerKind

STAND_IN = textwrap.dedent(
    """
    import json, sys, time
    args = sys.argv[1:]
    prompt = args[args.index("-p") + 1] if "-p" in args else sys.stdin.read()
    resumed = args[args.index("--resume") + 1] if "--resume" in args else None
    log = args[args.index("--log") + 1] if "--log" in args else None
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(args) + "\\n")
    def emit(value):
        print(json.dumps(value), flush=True)
    session = resumed or "sess-" + str(abs(hash(prompt)) % 1000)
    emit({"type": "system", "subtype": "init", "session_id": session, "model": "claude-test", "tools": []})
    if "@hang" in prompt:
        time.sleep(60)
    if "@not-json" in prompt:
        print("a warning that is not JSON", flush=True)
    if "@rate-limit" in prompt:
        emit({"type": "result", "subtype": "success", "is_error": True, "duration_ms": 10, "num_turns": 1,
              "result": "API Error: Request rejected (429) · Server is temporarily limiting requests", "session_id": session,
              "total_cost_usd": 0, "usage": {"input_tokens": 0, "output_tokens": 0}})
        sys.exit(1)
    if "@usage-cap" in prompt:
        emit({"type": "result", "subtype": "success", "is_error": True, "result": "Claude AI usage limit reached|2000000000",
              "session_id": session, "total_cost_usd": 0, "usage": {}})
        sys.exit(1)
    if "@logged-out" in prompt:  # what claude-code 2.1.197 prints, not logged in
        emit({"type": "assistant", "message": {"model": "<synthetic>", "role": "assistant", "type": "message",
              "content": [{"type": "text", "text": "Not logged in · Please run /login"}]},
              "session_id": session, "error": "authentication_failed"})
        emit({"type": "result", "subtype": "success", "is_error": True, "api_error_status": None, "num_turns": 1,
              "result": "Not logged in · Please run /login", "session_id": session, "total_cost_usd": 0, "usage": {}})
        sys.exit(1)
    if "@bad-key" in prompt:
        print("Invalid API key", file=sys.stderr)
        sys.exit(1)
    if "@max-turns" in prompt:
        emit({"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 3, "session_id": session, "usage": {}})
        sys.exit(0)
    emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "I polish "}],
          "usage": {"input_tokens": 4, "output_tokens": 2}}, "session_id": session})
    emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}},
          {"type": "text", "text": "the teapot."}]}, "session_id": session})
    emit({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}})
    emit({"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1200, "num_turns": 1,
          "result": "I polish the teapot.", "session_id": session, "total_cost_usd": 0.0123,
          "usage": {"input_tokens": 4, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 1, "output_tokens": 5}})
    """
)


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    path = tmp_path / "claude_stand_in.py"
    path.write_text(STAND_IN)
    return path


def _provider(stand_in: Path, *extra: str, **options: object) -> ClaudeCodeProvider:
    argv = [sys.executable, str(stand_in), "-p", "{prompt}", "--output-format", "stream-json", "--verbose", *extra]
    return ClaudeCodeProvider(argv, **options)  # type: ignore[arg-type]


async def _events(provider: ClaudeCodeProvider, prompt: str, agent: str = "butler") -> list:
    request = Request(caller=CallerKind.CHARACTER, agent=agent, prompt=prompt)
    return [event async for event in provider.invoke(request)]


@pytest.mark.trio
async def test_text_from_assistant_messages_and_tokens_from_the_result(stand_in: Path) -> None:
    events = await _events(_provider(stand_in), "polish something")
    assert isinstance(events[0], Started)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["I polish ", "the teapot."]
    assert events[-1] == Done(text="I polish the teapot.", usage=Usage(input_tokens=15, output_tokens=5), cost=0.0123)


@pytest.mark.trio
async def test_a_line_that_is_not_an_event_is_skipped(stand_in: Path) -> None:
    events = await _events(_provider(stand_in), "@not-json")
    assert events[-1].text == "I polish the teapot."


@pytest.mark.trio
async def test_the_prompt_goes_on_stdin_without_a_prompt_argument(stand_in: Path) -> None:
    provider = ClaudeCodeProvider([sys.executable, str(stand_in), "--output-format", "stream-json"])
    with pytest.raises(SessionLimitError, match="usage limit"):  # the stand-in sees the word only on stdin
        await _events(provider, "@usage-cap on stdin")


@pytest.mark.trio
async def test_a_rate_limit_is_refused_by_the_server(stand_in: Path) -> None:
    with pytest.raises(SessionLimitError, match="temporarily limiting requests") as info:
        await _events(_provider(stand_in), "@rate-limit")
    assert (info.value.refused_by, info.value.final, info.value.reason) == ("server", False, "platform_rejected")


@pytest.mark.trio
async def test_a_usage_cap_is_final_with_its_reset(stand_in: Path) -> None:
    with pytest.raises(SessionLimitError, match="usage limit reached") as info:
        await _events(_provider(stand_in), "@usage-cap")
    assert info.value.final and info.value.retry_after is not None and info.value.retry_after > 0


@pytest.mark.trio
async def test_logged_out_is_final_access_refused(stand_in: Path) -> None:
    with pytest.raises(AccessRefused, match="Not logged in · Please run /login") as info:
        await _events(_provider(stand_in), "@logged-out")
    assert info.value.final and "exited with status 1" in str(info.value)
    with pytest.raises(AccessRefused, match="Invalid API key"):
        await _events(_provider(stand_in), "@bad-key")


@pytest.mark.trio
async def test_an_error_result_is_a_provider_error_naming_its_subtype(stand_in: Path) -> None:
    with pytest.raises(ProviderError, match="error_max_turns") as info:
        await _events(_provider(stand_in), "@max-turns")
    assert not info.value.final


@pytest.mark.trio
async def test_a_missing_program_is_a_final_provider_error(tmp_path: Path) -> None:
    """Not installed, or not on PATH: no retry will help, so the run stops."""
    with pytest.raises(ProviderError, match="cannot run .*No such file or directory") as info:
        await _events(ClaudeCodeProvider([str(tmp_path / "no-claude"), "-p", "{prompt}"]), "hi")
    assert info.value.final


@pytest.mark.trio
async def test_model_is_passed_unless_argv_names_it(stand_in: Path, tmp_path: Path) -> None:
    log = tmp_path / "args.log"
    await _events(_provider(stand_in, "--log", str(log), model="claude-opus"), "hi")
    await _events(_provider(stand_in, "--log", str(log), "--model", "{model}", model="claude-opus"), "hi")
    first, second = (line for line in log.read_text().splitlines())
    assert first.endswith('"--model", "claude-opus"]') and second.count("--model") == 1


@pytest.mark.trio
async def test_resume_keeps_one_session_per_agent(stand_in: Path, tmp_path: Path) -> None:
    """The second call of an agent resumes the session its first reported; another
    agent's first call starts its own; without resume nothing is passed."""
    log = tmp_path / "args.log"
    provider = _provider(stand_in, "--log", str(log), resume=True)
    await _events(provider, "first", agent="butler")
    session = provider.session("butler")
    assert session is not None and session.startswith("sess-")
    await _events(provider, "second", agent="butler")
    await _events(provider, "third", agent="countess")
    lines = log.read_text().splitlines()
    assert "--resume" not in lines[0] and f'"--resume", "{session}"' in lines[1] and "--resume" not in lines[2]
    assert provider.session("butler") == session
    plain = _provider(stand_in, "--log", str(log))
    await _events(plain, "once")
    await _events(plain, "twice")
    assert all("--resume" not in line for line in log.read_text().splitlines()[3:])


@pytest.mark.trio
async def test_a_hang_is_cut_by_the_timeout_and_the_process_reaped(stand_in: Path) -> None:
    provider = Stack(_provider(stand_in, kill_after=0.5), [TimeoutLayer(seconds=1.0)])
    with trio.fail_after(10):
        with pytest.raises(CallTimeout):
            await provider.call(Request(caller=CallerKind.CHARACTER, agent="butler", prompt="@hang"))


class TestClassify:
    def test_usage_cap_reset_time_is_the_wait(self) -> None:
        error = classify_failure("claude exited with status 1", "Claude AI usage limit reached|1767225600", now=1767225000.0)
        assert isinstance(error, SessionLimitError) and error.final and error.retry_after == 600.0

    @pytest.mark.parametrize("said", ["API Error: 529 Overloaded", "Rate limit exceeded", "429 Too Many Requests"])
    def test_rate_limits(self, said: str) -> None:
        error = classify_failure("claude exited with status 1", said)
        assert isinstance(error, SessionLimitError) and not error.final

    def test_anything_else_is_a_provider_error(self) -> None:
        error = classify_failure("claude exited with status 1", "ENOENT: no such file")
        assert type(error) is ProviderError


def test_a_final_refusal_stops_the_run_in_one_line_keeping_the_save(stand_in: Path, tmp_path: Path) -> None:
    """Every call is refused for good (not logged in): ``manor run`` stops after the
    first tick, says so in one line, prints that tick's figures, and its save replays."""
    wrapper = tmp_path / "logged_out.py"  # the stand-in, logged out whatever the prompt
    wrapper.write_text(f"import sys, runpy\nsys.argv = [sys.argv[0], '-p', '@logged-out']\nrunpy.run_path({str(stand_in)!r}, run_name='__main__')\n")
    config = tmp_path / "manor.toml"
    argv = json.dumps([sys.executable, str(wrapper), "-p", "{prompt}"])
    config.write_text(f'[backends.cli]\nkind = "claude-code"\nargv = {argv}\n[backend]\ndefault = "cli"\n')
    save = tmp_path / "run.msav"
    # ``manor run`` here: its exit status, its line and its save are checked, not its process.
    result = manor_here("run", "--json", "--config", str(config), "--ticks", "5", "--clock", "real", "--save", str(save), cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("manor: error: ") and "Not logged in · Please run /login" in lines[0]
    assert lines[0].endswith(f"no retry will help, so the run stopped after 1 tick; saved to {save}")
    summary = json.loads(result.stdout)
    assert summary["ticks"] == 1 and "Not logged in" in summary["stopped"]
    assert summary["degradations"]["character"]["provider_error"] == 10
    replay = manor_here("replay", str(save), "--verify")  # the save, not a process, is checked
    assert replay.returncode == 0, replay.stderr


def test_a_run_records_the_tokens_and_the_cost_claude_code_reports(stand_in: Path, tmp_path: Path) -> None:
    """The records take the result's tokens and its total_cost_usd, not a price per token."""
    config = tmp_path / "manor.toml"
    argv = json.dumps([sys.executable, str(stand_in), "-p", "{prompt}"])
    config.write_text(f'[backends.cli]\nkind = "claude-code"\nargv = {argv}\n[backend]\ndefault = "cli"\n[cost]\nprice_per_1k_tokens = 5.0\n')
    result = manor_here("run", "--json", "--config", str(config), "--ticks", "1", "--clock", "real", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ok"] == summary["calls"] == 14
    assert summary["tokens"] == {"input": 14 * 15, "output": 14 * 5}
    assert summary["cost"] == pytest.approx(14 * 0.0123)


def test_a_final_refusal_stops_a_fleet_in_one_line_keeping_its_saves(stand_in: Path, tmp_path: Path) -> None:
    """As ``manor run``: every world stops after the tick it came in, the saves replay."""
    wrapper = tmp_path / "logged_out.py"
    wrapper.write_text(f"import sys, runpy\nsys.argv = [sys.argv[0], '-p', '@logged-out']\nrunpy.run_path({str(stand_in)!r}, run_name='__main__')\n")
    config = tmp_path / "manor.toml"
    argv = json.dumps([sys.executable, str(wrapper), "-p", "{prompt}"])
    config.write_text(f'[backends.cli]\nkind = "claude-code"\nargv = {argv}\n[backend]\ndefault = "cli"\n')
    saves = tmp_path / "saves"
    result = manor_here("fleet", "--worlds", "2", "--json", "--config", str(config), "--ticks", "5", "--clock", "real", "--save-dir", str(saves), cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1, lines
    assert "Not logged in" in lines[0] and "no retry will help, so the run stopped after 1 tick of 2 worlds" in lines[0]
    for save in sorted(saves.iterdir()):
        replay = manor_here("replay", str(save), "--verify")  # the save, not a process, is checked
        assert replay.returncode == 0, replay.stderr
