"""start_now: a task started with it runs until it first blocks before the starter goes on,
so tasks started one after another arrive in that order whatever trio's run order."""

from __future__ import annotations

import functools

import pytest
import trio
import trio.testing

from manor.tick.ordered_start import start_now


@pytest.mark.trio
@pytest.mark.parametrize("run", range(20))  # trio orders each batch of tasks at random
async def test_tasks_started_one_by_one_reach_their_first_block_in_order(run: int, autojump_clock: trio.testing.MockClock) -> None:
    arrivals: list[int] = []
    finished: list[int] = []

    async def call(index: int) -> None:
        arrivals.append(index)  # the part before the first block (a layer's admission)
        await trio.lowlevel.cancel_shielded_checkpoint()  # a checkpoint that does not block
        await trio.sleep(1.0)
        finished.append(index)

    async with trio.open_nursery() as nursery:
        for index in range(8):
            await start_now(nursery, functools.partial(call, index))
            assert arrivals == list(range(index + 1))
        assert trio.current_time() == 0.0  # starting takes no time
    assert sorted(finished) == list(range(8))


@pytest.mark.trio
async def test_a_task_that_fails_at_once_fails_the_nursery() -> None:
    """As with nursery.start, a task that raises before blocking takes its nursery down."""

    async def broken() -> None:
        raise RuntimeError("broken at the start")

    with pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="broken at the start")):
        async with trio.open_nursery() as nursery:
            await start_now(nursery, broken)
            await trio.sleep_forever()
