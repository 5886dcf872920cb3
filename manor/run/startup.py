"""The first moments of the ``manor`` command, before its modules are imported.

Importing Manor (trio, Rich, Textual, msgspec...) takes most of a second, longer on a
loaded machine. A Ctrl-C in that time would print Python's ``KeyboardInterrupt``
traceback, and a SIGTERM would end the process without a word. So, first thing when
Manor is started as the command, both signals are made to end it at once with the one
line and the exit status of ``manor.run.interrupts`` (130, 143): nothing has been written
yet, there is nothing to clean up. ``manor.cli.main`` takes them over (``handed_over``)
as soon as it runs.

Only the command does this: a program that imports Manor keeps its own handlers. Only
stdlib here, so that this runs before anything slow is imported.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["handed_over", "stop_at_once", "stop_at_once_if_command"]

_LINES = {signal.SIGINT: "manor: interrupted", signal.SIGTERM: "manor: terminated"}


def stop_at_once_if_command() -> None:
    """When this process is the ``manor`` command (``manor ...`` or ``python -m manor``),
    let SIGINT and SIGTERM end it at once, in one line. A signal ignored when the
    process started (a background job's SIGINT) stays ignored."""
    if not _started_as_command():
        return
    for signum in _LINES:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, stop_at_once)


def _started_as_command() -> bool:
    arguments = getattr(sys, "orig_argv", [])
    if any(first == "-m" and then == "manor" for first, then in zip(arguments, arguments[1:])):
        return True  # ``python [-X ...] -m manor``
    # The console script: ``python .../bin/manor ARGS``, whose first line imports us.
    script = sys.argv[0] if sys.argv else ""
    return os.path.basename(script) == "manor" and getattr(sys.modules.get("__main__"), "__file__", None) == script


def stop_at_once(signum: int, frame: FrameType | None) -> None:
    """The start-up's handler: end the process now, in the line of ``signum``."""
    try:
        os.write(2, f"{_LINES[signal.Signals(signum)]}\n".encode())
    finally:
        os._exit(128 + signum)


@contextmanager
def handed_over() -> Iterator[None]:
    """Within: SIGINT raises ``KeyboardInterrupt`` again (Python's own handler), for a
    command's clean stop (``manor.run.interrupts``), if ``stop_at_once_if_command`` had it;
    on leaving, the start-up handler has it back (what is left has nothing to clean)."""
    if signal.getsignal(signal.SIGINT) is not stop_at_once:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, stop_at_once)
