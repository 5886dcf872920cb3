"""Ctrl-C and SIGTERM: a command stops cleanly, says so in one line, exits 128 + the signal.

While a command's trio run is under way (``run``), SIGINT and SIGTERM cancel it: every
``finally`` runs, so a save writer closes its file with an end frame and a remote agent's
run is cancelled by its shielded request, and then ``Interrupted`` is raised with what the
command had done by then. Every trio run of Manor's commands goes through ``run`` (the
tick loop's, a replay's, a benchmark's, the experiment's). Outside such a run — before it
starts, after it ends, or inside a trio run some other code starts — SIGTERM is made to act as
Ctrl-C does there (``sigterm_as_interrupt``): trio's own handler, or Python's
``KeyboardInterrupt``. Either way ``manor.cli.main`` reports one line.

A second signal while the first is being handled (a cleanup stuck on a remote server)
ends the process at once: the save keeps every tick written so far, as after ``kill -9``.
Not the same signal again within ``REPEAT_GRACE_S`` of the first, though: that is one
request sent twice (``timeout -s TERM`` signals the process, then its process group), not
someone who will not wait. Ctrl-C pressed twice by a hand is never that quick.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from ..errors import SaveError, leaves
from ..wording import counted
from . import startup

if TYPE_CHECKING:
    import trio

__all__ = [
    "REPEAT_GRACE_S", "SIGNALS", "Interrupted", "Kept", "end_process", "exit_now", "exit_status", "held", "listened", "lost_interrupts_kept", "ran", "repeated", "run", "signal_received", "sigterm_as_interrupt",
    "stopped_as_interrupted",
    "unawaited_coroutines_held", "write_without_waiting",
]  # fmt: skip


class Kept(Protocol):
    """Where a stopped run's ticks are kept, as the line that reports the stop tells it
    (``manor.saves.SaveWriter`` is one)."""

    path: object
    #: Whole ticks kept so far.
    ticks: int

    def check(self) -> None:
        """Raise ``SaveError`` if what was kept cannot be read back."""


T = TypeVar("T")

#: The signals that stop a command.
SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Seconds after a signal in which the same signal again is the same request, sent
#: twice (``timeout``, a supervisor signalling a process group), and does not cut the
#: cleanup short. SIGTERM comes from tools; SIGINT is a hand's, but ``timeout -s INT``
#: sends it twice too, microseconds apart. SIGHUP (the dashboard's: ``manor.play``)
#: comes from a terminal's end to a whole process group.
REPEAT_GRACE_S = {signal.SIGINT: 0.05, signal.SIGTERM: 1.0, signal.SIGHUP: 1.0}

#: The last SIGTERM that reached ``sigterm_as_interrupt``'s handler in this command, so
#: a ``KeyboardInterrupt`` it caused is reported as SIGTERM, and one that was lost is
#: still acted on (``run``).
_last_signal: int | None = None


#: What a line says stopped a command, by signal (SIGINT: "interrupted"). SIGHUP stops
#: only the dashboard (``manor.play``), whose terminal it is.
_WORDS = {signal.SIGTERM: "terminated", signal.SIGHUP: "the terminal hung up"}


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the command.

    Args:
        signum: the signal.
        after: what the command had done by then, to end the line with (e.g.
            ``after 12 ticks; saved to s.msav``); "" when there is nothing to say.
    """

    def __init__(self, signum: int, after: str = "") -> None:
        super().__init__(signum, after)
        self.signum = signum
        self.after = after

    @property
    def exit_status(self) -> int:
        return exit_status(self.signum)

    @property
    def signal_name(self) -> str:
        """``SIGINT`` or ``SIGTERM``, as a command's figures say what stopped it."""
        return signal.Signals(self.signum).name

    def line(self) -> str:
        """The one line the command ends with."""
        return f"manor: {_WORDS.get(self.signum, 'interrupted')} {self.after}".rstrip()


def exit_status(signum: int) -> int:
    """The exit status of a command ``signum`` stopped: 128 + its number, as a shell
    reports a process the signal ended."""
    return 128 + signum


def ran(ticks: int, writer: Kept | None) -> str:
    """What a stopped run had done, for ``Interrupted``: ``after 12 ticks; saved to s.msav``."""
    done = f"after {counted(ticks, 'tick')}"
    if writer is None:
        return done
    try:
        writer.check()
    except SaveError as exc:
        return f"{done}; {exc}"
    if not writer.ticks:
        return f"{done}; {writer.path} holds no whole tick"
    return f"{done}; saved to {writer.path}"


