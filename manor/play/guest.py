"""A trio run hosted on the running asyncio loop: trio's guest mode, for Textual.

One thread, no locks. Trio code runs between the host's callbacks; host code reaches
into trio only through ``run_sync_soon`` (the trio token), because trio primitives
(an ``Event``, a ``CancelScope``) must be touched from inside the trio run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, final

import outcome
import trio

__all__ = ["GuestRun"]


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
        loop = asyncio.get_running_loop()
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
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
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

    def _finish(self, result: outcome.Outcome[Any]) -> None:
        assert self._done is not None
        if not self._done.done():
            self._done.set_result(result)
        self._on_done(result)
