"""The command backend against a real subprocess (tests/fake_model.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from manor.calls import Done, Request, TextDelta
from manor.errors import CallTimeout, ConfigError, ProviderError
from manor.layers import Stack, TimeoutLayer
from manor.providers.command import CommandProvider
from manor.worlds.manor import CallerKind

FAKE = str(Path(__file__).with_name("fake_model.py"))


def _request(prompt: str = "the teapot is missing") -> Request:
    return Request(caller=CallerKind.CHARACTER, agent="the butler", prompt=prompt)


async def _events(provider, request):
    return [event async for event in provider.invoke(request)]


@pytest.mark.trio
async def test_prompt_on_stdin_streams_stdout_as_deltas() -> None:
    """The prompt goes to stdin; each word the process prints arrives as its own delta."""
    events = await _events(CommandProvider([sys.executable, FAKE, "echo"]), _request())
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 3
    assert events[-1] == Done(text="you said: the teapot is missing")
    assert "".join(deltas) == events[-1].text


@pytest.mark.trio
async def test_prompt_as_an_argument_is_one_argv_item_not_shell() -> None:
    """{prompt} fills one argv item: shell syntax in the prompt stays text."""
    provider = CommandProvider([sys.executable, FAKE, "echo", "{prompt}"])
    events = await _events(provider, _request("$(rm -rf /) ; echo pwned"))
    assert events[-1].text == "you said: $(rm -rf /) ; echo pwned"


@pytest.mark.trio
async def test_non_zero_exit_carries_the_last_lines_of_stderr() -> None:
    """Exit status 3 is a provider_error naming the status and the last stderr lines."""
    with pytest.raises(ProviderError) as info:
        await _events(CommandProvider([sys.executable, FAKE, "fail"]), _request())
    message = str(info.value)
    assert "exited with status 3" in message
    assert "error line 10" in message and "error line 6" in message
    assert "error line 5" not in message
    assert info.value.reason == "provider_error"


@pytest.mark.trio
async def test_hung_process_is_terminated_then_killed_on_timeout_and_reaped(tmp_path: Path) -> None:
    """A process that ignores SIGTERM is killed after kill_after; no zombie is left."""
    pidfile = tmp_path / "pid"
    backend = CommandProvider([sys.executable, FAKE, "hang", str(pidfile), "--ignore-term"], kill_after=0.5)
    start = trio.current_time()
    with pytest.raises(CallTimeout):
        await Stack(backend, [TimeoutLayer(seconds=1.0)]).call(_request())
    elapsed = trio.current_time() - start
    assert 1.0 <= elapsed < 10.0
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):  # a zombie would still answer signal 0
        os.kill(pid, 0)


@pytest.mark.trio
async def test_cancelled_call_ends_its_process(tmp_path: Path) -> None:
    """Cancelling the caller (a tick deadline) terminates the process too."""
    pidfile = tmp_path / "pid"
    backend = CommandProvider([sys.executable, FAKE, "hang", str(pidfile)])
    # Cancelled once the process runs (its pid written), not after a fixed second: a
    # loaded machine can take longer than that to start a Python.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_events, backend, _request())
        with trio.fail_after(60):
            while not (pidfile.exists() and pidfile.read_text()):
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


@pytest.mark.trio
async def test_missing_program_is_a_clear_provider_error() -> None:
    with pytest.raises(ProviderError, match="cannot run 'no-such-model-cli'"):
        await _events(CommandProvider(["no-such-model-cli", "-p"]), _request())


@pytest.mark.trio
async def test_secret_env_must_be_set_and_reaches_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A named variable that is unset fails naming it; one that is set is passed on."""
    provider = CommandProvider([sys.executable, FAKE, "env", "FAKE_MODEL_KEY"], env=["FAKE_MODEL_KEY"])
    monkeypatch.delenv("FAKE_MODEL_KEY", raising=False)
    with pytest.raises(ConfigError, match="FAKE_MODEL_KEY is not set"):
        await _events(provider, _request())
    monkeypatch.setenv("FAKE_MODEL_KEY", "s3cret-value")
    events = await _events(provider, _request())
    assert events[-1].text.strip() == "FAKE_MODEL_KEY is set"
    assert "s3cret-value" not in repr(provider)


def test_argv_must_name_a_program() -> None:
    with pytest.raises(ConfigError, match="argv"):
        CommandProvider([])


@pytest.mark.trio
async def test_nul_in_a_prompt_argument_is_a_provider_error() -> None:
    """No argument can hold a NUL: a clear provider_error, not ValueError; stdin can."""
    with pytest.raises(ProviderError, match="prompt holds a NUL character.*stdin") as info:
        await _events(CommandProvider([sys.executable, FAKE, "echo", "{prompt}"]), _request("the tea\0pot"))
    assert info.value.reason == "provider_error"
    events = await _events(CommandProvider([sys.executable, FAKE, "echo"]), _request("the tea\0pot"))
    assert events[-1].text == "you said: the tea\0pot"


@pytest.mark.trio
async def test_nul_in_the_model_argument_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="cannot run .*null byte"):
        await _events(CommandProvider([sys.executable, FAKE, "echo", "{model}"], model="llama\0"), _request())
