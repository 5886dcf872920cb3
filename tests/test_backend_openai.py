"""The openai backend against the loopback server (and httpx.MockTransport for oddities)."""

from __future__ import annotations

import httpx
import pytest
import trio
from agent_servers import serving, wait_for

from manor.calls import Done, RateLimits, Request, Started, TextDelta, Usage
from manor.errors import CallTimeout, ConfigError, ProviderError, SessionLimitError
from manor.layers import Stack, TimeoutLayer
from manor.providers.http import FINISH_S
from manor.providers.openai import OpenAIProvider
from manor.worlds.manor import CallerKind


def _request(prompt: str) -> Request:
    return Request(caller=CallerKind.NARRATOR, agent="narrator", prompt=prompt)


async def _events(provider, prompt: str) -> list:
    return [event async for event in provider.invoke(_request(prompt))]


@pytest.mark.trio
async def test_streams_deltas_and_records_usage() -> None:
    """Text arrives in pieces; usage comes from the include_usage chunk."""
    async with serving() as (url, _):
        events = await _events(OpenAIProvider(f"{url}/v1", model="butler"), "fetch the teapot @latency=0.2")
    assert isinstance(events[0], Started)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 2
    # The rate headers: capacity 3, this run in one of them.
    rates = RateLimits(requests_remaining=2)
    assert events[-1] == Done(text="agent heard: fetch the teapot", usage=Usage(input_tokens=3, output_tokens=5), rates=rates)
    assert "".join(deltas) == events[-1].text


@pytest.mark.trio
async def test_429_is_flow_control_with_retry_after() -> None:
    """A 429 is platform_rejected (SessionLimitError) with the server's Retry-After."""
    async with serving() as (url, _):
        provider = OpenAIProvider(f"{url}/v1", model="m")
        with pytest.raises(SessionLimitError) as info:
            await _events(provider, "hi @status=429 @retry-after=2")
        assert info.value.retry_after == 2.0
        assert info.value.reason == "platform_rejected"
        with pytest.raises(SessionLimitError) as info:
            await _events(provider, "hi @status=429")
        assert info.value.retry_after is None


@pytest.mark.trio
async def test_full_server_rejecting_is_flow_control() -> None:
    """A server that rejects when full answers 429 Retry-After: 1 while its slot is busy."""
    async with serving(capacity=1, reject_when_full=True) as (url, host):
        provider = OpenAIProvider(f"{url}/v1", model="m")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_events, provider, "@hang")
            await wait_for(lambda: host.statistics().running == 1)
            with pytest.raises(SessionLimitError) as info:
                await _events(provider, "me too")
            nursery.cancel_scope.cancel()
        assert info.value.retry_after == 1.0


@pytest.mark.trio
async def test_5xx_is_a_provider_error_with_the_servers_message() -> None:
    async with serving() as (url, _):
        with pytest.raises(ProviderError, match="HTTP 503: injected HTTP 503") as info:
            await _events(OpenAIProvider(f"{url}/v1", model="m"), "hi @status=503")
    assert info.value.reason == "provider_error"


@pytest.mark.trio
async def test_garbage_stream_is_a_clear_provider_error() -> None:
    async with serving() as (url, _):
        with pytest.raises(ProviderError, match="answered garbage: not JSON"):
            await _events(OpenAIProvider(f"{url}/v1", model="m"), "hi @garbage")


@pytest.mark.trio
async def test_model_error_mid_stream_is_a_provider_error() -> None:
    async with serving() as (url, _):
        with pytest.raises(ProviderError, match="the model failed"):
            await _events(OpenAIProvider(f"{url}/v1", model="m"), "hi @model-error")


@pytest.mark.trio
async def test_hang_is_cut_by_the_timeout_and_the_server_run_cancelled() -> None:
    """A call timeout hangs up; the server cancels a run whose client left mid-stream."""
    async with serving() as (url, host):
        provider = Stack(OpenAIProvider(f"{url}/v1", model="m"), [TimeoutLayer(seconds=0.5)])
        with pytest.raises(CallTimeout):
            await provider.call(_request("hi @hang"))
        await wait_for(lambda: host.statistics().cancelled == 1)
        assert host.statistics().running == 0


@pytest.mark.trio
async def test_read_timeout_is_explicit() -> None:
    """With no bytes for read_timeout seconds, the call fails as call_timeout."""
    async with serving() as (url, _):
        with pytest.raises(CallTimeout, match="read 0.3s"):
            await _events(OpenAIProvider(f"{url}/v1", model="m", read_timeout=0.3), "@hang")


@pytest.mark.trio
async def test_unreachable_server_is_a_provider_error() -> None:
    async with serving() as (url, _):
        pass  # the port is free again
    with pytest.raises(ProviderError, match="ConnectError"):
        await _events(OpenAIProvider(f"{url}/v1", model="m", connect_timeout=2), "hi")


@pytest.mark.trio
async def test_api_key_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key is read from the named variable; unset, the error names only the variable."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        body = b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAIProvider("http://model.invalid/v1", model="m", api_key_env="MANOR_TEST_KEY_X", client=client)
    monkeypatch.delenv("MANOR_TEST_KEY_X", raising=False)
    with pytest.raises(ConfigError, match="MANOR_TEST_KEY_X"):
        await _events(provider, "hi")
    monkeypatch.setenv("MANOR_TEST_KEY_X", "sk-secret")
    events = await _events(provider, "hi")
    assert events[-1].text == "ok" and seen == ["Bearer sk-secret"]


@pytest.mark.trio
async def test_non_event_stream_answer_is_garbage() -> None:
    """A 200 that is not an event stream (an HTML error page) is named as such."""
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, headers={"content-type": "text/html"}, content=b"<html>"))
    )
    with pytest.raises(ProviderError, match="expected an event stream, got text/html"):
        await _events(OpenAIProvider("http://model.invalid/v1", model="m", client=client), "hi")


@pytest.mark.trio
async def test_stream_cut_off_before_done_is_an_error() -> None:
    body = b'data: {"choices":[{"delta":{"content":"half"}}]}\n\n'
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda r: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        )
    )
    with pytest.raises(ProviderError, match="cut off"):
        await _events(OpenAIProvider("http://model.invalid/v1", model="m", client=client), "hi")


@pytest.mark.trio
async def test_a_body_left_open_after_done_still_answers() -> None:
    """Reading past [DONE] (to reuse the connection) is bounded: a server that never
    ends the body costs FINISH_S, not the call."""

    class OpenBody(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
            await trio.sleep_forever()

    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=OpenBody()))
    )
    with trio.fail_after(FINISH_S + 5):
        events = await _events(OpenAIProvider("http://model.invalid/v1", model="m", client=client), "hi")
    assert events[-1].text == "ok"
