"""``manor fleet-part``: one process of ``manor fleet --processes`` (not listed in ``manor
--help``: ``manor fleet`` runs it). It reads its part of the fleet on stdin, runs those
worlds, and writes their progress and figures to stdout (``manor.fleet.processes``)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import BinaryIO

import trio

from ..admission.redis_gate import RedisGate
from ..errors import FleetError
from ..fleet.in_process import Fleet, build_fleet, configure_worlds, fleet_tenants
from ..fleet.processes import (
    Finished,
    PartReporter,
    Ready,
    SavesFailed,
    describe_worlds,
    listen_to_parent,
    message_channel,
    read_part,
    send,
)
from ..run import interrupts
from ..run.engine import scene_sim
from ..run.gate_lost import GateLostNotice
from ..run.opening import open_run
from .fleet_cmd import (
    close_saves,
    create_saves,
    save_failure,
    saves_state,
    stopped_after,
)

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """``manor fleet-part``: one process of ``manor fleet --processes``, running the
    worlds of the part on its stdin and telling the parent of each tick and, at the
    end, of each world's figures (``manor.fleet.processes``)."""
    part = read_part(sys.stdin.buffer)
    channel = message_channel()
    configured = configure_worlds(part.sources, part.worlds, part.scenes)
    scenes = sorted({scene.spec.name for _, scene in configured})
    mine = [configured[index] for index in part.indices]
    scale = part.sim_latency_scale
    backends = (lambda index: None) if scale is None else (lambda index: scene_sim(*configured[index], latency_scale=scale))
    tenants = fleet_tenants(configured, part.scenes)
    mine_tenants = [tenants[index] for index in part.indices]
    live = open_run(
        mine, lambda gate: build_fleet(mine, indices=part.indices, gate=gate, backends=backends, tenants=mine_tenants),
        world=f"fleet of {part.worlds} worlds of {', '.join(scenes)}: {describe_worlds(part.indices)}",
    )  # fmt: skip
    fleet = live.runs
    settings = mine[0][0].settings

    def after() -> str:
        if (problem := save_failure(live.saves)) is not None:
            send(channel, SavesFailed(problem=problem))
        return stopped_after(fleet.ticks, saves_state(Path(part.saves[0]).parent if part.saves else None, live.saves))

    async def main(fleet: Fleet) -> None:
        notice = GateLostNotice()
        for world in fleet.worlds:  # after the writers: a tick is saved before the parent hears of it
            world.engine.loop.add_instrument(PartReporter(world.index, channel))
            world.engine.loop.add_instrument(notice)
        with trio.CancelScope() as orphaned:
            async with trio.open_nursery() as nursery:
                start = trio.Event()
                nursery.start_soon(listen_to_parent, start, orphaned)
                gate = fleet.gate
                send(channel, Ready(url=gate.url, name=gate.name, tenant=gate.tenant) if isinstance(gate, RedisGate) else Ready())
                await start.wait()
                await fleet.run(settings.run.ticks, settings.run.tick_interval_s)
                nursery.cancel_scope.cancel()
        if orphaned.cancelled_caught:
            raise FleetError(f"{describe_worlds(part.indices)}: the fleet that started this process has gone; stopped")

    try:
        with interrupts.stopped_as_interrupted(after, lambda: close_saves(live.saves, fleet)):
            live.run(main, after=after, saves=lambda fleet: create_saves(part.saves, fleet, part.worlds, force=part.force))
    except interrupts.Interrupted:
        # Stopped: the ticks that finished, for the fleet's report (if anyone still listens).
        with contextlib.suppress(OSError):
            _send_figures(channel, fleet)
        raise
    for writer in live.saves:
        writer.check()
    _send_figures(channel, fleet)
    return 0


def _send_figures(channel: BinaryIO, fleet: Fleet) -> None:
    """Each of the process's worlds' figures, as far as its run got."""
    for figures in fleet.world_summaries():
        send(channel, Finished(world=figures["index"], figures=figures))
