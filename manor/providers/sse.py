"""Server-Sent Events, read from an httpx response: the framing both HTTP backends use."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable

import attrs

__all__ = ["SseEvent", "sse_events"]


@attrs.frozen
class SseEvent:
    """One dispatched event: its ``event:`` name ("message" when none) and its data."""

    name: str
    data: str


async def sse_events(lines: AsyncIterable[str]) -> AsyncGenerator[SseEvent, None]:
    """Group text lines into events, as the SSE spec says: ``event:`` and ``data:``
    fields, a blank line ends an event, lines starting with ``:`` are comments."""
    name = ""
    data: list[str] = []
    async for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(name or "message", "\n".join(data))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data:
        yield SseEvent(name or "message", "\n".join(data))
