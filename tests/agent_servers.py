"""Start ``manor serve-agent``'s server as a task on loopback, for the backend tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

from manor.serve import AgentHost, AgentServer


@asynccontextmanager
async def serving(**host_options: Any) -> AsyncIterator[tuple[str, AgentHost]]:
    """An ``AgentHost`` behind a real HTTP server on a free loopback port: (url, host)."""
    host = AgentHost(**{"agents": ("agent",), "latency": 0.05, **host_options})
    async with trio.open_nursery() as nursery:
        await nursery.start(host.serve)
        url = await nursery.start(AgentServer(host).serve, "127.0.0.1", 0)
        yield url, host
        nursery.cancel_scope.cancel()


async def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    """Poll ``predicate()`` until true; generous, for loaded machines."""
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


async def stats(url: str) -> dict[str, int]:
    async with httpx.AsyncClient() as client:
        return (await client.get(f"{url}/stats")).json()


async def connections(url: str) -> int:
    """The TCP connections the server has accepted, not counting this query's own."""
    return (await stats(url))["connections"] - 1
