"""The signals that quit the dashboard, acted on even while its loop cannot act.

asyncio's own signal handlers (``loop.add_signal_handler``) only wake the loop: a loop
stuck inside a callback — a frame waiting on a terminal nobody reads — never runs them,
and the process ignores SIGTERM for as long as it is stuck. Python's handlers run in the
main thread whatever it waits on (a lock's wait is interrupted for them), so the
dashboard takes the signals with those: the first asks the loop to quit
(``call_soon_threadsafe``), and if the process has not ended ``STUCK_AFTER_S`` later
and its loop does not answer within ``ANSWER_S``, it is ended without the loop
(``interrupts.end_process``): the terminal put back (``put_back``), one line, 128 + the
signal, the save holding every tick it had written. A loop that answers is quitting (an engine's cleanup — remote runs
cancelled — may take a while): it is asked again ``STUCK_AFTER_S`` later. A second signal ends it at once, unless it is
the first sent again (``interrupts.REPEAT_GRACE_S``), as for the other commands.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, final

import attrs

from ..run import interrupts

__all__ = ["ANSWER_S", "SIGNALS", "STUCK_AFTER_S", "StopSignals"]

#: The signals that quit the dashboard: the commands' (SIGINT, SIGTERM) and its
#: terminal's hang-up.
SIGNALS = (*interrupts.SIGNALS, signal.SIGHUP)
#: Seconds the dashboard has to end after a signal before the process is ended without
#: it: ample for a quit (the engine cancelled, the save closed), short for a user.
STUCK_AFTER_S = 5.0
#: Seconds a loop has to run a callback before it is taken to be stuck: one waiting
#: inside a frame never does; a busy one, on a loaded machine, within a fraction of it.
ANSWER_S = 2.0


@final
@attrs.define(eq=False)
class StopSignals:
    """Python's handlers for ``SIGNALS`` while a dashboard runs (``take``, ``give_back``).

    Args:
        quit: called in the loop with the first signal: quit as ``q`` does.
        after: what the run had done, to end the line with when the process is ended
            without the loop (see ``interrupts.Interrupted``).
        watch: end the process if it has not ended ``STUCK_AFTER_S`` after the first
            signal and its loop is stuck (only where the dashboard owns the process,
            not in a test's).
        put_back: called, from any thread, just before the process is ended without
            the loop: the terminal as it was before the dashboard.
    """

    quit: Callable[[int], None]
    after: Callable[[], str]
    watch: bool
    put_back: Callable[[], None]
    _loop: asyncio.AbstractEventLoop | None = attrs.field(init=False, default=None)
    _previous: dict[int, Any] = attrs.field(init=False, factory=dict)
    _first: tuple[int, float] | None = attrs.field(init=False, default=None)
    _timer: threading.Timer | None = attrs.field(init=False, default=None)
    _disarmed: bool = attrs.field(init=False, default=False)

    def take(self) -> None:
        """Handle the signals not ignored (a SIGHUP ignored under ``nohup`` stays so),
        from the running loop's thread; none outside the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._loop = asyncio.get_running_loop()
        for signum in SIGNALS:
            previous = signal.getsignal(signum)
            if previous is not signal.SIG_IGN:
                self._previous[signum] = signal.signal(signum, self._handle)

    def give_back(self) -> None:
        """The handlers the signals had before ``take``."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def disarm(self) -> None:
        """The dashboard has ended: no need to end the process without it."""
        self._disarmed = True
        if self._timer is not None:
            self._timer.cancel()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._first is None:
            self._first = (signum, time.monotonic())
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self.quit, signum)
            if self.watch:
                self._arm(signum)
            return
        if not interrupts.repeated(signum, *self._first):
            self.put_back()
            interrupts.exit_now(signum)

    def _arm(self, signum: int) -> None:
        if not self._disarmed:
            self._timer = threading.Timer(STUCK_AFTER_S, self._look, (signum,))
            self._timer.daemon = True
            self._timer.start()

    def _look(self, signum: int) -> None:
        """In the timer's thread: end the process if its loop is stuck, else look again later."""
        answered = threading.Event()
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(answered.set)
        except RuntimeError:
            pass  # the loop has closed, and the process is still here
        if answered.wait(ANSWER_S):
            self._arm(signum)
        elif not self._disarmed:
            self._end(signum)

    def _end(self, signum: int) -> None:
        stopped = interrupts.Interrupted(signum, self.after())
        line = f"{stopped.line()} (the dashboard was stuck: stopped without cleaning up)"
        self.put_back()
        interrupts.end_process(line, stopped.exit_status)
