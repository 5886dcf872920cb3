"""What a model call is made of: the request, and the events its stream yields.

A provider's ``invoke(request)`` returns a cold async stream of ``Event``: one
``Started``, any number of ``TextDelta``, then one ``Done`` holding the whole text and
the token usage. Through a layer stack, the call's listener first hears ``Admitted``
from the gate layer, which says when the call was queued and let through, then
``Opened`` from the platform layer as it opens a platform session, then the backend's
events — unless the call is made with ``Stack.answer`` (the tick loop's are): then the
listener hears the layers only and the backend may answer without streaming
(``Provider.answer``), ending exactly when the stream would — and last ``Released`` from
the gate layer as it frees the call's slot. These are msgspec Structs because they also
go into save files.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "Admitted",
    "Done",
    "Event",
    "Opened",
    "RateLimits",
    "Released",
    "Request",
    "Started",
    "TextDelta",
    "Usage",
]


class Request(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One model call as the tick loop planned it: who calls, for which agent, and what
    is asked. A world's ``plan`` returns them; the stack answers each with a ``Done``::

        Request(caller="character", agent="hobbes", tick=3, prompt="The gong sounds.")

    Attributes:
        caller: which kind of caller makes it: one its world declares
            (``World.callers``), as a plain string.
        agent: the agent whose model answers (an agent id of the scene).
        tick: the tick it belongs to.
        ticket: admission order at the gate; ``None`` means "in order of arrival".
        prompt: the text sent to the model.
        model: the model name the agent is configured with ("" = the backend's default).
        attempt: 0 for the first try; a retry of the same call counts up.
        shape: the shape of the answer, a msgspec Struct, or ``None`` for free text.
            The backend is asked for JSON of it; the tick loop validates the answer
            (``manor.answers``) and the world reads it with ``decode_answer``.
    """

    caller: str
    agent: str
    tick: int = 0
    ticket: int | None = None
    prompt: str = ""
    model: str = ""
    attempt: int = 0
    shape: type | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """The tokens one call used, as its backend counted them (``Done.usage``).

    >>> Usage(input_tokens=120, output_tokens=30).total_tokens
    150
    """

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class RateLimits(msgspec.Struct, frozen=True, kw_only=True):
    """What a server's rate headers said was left (``x-ratelimit-*``,
    ``anthropic-ratelimit-*``); ``None`` where they said nothing. An answer carries it
    (``Done.rates``), and so does a refusal (``SessionLimitError.rates``).

    Attributes:
        requests_remaining, tokens_remaining: left in the current window.
        requests_reset_s, tokens_reset_s: seconds until that window resets.
    """

    requests_remaining: int | None = None
    requests_reset_s: float | None = None
    tokens_remaining: int | None = None
    tokens_reset_s: float | None = None


class Admitted(msgspec.Struct, frozen=True, tag="admitted", kw_only=True):
    """The shared gate let the call through (from the gate layer, first)."""

    ticket: int
    queued_at: float
    admitted_at: float


class Opened(msgspec.Struct, frozen=True, tag="opened"):
    """The platform opened a session for the call (from the platform layer), now: the
    layer says it as it opens the session, so the time it is heard is the time it
    opened (a listener that wants it reads the clock; most listen to ``Admitted``)."""


class Released(msgspec.Struct, frozen=True, tag="released", kw_only=True):
    """The shared gate takes the call's slot back, at ``released_at`` (from the gate
    layer, last, just before it frees the slot): the call's end, as its record says.
    Stamped later, on the real clock, the end would fall after the admission the
    release makes, and a record would show more calls in flight than the gate allows."""

    released_at: float


class Started(msgspec.Struct, frozen=True, tag="started"):
    """The backend has begun answering."""


class TextDelta(msgspec.Struct, frozen=True, tag="delta"):
    """A piece of the answer, as it streams."""

    text: str


class Done(msgspec.Struct, frozen=True, tag="done", kw_only=True):
    """The whole answer and what it cost: the last event of a call's stream, and what a
    stack's ``call`` returns::

        Done(text="Hobbes bows.", usage=Usage(input_tokens=120, output_tokens=30))

    Attributes:
        cost: what the backend says the call cost (Claude Code's ``total_cost_usd``);
            ``None``: priced from its tokens (``cost.price_per_1k_tokens``).
        rates: what the server's rate headers said was left, when it sent them.
    """

    text: str
    usage: Usage = Usage()
    cost: float | None = None
    rates: RateLimits | None = None


Event = Admitted | Opened | Released | Started | TextDelta | Done
