"""The anthropic backend (through the official SDK) against serve-agent's /v1/messages,
and against a plain HTTP server written to the real service's wire shapes (one Manor
did not write for itself: the SDK must accept what it sends)."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest
import trio

pytest.importorskip("anthropic")  # the `anthropic` extra; in the `test` extra too

from agent_servers import serving, wait_for

from manor.calls import Done, RateLimits, Request, Started, TextDelta, Usage
from manor.errors import (
    AccessRefused,
    CallTimeout,
    ConfigError,
    ProviderError,
    SessionLimitError,
    error_line,
)
from manor.layers import Stack, TimeoutLayer
from manor.providers.anthropic import AnthropicProvider, anthropic_client
from manor.worlds.manor import CallerKind

KEY = "ANTHROPIC_KEY_FOR_MANOR_TESTS"  # not MANOR_*: those are settings


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "sk-ant-test-secret")


def _provider(url: str, **options: object) -> AnthropicProvider:
    timeouts = {"connect_timeout": 5.0, "read_timeout": 10.0}
    timeouts.update({k: v for k, v in options.items() if k in timeouts})  # type: ignore[misc]
    client = anthropic_client(KEY, url, **timeouts)  # type: ignore[arg-type]
    return AnthropicProvider(client, model="claude-test", what=url)


async def _events(provider: AnthropicProvider, prompt: str) -> list:
    request = Request(caller=CallerKind.NARRATOR, agent="narrator", prompt=prompt)
    return [event async for event in provider.invoke(request)]


@pytest.mark.trio
async def test_streams_text_deltas_and_usage() -> None:
    """Text arrives in pieces; tokens come from message_start and message_delta; what
    remains from the rate headers (capacity 3, this run in one of them)."""
    async with serving() as (url, _):
        events = await _events(_provider(url), "fetch the teapot @latency=0.2")
    assert isinstance(events[0], Started)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 2
    rates = RateLimits(requests_remaining=2)
    assert events[-1] == Done(text="agent heard: fetch the teapot", usage=Usage(input_tokens=3, output_tokens=5), rates=rates)
    assert "".join(deltas) == events[-1].text


@pytest.mark.trio
async def test_429_is_refused_by_the_server_with_retry_after_and_rate_headers() -> None:
    async with serving() as (url, _):
        with pytest.raises(SessionLimitError) as info:
            await _events(_provider(url), "hi @status=429 @retry-after=2")
    refusal = info.value
    assert (refusal.reason, refusal.refused_by, refusal.retry_after, refusal.final) == ("platform_rejected", "server", 2.0, False)
    assert refusal.rates is not None and refusal.rates.requests_remaining == 3
    assert "429 too many requests" in str(refusal)


@pytest.mark.trio
async def test_full_host_answers_429_with_remaining_zero() -> None:
    async with serving(capacity=1, reject_when_full=True) as (url, host):
        provider = _provider(url)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_events, provider, "@hang")
            await wait_for(lambda: host.statistics().running == 1)
            with pytest.raises(SessionLimitError) as info:
                await _events(provider, "me too")
            nursery.cancel_scope.cancel()
    assert info.value.retry_after == 1.0
    assert info.value.rates is not None and info.value.rates.requests_remaining == 0


@pytest.mark.trio
async def test_529_is_overloaded_not_a_provider_error() -> None:
    async with serving() as (url, _):
        with pytest.raises(SessionLimitError, match="529 overloaded") as info:
            await _events(_provider(url), "hi @status=529 @retry-after=3")
    assert info.value.retry_after == 3.0 and not info.value.final


@pytest.mark.trio
async def test_spend_cap_is_final() -> None:
    async with serving() as (url, _):
        with pytest.raises(SessionLimitError, match="no retry will help") as info:
            await _events(_provider(url), "hi @status=429 @spend-cap")
    assert info.value.final and info.value.refused_by == "server"


@pytest.mark.trio
@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_final_and_never_quoted(status: int) -> None:
    async with serving() as (url, _):
        with pytest.raises(AccessRefused, match=f"HTTP {status} access refused") as info:
            await _events(_provider(url), f"hi @status={status}")
    assert info.value.final and info.value.reason == "provider_error"
    assert "sk-ant-test-secret" not in error_line(info.value)


@pytest.mark.trio
async def test_model_error_mid_stream_is_a_provider_error() -> None:
    async with serving() as (url, _):
        with pytest.raises(ProviderError, match="the model failed"):
            await _events(_provider(url), "hi @model-error")


@pytest.mark.trio
async def test_hang_is_cut_by_the_timeout_and_the_server_run_cancelled() -> None:
    async with serving() as (url, host):
        provider = Stack(_provider(url), [TimeoutLayer(seconds=0.5)])
        with pytest.raises(CallTimeout):
            await provider.call(Request(caller=CallerKind.NARRATOR, agent="narrator", prompt="@hang"))
        await wait_for(lambda: host.statistics().cancelled == 1)


@pytest.mark.trio
async def test_read_timeout_is_call_timeout() -> None:
    async with serving() as (url, _):
        with pytest.raises(CallTimeout):
            await _events(_provider(url, read_timeout=0.3), "@hang")


@pytest.mark.trio
async def test_unreachable_server_is_a_provider_error() -> None:
    async with serving() as (url, _):
        pass
    with pytest.raises(ProviderError, match="APIConnectionError"):
        await _events(_provider(url), "hi")


@pytest.mark.trio
async def test_no_model_is_final() -> None:
    provider = AnthropicProvider(anthropic_client(KEY, "http://127.0.0.1:9", 1.0, 1.0))
    with pytest.raises(ProviderError, match="no model configured") as info:
        await _events(provider, "hi")
    assert info.value.final


def test_unset_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY)
    with pytest.raises(ConfigError, match=KEY):
        anthropic_client(KEY, "http://127.0.0.1:9", 1.0, 1.0)


# A server Manor did not write for itself: the wire shapes of the real service, by hand.

_EVENTS = [
    ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                       "content": [], "stop_reason": None, "stop_sequence": None,
                       "usage": {"input_tokens": 7, "output_tokens": 1, "cache_read_input_tokens": 5}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("ping", {"type": "ping"}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 2}}),
    ("message_stop", {"type": "message_stop"}),
]  # fmt: skip


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        key = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
        self.seen.append({"key": key, "version": self.headers.get("anthropic-version", "")})
        prompt = body["messages"][0]["content"]
        if prompt == "overloaded mid-stream":
            self._stream([_EVENTS[0], ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})])
        elif prompt == "spend cap":
            error = {"type": "rate_limit_error", "message": "You have reached your specified API usage limits.",
                     "details": {"error_code": "enforced_spend_limit_reached"}}  # fmt: skip
            data = json.dumps({"type": "error", "error": error}).encode()
            self.send_response(429)
            self.send_header("content-type", "application/json")
            self.send_header("retry-after", "Wed, 21 Oct 2099 07:28:00 GMT")
            self.send_header("anthropic-ratelimit-tokens-remaining", "0")
            self.send_header("anthropic-ratelimit-tokens-reset", "2099-10-21T07:28:00Z")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._stream(_EVENTS)

    def _stream(self, events: list) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _wire_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.trio
async def test_the_real_wire_shapes_stream_under_trio() -> None:
    """The SDK under trio reads the service's frames (a ping between, cached input tokens
    counted in), sending the key (2.17: as a bearer token) and an API version."""
    with _wire_server() as url:
        events = await _events(_provider(url), "hi")
    assert events[-1] == Done(text="Hello there", usage=Usage(input_tokens=12, output_tokens=2))
    assert _Handler.seen[-1]["key"] == "sk-ant-test-secret" and _Handler.seen[-1]["version"]


@pytest.mark.trio
async def test_overloaded_error_mid_stream_is_refused_by_the_server() -> None:
    with _wire_server() as url, pytest.raises(SessionLimitError, match="529 overloaded: Overloaded"):
        await _events(_provider(url), "overloaded mid-stream")


@pytest.mark.trio
async def test_spend_cap_with_an_http_date_is_final_with_its_wait() -> None:
    with _wire_server() as url, pytest.raises(SessionLimitError) as info:
        await _events(_provider(url), "spend cap")
    refusal = info.value
    assert refusal.final and refusal.retry_after is not None and refusal.retry_after > 1e9
    assert refusal.rates is not None and refusal.rates.tokens_remaining == 0 and refusal.rates.tokens_reset_s > 1e9


def test_a_cast_on_the_anthropic_backend_runs_and_its_client_is_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kind = "anthropic"`` in manor.toml: every call of a tick answered with its tokens,
    through one SDK client for the run, closed when the run ends."""
    from manor.config import standard_sources
    from manor.providers.routing import RoutingProvider
    from manor.run.engine import build_engine, configure

    seen = {}

    async def run() -> RoutingProvider:
        async with serving(capacity=3, latency=0.01) as (url, _):
            path = tmp_path / "manor.toml"
            path.write_text(f'[backends.claude]\nkind = "anthropic"\nbase_url = "{url}"\nmodel = "m"\napi_key_env = "{KEY}"\n[backend]\ndefault = "claude"\n')
            config, scene = configure(standard_sources(config_path=path, environ={}))
            engine = build_engine(config, scene)
            seen["tick"] = await engine.loop.step()
            router = engine.loop.gated.backend
            assert isinstance(router, RoutingProvider)
            seen["open"] = router.statistics().open_clients
            return router

    router = trio.run(run)
    calls = seen["tick"].calls
    assert [call.outcome for call in calls] == ["ok"] * 14
    assert all(call.input_tokens > 0 and call.output_tokens > 0 for call in calls)
    assert seen["open"] == 1 and router.statistics().open_clients == 0