def listened() -> list[int]:
    """The stopping signals not ignored: one ignored when Manor started (SIGINT, in a
    script's background job) stays ignored. None outside the main thread, where
    signals cannot be handled (the main thread's handlers stay as they are)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    return [signum for signum in SIGNALS if signal.getsignal(signum) is not signal.SIG_IGN]


def run(
    async_fn: Callable[..., Awaitable[T]],
    *args: Any,
    clock: trio.abc.Clock | None = None,
    after: Callable[[], str] = lambda: "",
) -> T:
    """``trio.run(async_fn, *args)``, stopped by SIGINT or SIGTERM.

    The first signal cancels ``async_fn`` (its ``finally`` blocks and shielded cleanup
    run); once the run has ended, ``Interrupted`` is raised. A second signal ends the
    process at once.

    Args:
        clock: the trio clock (``None``: real time).
        after: called once the run has ended after a signal; what the command had done
            by then (see ``Interrupted``).

    Raises:
        Interrupted: a signal stopped the run, or a SIGTERM had come before it (its
            ``KeyboardInterrupt`` lost: ``sigterm_as_interrupt``), which stops it at once.
    """
    import trio  # here, not above: the command line imports this module before it knows whether it runs anything

    received: list[int] = []
    signums = listened()

    async def main() -> T | None:
        if not signums:
            return await async_fn(*args)
        work, watch, watched = trio.CancelScope(), trio.CancelScope(), trio.Event()
        with trio.open_signal_receiver(*signums) as signals:
            # A system task, not a nursery: an error of async_fn comes out as itself,
            # not in an exception group.
            trio.lowlevel.spawn_system_task(_stop_on_signal, signals, work, watch, received, watched, name="manor: stop on a signal")
            try:
                if _last_signal is not None:
                    # A SIGTERM came before this run and the command went on: its
                    # KeyboardInterrupt was lost on the way (``sigterm_as_interrupt``).
                    received.append(_last_signal)
                    return None
                with work:
                    return await async_fn(*args)
            finally:
                # The watcher ends before the receiver closes: one woken by a signal as
                # the work ended would take it from a closed receiver (a KeyError in trio,
                # its system task crashed: an internal error), and the receiver would
                # raise it again as KeyboardInterrupt.
                watch.cancel()
                with trio.CancelScope(shield=True):
                    await watched.wait()
        return None

    try:
        result = trio.run(main, clock=clock)
    except BaseExceptionGroup as group:
        # A signal in the instant before the receiver opened: trio raised it as a
        # KeyboardInterrupt in whichever task it reached, inside a nursery's group.
        if all(isinstance(leaf, KeyboardInterrupt) for leaf in leaves(group)):
            raise Interrupted(signal_received(), after()) from None
        raise
    except KeyboardInterrupt:
        raise Interrupted(signal_received(), after()) from None
    except Exception:
        if received:
            # What the work raised as the signal cancelled it (the Redis client turns a
            # handshake cancelled into a ConnectionError): the signal stopped it.
            raise Interrupted(received[0], after()) from None
        raise
    if received:
        raise Interrupted(received[0], after())
    return result  # type: ignore[return-value]  # not cancelled: async_fn returned it


@contextmanager
def stopped_as_interrupted(after: Callable[[], str], close: Callable[[], None] = lambda: None) -> Iterator[None]:
    """The part of a command around its trio run (``run``): a signal that reaches it
    outside that run — before the run took the signals, or after it gave them back —
    ends as ``Interrupted`` too, saying ``after()``. ``close`` first closes what the run
    would have closed as it ended (a save's end frame: closing twice writes nothing more).
    """
    try:
        yield
    except KeyboardInterrupt as exc:
        close()
        if isinstance(exc, Interrupted):
            raise
        raise Interrupted(signal_received(), after()) from None


async def _stop_on_signal(
    signals: AsyncIterator[int], work: trio.CancelScope, watch: trio.CancelScope, received: list[int], watched: trio.Event
) -> None:
    """Cancel ``work`` at the first signal; exit the process at the second (the user
    does not want to wait for the cleanup), unless it is the first one sent again
    (``REPEAT_GRACE_S``). Stops when ``watch`` is cancelled, and then sets ``watched``."""
    try:
        with watch:
            if watch.cancel_called:
                return  # the run ended before this task first ran
            first_at = 0.0
            async for signum in signals:
                if received:
                    if repeated(signum, received[0], first_at):
                        continue
                    exit_now(signum)
                received.append(signum)
                first_at = time.monotonic()
                work.cancel()
    finally:
        watched.set()


def repeated(signum: int, first: int, first_at: float) -> bool:
    """Whether ``signum``, after the first signal ``first`` at ``first_at``
    (``time.monotonic``: real time, whatever a run's clock, the signals are the world's),
    is the first sent again within its grace (``REPEAT_GRACE_S``): the same request, not
    a second that ends the process at once."""
    return signum == first and time.monotonic() - first_at <= REPEAT_GRACE_S[signal.Signals(signum)]


def exit_now(signum: int) -> None:
    """A second signal (not the first again, ``repeated``): the process ends at once,
    before its cleanup is done, saying so (``end_process``)."""
    end_process(f"{Interrupted(signum).line()} again; stopped without cleaning up", exit_status(signum))


def end_process(line: str, status: int) -> NoReturn:
    """End the process at once with ``status``, after ``line`` on stderr if it can be
    written without waiting: a stderr nobody reads (a full pipe, a terminal stopped by
    Ctrl-S) loses the line, not the exit. What a save had written stays, as after
    ``kill -9``: each tick is flushed as it ends."""
    try:
        write_without_waiting(2, f"{line}\n".encode())  # the process's stderr, not a test's capture
    finally:
        os._exit(status)


def write_without_waiting(fd: int, data: bytes) -> None:
    """``data`` to ``fd`` if it can be written at once; else (full, or gone) nothing."""
    try:
        blocking = os.get_blocking(fd)
    except OSError:
        return  # closed
    # The flag is the open file's, shared with whoever else has it (a shell): put back.
    os.set_blocking(fd, False)
    try:
        os.write(fd, data)
    except OSError:
        pass  # full (BlockingIOError), or gone
    finally:
        os.set_blocking(fd, blocking)


@contextmanager
def held() -> Iterator[None]:
    """Within: a stopping signal (SIGINT, SIGTERM) is noted, not acted on, and raised
    again on leaving — for a few statements that must not be cut in half, so that the
    code that reports a signal finds them done (a save's file made and its header
    written, and its writer there to close it).

    The handlers are Python's (they run in the main thread whichever thread the system
    hands the signal to; blocking it in one thread would not hold it in a process with
    others). A signal ignored stays ignored. A no-op outside the main thread, where
    handlers cannot be set.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    replaced = {}
    for signum in SIGNALS:
        handler = signal.getsignal(signum)
        if handler is not None and handler is not signal.SIG_IGN:
            replaced[signum] = signal.signal(signum, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        for signum, handler in replaced.items():
            signal.signal(signum, handler)
        if noted:
            signal.raise_signal(noted[0])  # to its own handler again, now


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM does what SIGINT does at that moment (Python's
    ``KeyboardInterrupt``, or trio's handler inside a trio run), and ``signal_received``
    remembers it. A no-op outside the main thread, where signals cannot be handled, and
    when SIGTERM was ignored when Manor started.

    A ``KeyboardInterrupt`` raised where the signal happens to land can be lost: inside
    a finalizer (``__del__``, a generator closed by the collector) Python prints it and
    goes on, and a library may catch it or turn it into an error of its own. Remembered,
    the SIGTERM is not lost with it: the command's next trio run (``run``) stops at its
    start. A fleet's parent signals each process once and waits; a process that lost
    it waited for the word to start, for ever."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield
        return
    global _last_signal
    _last_signal = None
    previous = signal.signal(signal.SIGTERM, _as_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _last_signal = None  # this command's: a run started after it ends has not had it


def _as_sigint(signum: int, frame: FrameType | None) -> None:
    global _last_signal
    _last_signal = signum
    handler = signal.getsignal(signal.SIGINT)
    if handler is startup.stop_at_once:
        # The command's first or last moments (``startup.handed_over`` has not taken
        # SIGINT yet, or has given it back): the process ends now, as this signal's. Told
        # it was SIGINT, it said "interrupted" and 130 for a SIGTERM.
        handler(signum, frame)
    elif callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def signal_received() -> int:
    """The signal behind a ``KeyboardInterrupt`` that reached the top: SIGTERM if
    ``sigterm_as_interrupt``'s handler ran, else SIGINT."""
    return _last_signal or signal.SIGINT


@contextmanager
def lost_interrupts_kept() -> Iterator[None]:
    """Within: a ``KeyboardInterrupt`` raised inside a finalizer (a ``__del__``, a
    generator the collector closes: a Ctrl-C, or a SIGTERM ``sigterm_as_interrupt``
    turned into one, landing there) is not printed ("Exception ignored in: ...", a
    traceback where one line is due) and not lost: Python hands it to
    ``sys.unraisablehook`` and goes on, and here it is remembered as a SIGTERM's is, so
    that the command's next trio run (``run``) stops at its start. (Raised again at
    once, it would be raised in the hook, printed and lost all the same.) Anything
    else unraisable goes to the hook that was there before."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            _keep_lost_interrupt()
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _keep_lost_interrupt() -> None:
    """A ``KeyboardInterrupt`` a finalizer swallowed: its signal remembered (SIGTERM's
    is already, by ``sigterm_as_interrupt``'s handler), for ``run`` to act on."""
    global _last_signal
    _last_signal = _last_signal or signal.SIGINT


@contextmanager
def unawaited_coroutines_held() -> Iterator[Callable[[], None]]:
    """Within: "coroutine ... was never awaited" warnings are held back, and shown on
    leaving unless the function yielded was called to forget them.

    A ``KeyboardInterrupt`` that trio raises straight into running code (in a trio run
    this module does not start) can land between making a coroutine and awaiting it:
    that warning is the interrupt's doing, not a bug, and would break its one line.
    """
    held: list[warnings.WarningMessage] = []
    show = warnings.showwarning

    def hold(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
        if issubclass(category, RuntimeWarning) and "was never awaited" in str(message):
            held.append(warnings.WarningMessage(message, category, filename, lineno, file, line))
        else:
            show(message, category, filename, lineno, file, line)

    def forget() -> None:
        gc.collect()  # finalise the coroutines the interrupt left behind, while held
        held.clear()

    warnings.showwarning = hold
    try:
        yield forget
    finally:
        warnings.showwarning = show
        for warning in held:
            show(warning.message, warning.category, warning.filename, warning.lineno, warning.file, warning.line)
