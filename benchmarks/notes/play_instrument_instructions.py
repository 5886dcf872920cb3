"""Instructions a call of the dashboard's instrument alone (benchmarks/notes/dashboard.md):
200 ticks of the Wacky Manor recorded (zero-latency backend), then fed FEEDS times to a
fresh ``DashboardState`` as the tick loop feeds it — ``tick_started``, the calls' notes
(each call's ``Heard``, ended: ``TickLoop.call_notes``), ``tick_finished``. A call's
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
from manor.tick.admitted import Heard
from manor.tick.instruments import Instrument, Instruments

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


instruments = Instruments()
heards = {}
for tick, requests, record, story in recorder.ticks:
    heards[tick] = []
    for request, call in zip(requests, record.calls):
        heard = Heard(request, instruments)
        heard.at, heard.record = call.admitted_at, call
        heards[tick].append(heard)


def feed(state: DashboardState) -> int:
    calls = 0
    for tick, requests, record, story in recorder.ticks:
        state.tick_started(tick, requests)
        ended = record.calls
        # As the loop notes them: each call's Heard as it starts, admitted and ended
        # by the tick's end (made here, outside what the loop would do for the state).
        state._notes.extend(heards[tick])
        state.tick_finished(record, story)
        calls += len(ended)
    return calls


print(sum(feed(DashboardState(scene)) for _ in range(int(sys.argv[1]))), "calls fed")
