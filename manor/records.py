"""What a run leaves behind: one record per call, one per tick. Data at rest (msgspec),
written to save files and read by every instrument."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["CallRecord", "StoryEntry", "TickRecord"]


class CallRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One model call, however it ended.

    ``admitted_at`` is when the gate let it through (for the legacy policy, which has no
    gate, when it started); ``None`` if it never was. ``reason`` is the degradation
    reason of a degraded call, ``None`` for an ok one; ``error`` says what failed, in
    the words of the layer or the server that failed it (``errors.error_line``). An
    ``invalid_output`` call keeps the answer it got in ``text``, and its tokens.
    ``refused_by`` tells, for a ``platform_rejected`` call, who refused it: Manor's own
    platform limiter (the call never reached the backend) or the server (it did, and
    answered 429).
    """

    tick: int
    ticket: int | None
    caller: str
    agent: str
    queued_at: float
    admitted_at: float | None
    finished_at: float
    outcome: Literal["ok", "degraded"]
    reason: str | None = None
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    #: Tries made (the legacy policy retries rejected character calls).
    attempts: int = 1
    #: What failed, one line ("" for an ok call). Added in save format 2.
    error: str = ""
    #: Who refused a ``platform_rejected`` call. Added in save format 2.
    refused_by: Literal["limiter", "server"] | None = None
    #: How many of the tries were repairs: asked again because an answer was not of
    #: the request's shape (``manor.answers``). Added in save format 3.
    repairs: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def latency(self) -> float:
        """Seconds from admission to the end (0 for a call never admitted)."""
        return 0.0 if self.admitted_at is None else self.finished_at - self.admitted_at


class TickRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One tick: its calls in planning order, and the world hash after applying them."""

    tick: int
    started_at: float
    finished_at: float
    calls: tuple[CallRecord, ...]
    world_hash: str

    @property
    def makespan(self) -> float:
        return self.finished_at - self.started_at


class StoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A line of the story. A degraded turn says so in ``fallback`` — never silently."""

    tick: int
    caller: str
    agent: str
    speaker: str
    text: str
    #: "idle", "speechless", "narration skipped", "stale summary" — or "" when ok.
    fallback: str = ""
    reason: str | None = None
