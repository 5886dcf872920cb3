"""The shared gate's edges: a call's recorded end against its release on the real clock,
a save made while the gate's server was down, waiting for a lost gate, a gate sized past
the platform."""

from __future__ import annotations

import trio

from manor.records import CallRecord
from manor.replay.recorded import peak_platform_sessions
from scenes_fixture import TickRecorder, fixed_scene, make_engine


def _most_in_flight(calls: list[CallRecord]) -> int:
    """The most calls whose recorded [admitted, finished) spans overlap at one instant."""
    return peak_platform_sessions(calls)


class TestRecordedEnd:
    def test_on_the_real_clock_no_recorded_overlap_exceeds_the_gate(self) -> None:
        """Many short calls on the real clock: a call's end is stamped when the gate takes
        its slot back, so the call that slot admits next never starts before it ends."""
        size = 3
        engine = make_engine(fixed_scene([0.001] * 24, narrator=0.001, summariser=0.001), gate_size=size, platform_limit=size + 1)
        recorder = TickRecorder()
        engine.loop.add_instrument(recorder)
        trio.run(engine.loop.run, 12, 0.0)  # the real clock
        calls = [call for tick in recorder.ticks for call in tick.calls]
        assert len(calls) == 12 * 26 and all(call.ok for call in calls)
        assert _most_in_flight(calls) == size
        for call in calls:
            assert call.admitted_at is not None and call.queued_at <= call.admitted_at <= call.finished_at
