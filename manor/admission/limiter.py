"""The platform tier: the provider platform's own session cap, fail-fast."""

from __future__ import annotations

from typing import final

import attrs

from ..errors import SessionLimitError

__all__ = ["Session", "SessionLimiter", "SessionLimiterStatistics"]


@attrs.frozen
class SessionLimiterStatistics:
    """A snapshot of a ``SessionLimiter`` (``statistics()``): sessions open now, at
    most, opened in all, and refused."""

    limit: int
    in_use: int
    peak: int
    admitted: int
    rejected: int


@final
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class Session:
    """One open platform session, as ``SessionLimiter.try_acquire`` gives it; release
    it exactly once."""

    _limiter: SessionLimiter
    _released: bool = attrs.field(default=False, init=False)

    def release(self) -> None:
        if self._released:
            raise RuntimeError("session released twice")
        self._released = True
        self._limiter.close()


@final
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)  # no hook on the hot counters
class SessionLimiter:
    """A platform's hard session limit. When full it says so at once; it never queues.

    >>> from manor import SessionLimiter, SessionLimitError
    >>> platform = SessionLimiter(limit=1)
    >>> session = platform.try_acquire()
    >>> platform.try_acquire()
    Traceback (most recent call last):
      ...
    manor.errors.SessionLimitError: platform full: 1 of 1 sessions in use
    >>> session.release()
    >>> platform.statistics().rejected
    1

    Args:
        limit: sessions open at once; 0 means unlimited.
    """

    limit: int = attrs.field(validator=attrs.validators.ge(0))
    _in_use: int = attrs.field(default=0, init=False)
    _peak: int = attrs.field(default=0, init=False)
    _admitted: int = attrs.field(default=0, init=False)
    _rejected: int = attrs.field(default=0, init=False)

    def try_acquire(self) -> Session:
        """Open a session now.

        Raises:
            SessionLimitError: the platform is full.
        """
        self.open()
        return Session(self)

    def open(self) -> None:
        """Open a session now, for a caller that closes it (``close``) exactly once
        itself, in a ``finally``: ``try_acquire`` without the ``Session`` that makes
        sure of it (the platform layer opens one for every call).

        Raises:
            SessionLimitError: the platform is full.
        """
        if self.limit and self._in_use >= self.limit:
            self._rejected += 1
            raise SessionLimitError(f"platform full: {self._in_use} of {self.limit} sessions in use", refused_by="limiter")
        self._in_use += 1
        self._admitted += 1
        if self._in_use > self._peak:
            self._peak = self._in_use

    def close(self) -> None:
        """A session ``open``-ed is closed."""
        self._in_use -= 1

    def statistics(self) -> SessionLimiterStatistics:
        return SessionLimiterStatistics(
            limit=self.limit,
            in_use=self._in_use,
            peak=self._peak,
            admitted=self._admitted,
            rejected=self._rejected,
        )
