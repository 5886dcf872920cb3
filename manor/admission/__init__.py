"""Admission: who may call the platform, and when.

    gate        the application tier: one gate every caller shares, queueing by ticket
    redis_gate  the same gate shared across processes and machines through Redis
    book        the ticket book both gates keep: tickets issued, arrived or withdrawn, permits released once
    lanes       the worlds' lines of tickets, taking turns at one gate
    tickets     dealing one gate's tickets to many tick loops, the same way every run
    limiter     the platform tier: the provider platform's own fail-fast session cap
"""

from .gate import Gate, GateStatistics, Permit, SharedGate, SharedPermit
from .limiter import Session, SessionLimiter, SessionLimiterStatistics

__all__ = ["Gate", "GateStatistics", "Permit", "Session", "SessionLimiter", "SessionLimiterStatistics", "SharedGate", "SharedPermit"]
