"""The dashboard's terminal: Textual's Linux driver, made to notice a terminal that has gone.

A terminal can go without a SIGHUP: a pseudo-terminal whose other side a killed program
closed, a session started apart from its terminal (``setsid``, ``nohup``), a stderr pipe
whose reader died (Textual draws on stderr). Textual's driver is not made for that: its
writer thread dies on the first write that fails, leaving its queue to fill, and the next
frame then blocks the app's loop for ever — signals included, since asyncio acts on them
in that loop; and its input thread spins, reading nothing from a terminal that hung up.

``TerminalDriver`` drops what cannot be written (the writer thread lives, the loop never
waits on it) and looks for a hang-up of its input once a second; either way it posts
``TerminalLost`` to the app once, which quits as on SIGHUP. And a process ended without
its loop (``StopSignals``: a second signal, a stuck loop) puts the terminal back first
(``put_back_at_once``), where Textual's own way out would have run in the loop: else the
user's shell is left on the dashboard's screen, its keys not echoed.
"""

from __future__ import annotations

import asyncio
import select
import termios
from collections.abc import Callable
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver

from ..run import interrupts
from .messages import TerminalLost

__all__ = ["HANGUP_CHECK_S", "PUT_BACK", "TerminalDriver"]

#: Seconds between two looks for a hang-up of the terminal's input.
HANGUP_CHECK_S = 1.0

#: What Textual's way out writes to put the terminal back (``LinuxDriver``'s
#: ``stop_application_mode`` and what it calls), in one write: mouse reports, bracketed
#: paste, resize reports, the Kitty keyboard protocol and focus reports off, line wrap
#: on, the alternate screen left, the cursor shown.
PUT_BACK = (
    b"\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?2048l\x1b[?7h"
    b"\x1b[<u\x1b[?1049l\x1b[?25h\x1b[?1004l"
)


class TerminalDriver(LinuxDriver):
    """Textual's Linux driver, posting ``TerminalLost`` to its app once when the terminal
    cannot be written to, or its input hung up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        assert self._file is not None  # Textual's: sys.__stderr__
        self._file = _DroppingOutput(self._file, self._lost)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._hangup_check: asyncio.TimerHandle | None = None
        self._reported = False

    def start_application_mode(self) -> None:
        # Before the writer thread starts (in Textual's method): its failure is reported
        # through the loop.
        self._loop = asyncio.get_running_loop()
        super().start_application_mode()
        self._hangup_check = self._loop.call_later(HANGUP_CHECK_S, self._check_hangup)

    def stop_application_mode(self) -> None:
        if self._hangup_check is not None:
            self._hangup_check.cancel()
            self._hangup_check = None
        super().stop_application_mode()

    def put_back_at_once(self) -> None:
        """The terminal as the dashboard found it — its modes (echo, lines), and the
        screen it had — from any thread, waiting on nothing: for a process about to end
        without its loop. (A terminal nobody reads loses the screen's part, as it
        would lose anything else.)"""
        if self.attrs_before is not None:
            try:
                termios.tcsetattr(self.fileno, termios.TCSANOW, self.attrs_before)
            except termios.error:
                pass
        assert self._file is not None
        interrupts.write_without_waiting(self._file.fileno(), PUT_BACK)

    def _check_hangup(self) -> None:
        poll = select.poll()
        poll.register(self.fileno, select.POLLIN)
        if any(events & select.POLLHUP for _, events in poll.poll(0)):
            self._lost("its input hung up")
            return
        assert self._loop is not None
        self._hangup_check = self._loop.call_later(HANGUP_CHECK_S, self._check_hangup)

    def _lost(self, why: str) -> None:
        """Tell the app, once; from any thread (the writer thread's failures)."""
        if self._reported or self._loop is None:
            return
        self._reported = True
        try:
            self._loop.call_soon_threadsafe(self._app.post_message, TerminalLost(why))
        except RuntimeError:
            pass  # the loop has closed: the app has ended already


class _DroppingOutput:
    """The file the driver's writer thread writes to: after a write or flush fails, what
    comes is dropped, and ``lost`` hears of the failure (once)."""

    def __init__(self, file: IO[str], lost: Callable[[str], None]) -> None:
        self._file = file
        self._lost = lost
        self._failed = False

    def write(self, text: str) -> None:
        if not self._failed:
            self._try(self._file.write, text)

    def flush(self) -> None:
        if not self._failed:
            self._try(self._file.flush)

    def _try(self, action: Any, *args: Any) -> None:
        try:
            action(*args)
        except (OSError, ValueError) as exc:  # EIO, EPIPE; ValueError: the file was closed
            self._failed = True
            self._lost(f"writing to it failed: {getattr(exc, 'strerror', None) or exc}")

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return self._file.isatty()

    def __getattr__(self, name: str) -> Any:
        # Anything else Textual asks of the file (its encoding, say) is the file's.
        return getattr(self._file, name)
