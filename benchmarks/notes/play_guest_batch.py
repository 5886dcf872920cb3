"""What hosting trio in guest mode costs a scheduling batch (benchmarks/notes/dashboard.md):
one task doing N bare checkpoints (each a batch of trio's run loop) under ``trio.run``
and in ``GuestRun`` on a bare asyncio loop, both on ``PacedClock(inf)``; CPU µs a batch.

    PYTHONPATH=TREE python benchmarks/notes/play_guest_batch.py [N] [ROUNDS]
"""
import asyncio
import math
import sys
import time

import trio

from manor.play.guest import GuestRun
from manor.paced_clock import PacedClock

batches = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3


async def work() -> None:
    for _ in range(batches):
        await trio.lowlevel.checkpoint()


def plain() -> float:
    started = time.process_time()
    trio.run(work, clock=PacedClock(math.inf))
    return time.process_time() - started


def guest() -> float:
    async def main() -> float:
        run = GuestRun()
        started = time.process_time()
        run.start(work, clock=PacedClock(math.inf))
        await run.wait()
        return time.process_time() - started

    return asyncio.run(main())


for _ in range(rounds):
    bare, hosted = plain(), guest()
    print(f"trio.run {bare / batches * 1e6:.2f} us a batch, guest {hosted / batches * 1e6:.2f}, hosting {(hosted - bare) / batches * 1e6:.2f}")
