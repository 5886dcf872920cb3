"""Where the live dashboard's CPU goes in the play suite's run (benchmarks/notes/dashboard.md):
the suite's dashboard contender (``manor.bench.play._dashboard``), with every asyncio
callback timed by the process's CPU clock over the timed ticks, grouped by what it
runs; inside them, the guest run's steps (the engine), the panels' redraw, Textual's
compositor and layout, the dashboard state's per-tick hooks (and, in a tree that holds
the ticks until a read, its taking them in); and the cyclic collector's passes.

    PYTHONPATH=TREE python benchmarks/notes/play_where.py [TICKS]

TICKS: the ticks timed (default 5,716: the suite's). What the callbacks do not cover is
asyncio's own loop (its ``select``), printed as "outside callbacks".
"""
import asyncio
import asyncio.events
import collections
import gc
import sys
import time

from textual.message_pump import MessagePump
from textual.screen import Screen

from manor.bench import play
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.play.app import PlayApp
from manor.play.guest import GuestRun
from manor.play.state import DashboardState
from manor.run.engine import configure

config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])
ticks = int(sys.argv[1]) if len(sys.argv) > 1 else 1429 * play.DASHBOARD_WINDOW
timing = False
callbacks = collections.defaultdict(lambda: [0, 0.0])
inner = collections.defaultdict(lambda: [0, 0.0])
collections_ = collections.defaultdict(lambda: [0, 0.0])


def what(callback):
    fn = getattr(callback, "func", callback)
    fn = getattr(fn, "__func__", fn)
    return f"{(getattr(fn, '__module__', '') or '').split('.')[0]}:{getattr(fn, '__qualname__', type(fn).__name__)}"


handle_run = asyncio.events.Handle._run


def timed_handle(self):
    if not timing:
        return handle_run(self)
    started = time.process_time()
    try:
        return handle_run(self)
    finally:
        entry = callbacks[what(self._callback)]
        entry[0] += 1
        entry[1] += time.process_time() - started


asyncio.events.Handle._run = timed_handle


def timed(cls, name, label):
    fn = getattr(cls, name)

    def wrapper(*args, **kwargs):
        if not timing:
            return fn(*args, **kwargs)
        started = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            entry = inner[label]
            entry[0] += 1
            entry[1] += time.process_time() - started

    setattr(cls, name, wrapper)


timed(GuestRun, "_step", "the guest run's steps (the engine)")
timed(PlayApp, "refresh_panels", "PlayApp.refresh_panels")
timed(Screen, "_compositor_refresh", "Screen._compositor_refresh")
timed(Screen, "_refresh_layout", "Screen._refresh_layout")
timed(MessagePump, "_dispatch_message", "MessagePump._dispatch_message")
# The dashboard's state: its per-tick hooks (inside the engine's steps), and where a tree
# has it, its taking in of the ticks held (at a read, or a tick's end when many are held).
timed(DashboardState, "tick_started", "DashboardState.tick_started (hook)")
timed(DashboardState, "tick_finished", "DashboardState.tick_finished (hook)")
if hasattr(DashboardState, "_take_ended"):
    timed(DashboardState, "_take_ended", "DashboardState._take_ended (the ticks held)")

collecting = [0.0]


def on_collection(phase, info):
    if not timing:
        return
    if phase == "start":
        collecting[0] = time.process_time()
    else:
        entry = collections_[info["generation"]]
        entry[0] += 1
        entry[1] += time.process_time() - collecting[0]


gc.callbacks.append(on_collection)

start, tick_finished = play._Stopwatch.start, play._Stopwatch.tick_finished


def start_timing(self):
    global timing
    timing = True
    start(self)


def stop_timing(self, record, story):
    global timing
    tick_finished(self, record, story)
    if self.done:
        timing = False


play._Stopwatch.start, play._Stopwatch.tick_finished = start_timing, stop_timing
stopwatch, frames = play._dashboard(config, scene, ticks)
total = stopwatch.cpu_seconds
print(f"{stopwatch.calls} calls, {total:.3f} s CPU, {stopwatch.wall_seconds:.3f} s wall, {frames} frames, {total / stopwatch.calls * 1e6:.2f} us a call")
print("asyncio callbacks: count, CPU s, share")
for name, (count, seconds) in sorted(callbacks.items(), key=lambda item: -item[1][1]):
    print(f"  {name:60s} {count:7d} {seconds:8.3f} {seconds / total:6.1%}")
covered = sum(seconds for _, seconds in callbacks.values())
print(f"  outside callbacks {total - covered:.3f} s ({(total - covered) / total:.1%})")
print("inside them:")
for name, (count, seconds) in sorted(inner.items(), key=lambda item: -item[1][1]):
    print(f"  {name:60s} {count:7d} {seconds:8.3f} {seconds / total:6.1%}")
for generation, (count, seconds) in sorted(collections_.items()):
    print(f"  the collector, generation {generation}: {count} passes, {seconds:.3f} s ({seconds / total:.1%})")
