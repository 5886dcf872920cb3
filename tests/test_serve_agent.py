"""``manor serve-agent``: the host's queue, the HTTP faces, and the real process."""

from __future__ import annotations

import functools
import signal
import subprocess
import sys

import httpx
import pytest
import trio
from agent_servers import serving, wait_for

from manor.calls import Started
from manor.serve import AgentHost, Directives, RunSpec, parse_directives


class TestDirectives:
    def test_directives_are_taken_out_of_the_message(self) -> None:
        assert parse_directives("fetch @latency=1.3 the tea @hang") == ("fetch the tea", Directives(latency=1.3, hang=True))

    def test_bad_values_and_other_words_stay_in_the_text(self) -> None:
        assert parse_directives("mail me@home @latency=soon @status=429") == (
            "mail me@home @latency=soon",
            Directives(status=429),
        )


class TestHost:
    @pytest.mark.trio
    async def test_capacity_and_fifo_queue(self, autojump_clock: trio.testing.MockClock) -> None:
        """Capacity 2, four 1 s runs arriving 0.1 s apart: they start at 0, 0.1, 1, 1.1."""
        host = AgentHost(agents=("agent",), capacity=2, latency=1.0)
        started: dict[str, float] = {}

        async def client(name: str, at: float) -> None:
            await trio.sleep(at)
            async for event in host.run(RunSpec(name, "agent", name)):
                if isinstance(event, Started):
                    started[name] = trio.current_time()

        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            async with trio.open_nursery() as clients:
                for i, name in enumerate("abcd"):
                    clients.start_soon(client, name, i / 10)
            nursery.cancel_scope.cancel()
        assert started == {"a": 0.0, "b": 0.1, "c": 1.0, "d": 1.1}
        assert host.statistics().peak_running == 2 and host.statistics().completed == 4

    @pytest.mark.trio
    async def test_queued_run_whose_client_leaves_is_dropped(self, autojump_clock: trio.testing.MockClock) -> None:
        host = AgentHost(agents=("agent",), capacity=1)
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            nursery.start_soon(_drain, host, RunSpec("hung", "agent", "", Directives(hang=True)))
            await trio.sleep(1)
            with trio.move_on_after(1):
                await _drain(host, RunSpec("waiting", "agent", "hello"))
            assert host.record("waiting").status == "dropped"
            assert host.record("waiting").started_at is None
            nursery.cancel_scope.cancel()


async def _drain(host: AgentHost, spec: RunSpec) -> list:
    return [event async for event in host.run(spec)]


