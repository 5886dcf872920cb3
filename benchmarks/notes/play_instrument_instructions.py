"""Instructions a call of the dashboard's instrument alone (benchmarks/notes/dashboard.md):
200 ticks of the Wacky Manor recorded (zero-latency backend), then fed FEEDS times to a
fresh ``DashboardState`` as the tick loop feeds it — ``tick_started``, the calls' notes
(started, admitted, ended: ``TickLoop.call_notes``), ``tick_finished``. A call's
instructions are the difference of two FEEDS over the calls between:

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind \\
        python benchmarks/notes/play_instrument_instructions.py 3   # and 1; 5,600 calls between
"""
import sys

import trio

from manor.bench import play
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.play.state import DashboardState
from manor.run.engine import configure
from manor.tick.instruments import Instrument

config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])


class Recorder(Instrument):
    def __init__(self) -> None:
        self.ticks: list = []

    def tick_started(self, tick, requests) -> None:
        self.requests = list(requests)

    def tick_finished(self, record, story) -> None:
        self.ticks.append((record.tick, self.requests, record, list(story)))


recorder = Recorder()
trio.run(play._engine(config, scene, [recorder]).loop.run, 200)


def feed(state: DashboardState) -> int:
    calls = 0
    for tick, requests, record, story in recorder.ticks:
        state.tick_started(tick, requests)
        ended = record.calls
        # As the loop notes them: each call started, admitted, ended (in bulk here).
        state._notes.extend(requests[: len(ended)])
        state._notes.extend((request, 0.0) for request in requests[: len(ended)])
        state._notes.extend(ended)
        state.tick_finished(record, story)
        calls += len(ended)
    return calls


print(sum(feed(DashboardState(scene)) for _ in range(int(sys.argv[1]))), "calls fed")
