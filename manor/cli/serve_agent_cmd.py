"""``manor serve-agent``: a local remote agent on loopback, for tests and demos."""

from __future__ import annotations

import argparse
import sys

import trio

from ..run import interrupts
from ..serve import AgentHost, AgentServer

__all__ = ["run"]



def run(args: argparse.Namespace) -> int:
    host = AgentHost(
        agents=tuple(args.agents or ("agent",)),
        capacity=args.capacity,
        reject_when_full=args.reject_when_full,
        latency=args.latency,
        time_scale=args.time_scale,
    )
    status = 0
    try:
        try:
            interrupts.run(_serve, host, args.host, args.port)
        except* OSError as group:
            exc = _first(group)
            print(f"manor serve-agent: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
            status = 1
    except interrupts.Interrupted as stopped:
        # Ctrl-C or SIGTERM is how a server stops: its summary is its one line.
        stats = host.statistics()
        print(
            f"manor serve-agent: stopped; {stats.submitted} runs, peak {stats.peak_running} of {stats.capacity} running, "
            f"{stats.dropped} dropped, {stats.cancelled} cancelled, {stats.rejected} rejected",
            file=sys.stderr,
        )
        return stopped.exit_status
    return status


async def _serve(host: AgentHost, address: str, port: int) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(host.serve)
        url = await nursery.start(AgentServer(host).serve, address, port)
        print(url, flush=True)
        print(
            f"manor serve-agent: agents {', '.join(host.agents)}; capacity {host.capacity}, "
            f"{'rejects' if host.reject_when_full else 'queues'} when full; Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )


def _first(group: BaseExceptionGroup[OSError]) -> OSError:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first