def test_without_the_sdk_the_run_stops_before_its_first_tick_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from manor.config import standard_sources
    from manor.run.engine import build_engine, configure

    path = tmp_path / "manor.toml"
    path.write_text(f'[backends.claude]\nkind = "anthropic"\nmodel = "m"\napi_key_env = "{KEY}"\n[backend]\ndefault = "claude"\n')
    config, scene = configure(standard_sources(config_path=path, environ={}))
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if not installed: importing it fails
    with pytest.raises(ConfigError, match=r"pip install 'manor\[anthropic\]'"):
        build_engine(config, scene)


def test_manor_config_describes_the_new_kinds() -> None:
    """What ``manor config`` shows of a table: its kind and where it points, no secret."""
    from manor.config.backends import (
        AnthropicBackend,
        ClaudeCodeBackend,
        describe_table,
        variables,
    )

    claude = AnthropicBackend(model="m")
    assert describe_table(claude) == "anthropic api.anthropic.com model=m"
    assert variables(claude) == [("api_key_env", "ANTHROPIC_API_KEY")]
    cli = ClaudeCodeBackend(resume=True, env=("ANTHROPIC_API_KEY",))
    assert describe_table(cli) == "claude-code claude -p {prompt} --output-format stream-json --verbose --tools= (a session per agent)"
    assert variables(cli) == [("env", "ANTHROPIC_API_KEY")]
