"""A trio run hosted on the running asyncio loop: trio's guest mode, for Textual.

One thread, no locks. Trio code runs between the host's callbacks; host code reaches
into trio only through ``run_sync_soon`` (the trio token), because trio primitives
(an ``Event``, a ``CancelScope``) must be touched from inside the trio run.

Trio hands the host one step at a time (a step: its ready tasks run once). A step that
makes the next one ready runs it at once, in the same host callback, while the host has
nothing ready of its own and for at most ``SLICE_S``: a turn of asyncio's loop between
two steps (a ``select`` system call, a handle) costs more than the host's share of a
step of a busy run, and nothing is waiting for it. Those steps are taken inside trio's
guest tick, as ``trio.run`` takes them (``_drain``): a guest tick a step cost 45 % more
than the step. The run keeps the time it spent
stepping and the time the host kept it waiting while it had a task ready, so that the
host can tell what its own work costs the run (``FrameBudget``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator, Sized
from functools import partial
from typing import Any, final

import outcome
import trio

__all__ = ["GuestRun"]

#: Waits for the host shorter than this are its loop's own turn between two steps, which
#: no host can spare the run; longer ones are the host's work (a frame drawn).
HELD_FLOOR_S = 0.001
#: The longest a run of steps goes on in one host callback: keys and timers, which the
#: host's loop polls for between callbacks, wait at most this long for a busy run.
SLICE_S = 0.001


@final
class GuestRun:
    """One trio run on the current asyncio loop, cancellable, with its end awaitable.

    Args:
        on_done: called on the host loop with the run's outcome when it ends.
    """

    def __init__(self, on_done: Callable[[outcome.Outcome[Any]], object] = lambda result: None) -> None:
        self._on_done = on_done
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        # Calls asked for before the run reached its first line; made once it does.
        self._early: list[Callable[[], object]] = []
        self._done: asyncio.Future[outcome.Outcome[Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Wall seconds the run has spent stepping, and held: waiting, a task ready, for
        #: the host to finish something else (waits under ``HELD_FLOOR_S`` not counted).
        self.step_seconds = 0.0
        self.held_seconds = 0.0
        # Since when the next step is ready (None: the run waits for a timer or I/O).
        self._ready_since: float | None = None
        self._stepping = False
        # While stepping: until when the next step may follow at once, and that step.
        self._slice_ends = 0.0
        self._next: Callable[[], object] | None = None
        # The host loop's ready callbacks (asyncio's own deque): a step waits its turn
        # behind them. A loop without one gets one host callback a step.
        self._host_ready: Sized | None = None
        # Whether trio's steps are drained (``_drain``), tried at the first step.
        self._draining = False

    @property
    def started(self) -> bool:
        return self._done is not None

    @property
    def finished(self) -> bool:
        return self._done is not None and self._done.done()

    @property
    def result(self) -> outcome.Outcome[Any] | None:
        """The outcome, once finished."""
        return self._done.result() if self.finished and self._done is not None else None

    def start(self, async_fn: Callable[[], Awaitable[Any]], *, clock: trio.abc.Clock | None = None) -> None:
        """Start ``async_fn`` in a guest trio run on the running asyncio loop.

        Raises:
            RuntimeError: already started, or no asyncio loop is running.
        """
        if self._done is not None:
            raise RuntimeError("this guest run was already started")
        loop = self._loop = asyncio.get_running_loop()
        self._host_ready = getattr(loop, "_ready", None)
        self._done = loop.create_future()

        async def main() -> Any:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as self._scope:
                for fn in self._early:
                    fn()
                self._early.clear()
                return await async_fn()

        trio.lowlevel.start_guest_run(
            main,
            run_sync_soon_threadsafe=partial(loop.call_soon_threadsafe, self._step),
            run_sync_soon_not_threadsafe=self._step_at_once,
            done_callback=self._finish,
            clock=clock,
            # asyncio wakes its loop for a signal through signal.set_wakeup_fd (the
            # app's SIGTERM handler): trio must not take the wakeup fd over.
            host_uses_signal_set_wakeup_fd=True,
        )

    def run_sync_soon(self, fn: Callable[[], object]) -> bool:
        """Call ``fn()`` inside the trio run, soon. False if the run has ended."""
        if self._token is None:
            if self.finished:
                return False
            self._early.append(fn)
            return True
        try:
            self._token.run_sync_soon(fn)
        except trio.RunFinishedError:
            return False
        return True

    def cancel(self) -> None:
        """Cancel the run (it then finishes normally, its ``finally`` blocks run)."""
        self.run_sync_soon(self._cancel_scope)

    async def wait(self) -> outcome.Outcome[Any]:
        """Wait for the run to end; its outcome.

        Raises:
            RuntimeError: the run was never started.
        """
        if self._done is None:
            raise RuntimeError("this guest run was never started")
        return await asyncio.shield(self._done)

    def _cancel_scope(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    # -- the run's steps: trio hands each to the host -------------------------------------

    @property
    def waiting(self) -> bool:
        """Whether the run waits for a timer or I/O (or has ended): no task is ready, so
        the host's work costs it nothing now."""
        return self._ready_since is None and not self._stepping

    def _step_at_once(self, step: Callable[[], object]) -> None:
        """Schedule a step the one before made ready (the run has a task to run): run
        it next in this host callback while the slice lasts and the host has nothing
        ready, else in a callback of its own. (Drained, trio asks this only when its
        guest tick stopped draining: at a slice's end, or when the host has something
        ready — or, rarely, when I/O came in as the run was about to wait.)"""
        assert self._loop is not None
        if not self._draining:
            self._draining = True
            _drain(step, self._go_on)
        if self._stepping and self._go_on():
            self._next = step
            return
        self._ready_since = time.perf_counter()
        self._loop.call_soon(self._step, step)

    def _go_on(self) -> bool:
        """Whether the run may take its next step in the host callback under way: the
        slice lasts and the host has nothing ready."""
        host_ready = self._host_ready
        return host_ready is not None and not host_ready and time.perf_counter() < self._slice_ends

    def _step(self, step: Callable[[], object]) -> None:
        # A step the host has anything ready behind (a key's next message hop, a
        # frame) waits its turn: a key costs the few hops Textual makes, each behind
        # one step, not behind a slice of them.
        # perf_counter, not thread_time (a system call): the host compares wall times.
        started = time.perf_counter()
        if self._ready_since is not None and started - self._ready_since > HELD_FLOOR_S:
            self.held_seconds += started - self._ready_since
        self._ready_since = None
        self._stepping = True
        self._slice_ends = started + SLICE_S
        next_step: Callable[[], object] | None = step
        try:
            while next_step is not None:
                next_step()
                next_step, self._next = self._next, None
        finally:
            self._stepping = False
            if self._next is not None:  # a step failed after readying the next one
                self._loop.call_soon(self._step, self._next)  # type: ignore[union-attr]
                self._next = None
        self.step_seconds += time.perf_counter() - started

    def _finish(self, result: outcome.Outcome[Any]) -> None:
        assert self._done is not None
        if not self._done.done():
            self._done.set_result(result)
        self._on_done(result)


