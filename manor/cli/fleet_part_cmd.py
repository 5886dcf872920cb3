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
from ..run.engine import make_gate, scene_sim
from ..saves import SaveWriter
from .fleet_cmd import (
    close_saves,
    create_saves,
    save_failure,
    saves_state,
    stopped_after,
)
from .output import GateLostNotice, warn_of_gate

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "One process of 'manor fleet --processes': reads its part of the fleet as one JSON line on stdin, "
        "runs those worlds, and writes their progress and figures to stdout as JSON lines. 'manor fleet' runs it."
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """``manor fleet-part``: one process of ``manor fleet --processes``, running the
    worlds of the part on its stdin and telling the parent of each tick and, at the
    end, of each world's figures (``manor.fleet.processes``)."""
    part = read_part(sys.stdin.buffer)
    channel = message_channel()
    configured = configure_worlds(part.sources, part.worlds, part.scenes)
    scenes = sorted({scene.spec.name for _, scene in configured})
    mine = [configured[index] for index in part.indices]
    gate = make_gate(*mine[0], world=f"fleet of {part.worlds} worlds of {', '.join(scenes)}: {describe_worlds(part.indices)}")
    scale = part.sim_latency_scale
    backends = (lambda index: None) if scale is None else (lambda index: scene_sim(*configured[index], latency_scale=scale))
    tenants = fleet_tenants(configured, part.scenes)
    fleet = build_fleet(mine, indices=part.indices, gate=gate, backends=backends, tenants=[tenants[index] for index in part.indices])
    writers: list[SaveWriter] = []  # made inside the block that closes them on a signal
    settings = mine[0][0].settings

    def after() -> str:
        if (problem := save_failure(writers)) is not None:
            send(channel, SavesFailed(problem=problem))
        return stopped_after(fleet.ticks, saves_state(Path(part.saves[0]).parent if part.saves else None, writers))

    async def main() -> None:
        async with gate.connected():
            warn_of_gate(gate)
            with trio.CancelScope() as orphaned:
                async with trio.open_nursery() as nursery:
                    start = trio.Event()
                    nursery.start_soon(listen_to_parent, start, orphaned)
                    send(channel, Ready())
                    await start.wait()
                    await fleet.run(settings.run.ticks, settings.run.tick_interval_s)
                    nursery.cancel_scope.cancel()
        if orphaned.cancelled_caught:
            raise FleetError(f"{describe_worlds(part.indices)}: the fleet that started this process has gone; stopped")

    try:
        with interrupts.stopped_as_interrupted(after, lambda: close_saves(writers, fleet)):
            with interrupts.held():  # a signal comes once every writer is there
                writers += create_saves(part.saves, fleet, part.worlds, force=part.force)
            notice = GateLostNotice()
            for world in fleet.worlds:  # after the writers: a tick is saved before the parent hears of it
                world.engine.loop.add_instrument(PartReporter(world.index, channel))
                world.engine.loop.add_instrument(notice)
            interrupts.run(main, after=after)
    except interrupts.Interrupted:
        # Stopped: the ticks that finished, for the fleet's report (if anyone still listens).
        with contextlib.suppress(OSError):
            _send_figures(channel, fleet)
        raise
    for writer in writers:
        writer.check()
    _send_figures(channel, fleet)
    return 0


def _send_figures(channel: BinaryIO, fleet: Fleet) -> None:
    """Each of the process's worlds' figures, as far as its run got."""
    for figures in fleet.world_summaries():
        send(channel, Finished(world=figures["index"], figures=figures))