class TestHttp:
    @pytest.mark.trio
    async def test_agno_run_accepts_multipart_and_refuses_json(self) -> None:
        async with serving() as (url, _):
            async with httpx.AsyncClient() as client:
                multipart = await client.post(
                    f"{url}/agents/agent/runs",
                    files={"message": (None, "hello"), "stream": (None, "false"), "run_id": (None, "r1")},
                )
                as_json = await client.post(f"{url}/agents/agent/runs", json={"message": "hello"})
                missing = await client.post(f"{url}/agents/nobody/runs", data={"message": "hi"})
                cancel = await client.post(f"{url}/agents/agent/runs/no-such-run/cancel")
        body = multipart.json()
        assert multipart.status_code == 200
        assert (body["run_id"], body["status"], body["content"]) == ("r1", "COMPLETED", "agent heard: hello")
        assert set(body["metrics"]) >= {"input_tokens", "output_tokens", "total_tokens", "duration"}
        assert as_json.status_code == 422
        assert missing.status_code == 404
        assert (cancel.status_code, cancel.json()) == (200, {})

    @pytest.mark.trio
    async def test_openai_errors_are_json_even_when_streaming(self) -> None:
        async with serving() as (url, _):
            async with httpx.AsyncClient() as client:
                plain = await client.post(
                    f"{url}/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
                )
                limited = await client.post(
                    f"{url}/v1/chat/completions",
                    json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi @status=429"}]},
                )
        assert plain.json()["choices"][0]["message"]["content"] == "agent heard: hi"
        assert plain.json()["usage"] == {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}
        assert limited.status_code == 429 and "retry-after" not in limited.headers
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"

    @pytest.mark.trio
    async def test_anthropic_messages_and_errors_are_shaped_as_anthropic_does(self) -> None:
        def ask(text: str, **more: object) -> dict[str, object]:
            return {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": text}], **more}

        async with serving() as (url, _):
            async with httpx.AsyncClient() as client:
                plain = await client.post(f"{url}/v1/messages", json=ask("hi"))
                streamed = await client.post(f"{url}/v1/messages", json=ask("hi there", stream=True))
                overloaded = await client.post(f"{url}/v1/messages", json=ask("hi @status=529 @retry-after=4", stream=True))
                capped = await client.post(f"{url}/v1/messages", json=ask("hi @status=429 @spend-cap"))
                bad = await client.post(f"{url}/v1/messages", json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
        assert plain.json()["content"] == [{"type": "text", "text": "agent heard: hi"}]
        assert plain.json()["usage"] == {"input_tokens": 1, "output_tokens": 3}
        assert plain.headers["anthropic-ratelimit-requests-limit"] == "3"
        names = [line.removeprefix("event: ") for line in streamed.text.splitlines() if line.startswith("event: ")]
        assert names[:3] == ["message_start", "content_block_start", "ping"]
        assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
        assert set(names[3:-3]) == {"content_block_delta"}
        assert (overloaded.status_code, overloaded.headers["retry-after"]) == (529, "4")
        assert overloaded.json() == {"type": "error", "error": {"type": "overloaded_error", "message": "injected HTTP 529"}}
        assert capped.status_code == 429 and capped.json()["error"]["details"] == {"error_code": "enforced_spend_limit_reached"}
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"

    @pytest.mark.trio
    async def test_capacity_changes_while_running(self) -> None:
        """POST /admin/capacity: a host rejecting when full takes one more run after it
        grows; its refusals say Retry-After and that nothing remains."""
        async with serving(capacity=1, reject_when_full=True) as (url, host):
            async with httpx.AsyncClient() as client, trio.open_nursery() as nursery:
                chat = {"model": "m", "messages": [{"role": "user", "content": "@hang"}]}
                post = functools.partial(client.post, f"{url}/v1/chat/completions", json=chat)
                nursery.start_soon(post)
                await wait_for(lambda: host.statistics().running == 1)
                refused = await client.post(f"{url}/v1/chat/completions", json=chat)
                grown = await client.post(f"{url}/admin/capacity", json={"capacity": 2})
                nursery.start_soon(post)
                await wait_for(lambda: host.statistics().running == 2)
                wrong = await client.post(f"{url}/admin/capacity", json={"capacity": 0})
                nursery.cancel_scope.cancel()
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert (refused.headers["x-ratelimit-limit-requests"], refused.headers["x-ratelimit-remaining-requests"]) == ("1", "0")
        assert grown.status_code == 200 and grown.json()["capacity"] == 2
        assert wrong.status_code == 422 and host.capacity == 2


class TestProcess:
    @pytest.mark.trio
    async def test_real_process_serves_until_interrupted(self) -> None:
        """`manor serve-agent` prints its URL first, answers, and stops cleanly on Ctrl-C
        (exit 130, as every command a signal stops)."""
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "manor", "serve-agent", "--capacity", "2", "--latency", "0.1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            with trio.fail_after(30):
                line = b""
                while not line.endswith(b"\n"):
                    byte = await process.stdout.receive_some(1)
                    assert byte, "serve-agent exited before printing its URL"
                    line += byte
                url = line.decode().strip()
                assert url.startswith("http://127.0.0.1:")
                async with httpx.AsyncClient() as client:
                    run = await client.post(f"{url}/agents/agent/runs", data={"message": "hi", "stream": "false"})
                    stats = await client.get(f"{url}/stats")
                assert run.json()["status"] == "COMPLETED"
                assert stats.json()["capacity"] == 2
                process.send_signal(signal.SIGINT)
                assert await process.wait() == 130
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        tail = await process.stderr.receive_some(65536)
        assert b"stopped; 1 runs" in tail


def test_port_in_use_is_one_clear_line() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "manor", "serve-agent", "--port", str(port)], capture_output=True, text=True, timeout=30
        )
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "cannot listen on 127.0.0.1" in result.stderr


def test_bad_flag_is_one_clear_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "manor", "serve-agent", "--capacity", "0"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--capacity: 0 is not at least 1" in result.stderr
