"""Connection reuse: every HTTP backend reads each answer to its end, so that one shared
client opens no more connections than it has calls in flight. Counted by the loopback
server (``/stats`` ``connections``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
import trio
from agent_servers import connections, serving, wait_for

from manor.calls import Request
from manor.errors import CallError
from manor.providers import (
    AgnoProvider,
    HttpAgentTransport,
    OpenAIProvider,
    Provider,
    collect,
)
from manor.serve.host import AgentHost
from manor.worlds.manor import CallerKind

MakeProvider = Callable[[str, httpx.AsyncClient], Provider]

PROVIDERS: dict[str, MakeProvider] = {
    "openai": lambda url, client: OpenAIProvider(f"{url}/v1", model="m", client=client),
    "agno-stream": lambda url, client: AgnoProvider(HttpAgentTransport(url, client=client), "agent", workers=8, stream=True),
    "agno": lambda url, client: AgnoProvider(HttpAgentTransport(url, client=client), "agent", workers=8),
}


@pytest.fixture(params=sorted(PROVIDERS))
def make(request: pytest.FixtureRequest) -> MakeProvider:
    return PROVIDERS[request.param]


@asynccontextmanager
async def _served(make: MakeProvider, **host_options) -> AsyncIterator[tuple[str, Provider, AgentHost]]:
    """A loopback server and a backend on one client, as a run's RunClients makes it;
    and the server's host."""
    async with serving(latency=0.05, **host_options) as (url, host):
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=None)) as client:
            yield url, make(url, client), host


async def _call(provider: Provider, prompt: str) -> str:
    """One call; a failure is its reason, as the tick loop would degrade it."""
    try:
        return (await collect(provider, Request(caller=CallerKind.CHARACTER, agent="hobbes", prompt=prompt))).text
    except CallError as exc:
        return exc.reason


@pytest.mark.trio
async def test_sequential_calls_use_one_connection(make: MakeProvider) -> None:
    async with _served(make) as (url, provider, _):
        answers = [await _call(provider, f"call {i} @latency=0.2") for i in range(6)]
        assert all(answer.endswith(f"call {i}") for i, answer in enumerate(answers))
        assert await connections(url) == 1


@pytest.mark.trio
async def test_concurrent_calls_open_no_more_connections_than_run_at_once(make: MakeProvider) -> None:
    """Four waves of three calls at once: three connections, not twelve."""
    async with _served(make, capacity=3) as (url, provider, _):
        for wave in range(4):
            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(_call, provider, f"wave {wave} call {i}")
        assert await connections(url) <= 3


@pytest.mark.trio
async def test_error_answers_leave_the_connection_reusable(make: MakeProvider) -> None:
    """429, 500, a model error and garbage are whole answers: the connection stays."""
    async with _served(make) as (url, provider, _):
        outcomes = [
            await _call(provider, prompt)
            for prompt in ("hi", "hi @status=429 @retry-after=1", "hi @status=500", "hi @model-error", "hi @garbage", "hi")
        ]
        assert outcomes[1:5] == ["platform_rejected", "provider_error", "provider_error", "provider_error"]
        assert outcomes[0].endswith("hi") and outcomes[5].endswith("hi")
        assert await connections(url) == 1


@pytest.mark.trio
async def test_unknown_agent_leaves_the_connection_reusable() -> None:
    async with serving() as (url, _):
        async with httpx.AsyncClient() as client:
            for agent in ("nobody", "agent", "nobody"):
                await _call(AgnoProvider(HttpAgentTransport(url, client=client), agent, stream=True), "hi")
        assert await connections(url) == 1


@pytest.mark.trio
async def test_a_call_cancelled_mid_stream_hangs_up_cleanly(make: MakeProvider) -> None:
    """Cancelled mid-answer, the call ends at once and closes its connection (the server
    sees the client leave); the next call opens a fresh one and is answered."""
    async with _served(make) as (url, provider, host):
        assert (await _call(provider, "first")).endswith("first")
        # Cancelled once the server runs it (not after a fixed 0.3 s, which a loaded
        # machine could spend before the request reached the server).
        with trio.fail_after(60) as bound:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_call, provider, "@hang")
                await wait_for(lambda: host.statistics().running == 1, timeout=60)
                bound.deadline = trio.current_time() + 5  # then it ends at once
                nursery.cancel_scope.cancel()
        assert (await _call(provider, "after")).endswith("after")
        assert await connections(url) == 2
