"""Calls per second, one at a time and 5 at once, against serve-agent at latency 0:
the anthropic backend (SDK) against the openai backend (httpx), same host."""
import os
import sys
import time

import httpx
import trio

sys.path.insert(0, "tests")
from agent_servers import serving

from manor.calls import CallerKind, Request
from manor.providers import collect
from manor.providers.anthropic import AnthropicProvider, anthropic_client
from manor.providers.openai import OpenAIProvider

os.environ["K"] = "x"
N = 400
async def main():
    async with serving(capacity=50, latency=0.0) as (url, _):
        ant = AnthropicProvider(anthropic_client("K", url, 5, 10), model="m")
        oai = OpenAIProvider(f"{url}/v1", model="m", client=httpx.AsyncClient(limits=httpx.Limits(max_connections=None)))
        for name, p in (("openai", oai), ("anthropic", ant), ("openai", oai), ("anthropic", ant)):
            for width in (1, 5):
                req = Request(caller=CallerKind.NARRATOR, agent="n", prompt="hello there")
                start = time.perf_counter()
                async def worker(k):
                    for _ in range(k): await collect(p, req)
                async with trio.open_nursery() as n:
                    for _ in range(width): n.start_soon(worker, N // width)
                el = time.perf_counter() - start
                print(f"{name:9} width {width}: {N/el:7.0f} calls/s ({el/N*1000:.2f} ms/call)")
trio.run(main)