def _drain(guest_tick: Callable[[], object], go_on: Callable[[], bool]) -> None:
    """Let trio's guest run take the steps that follow at once inside one of its guest
    ticks, while ``go_on()`` says so.

    Trio's guest tick takes one step of its run loop (a batch of ready tasks), then
    asks the host to call it again: a callback a step, each setting sniffio's name,
    wrapping the events in an ``Outcome`` and back — 45 % more instructions a step than
    ``trio.run`` (benchmarks/notes/dashboard.md). The run loop is a generator trio's
    guest state keeps (``unrolled_run_gen``); wrapped in ``_drained``, a guest tick runs
    steps as ``trio.run`` does while the next is ready at once. Trio's own guest tick
    still takes every step that waits (for a timer or I/O, in its thread). A trio whose
    guest state is not what this expects is left as it is (one step a tick).
    """
    state = getattr(guest_tick, "__self__", None)
    run = getattr(state, "unrolled_run_gen", None)
    get_events = getattr(getattr(getattr(state, "runner", None), "io_manager", None), "get_events", None)
    if not isinstance(run, Generator) or get_events is None:
        return
    drained = _drained(run, get_events, go_on)
    next(drained)
    state.unrolled_run_gen = drained  # type: ignore[union-attr]


def _drained(run: Generator[float, Any, None], get_events: Callable[[float], Any], go_on: Callable[[], bool]) -> Generator[float, Any, None]:
    """Trio's run loop ``run``, each step sent on to it, followed by the steps ready at
    once while ``go_on()``: what ``trio.run`` does between two steps (the I/O events
    polled without waiting, sent in), without handing back to the guest tick. Yields
    (once primed) what ``run`` yields when the next step is not ready, or ``go_on()``
    says stop; what is thrown in is thrown on."""
    timeout = 0.0
    while True:
        try:
            try:
                events = yield timeout
            except GeneratorExit:
                run.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - trio's own, thrown on
                timeout = run.throw(exc)
            else:
                timeout = run.send(events)
            while go_on():
                try:
                    events = get_events(0)
                except BaseException as exc:  # noqa: BLE001 - as trio's guest tick throws it
                    timeout = run.throw(exc)
                    continue
                if timeout > 0 and not events:
                    break  # the run waits: trio's guest tick polls again and waits
                timeout = run.send(events)
        except StopIteration:
            return
