"""Directives: how a test or demo tells ``manor serve-agent`` how to treat one request.

A message may carry words of the form ``@name`` or ``@name=value``; they are taken out of
the message before the agent "answers" it::

    @latency=1.3     this run takes 1.3 s (times the server's time scale)
    @hang            this run starts and never answers
    @status=429      answer at once with this HTTP status (429, 500, 503...) and a JSON error
    @retry-after=2   with @status=429 (or 529): send ``Retry-After: 2``
    @spend-cap       with @status=429: the refusal says a cap is reached that no retry
                     lifts (Anthropic's ``enforced_spend_limit_reached``, OpenAI's
                     ``insufficient_quota``)
    @garbage         answer 200 with a body that is not what the protocol promises
    @model-error     the model fails upstream (Agno: 200 with status ERROR)
    @model-error=429 the model's provider refuses it upstream, rate-limited: Agno passes
                     the provider's message on in the same status ERROR

Anything else starting with ``@`` is left in the message.
"""

from __future__ import annotations

import re

import msgspec

__all__ = ["Directives", "parse_directives"]

_WORD = re.compile(r"(?<!\S)@(latency|hang|status|retry-after|spend-cap|garbage|model-error)(?:=(\S+))?(?!\S)")


class Directives(msgspec.Struct, frozen=True, kw_only=True):
    """What one request asked the server to do. ``None``: the server's default."""

    latency: float | None = None
    hang: bool = False
    status: int | None = None
    retry_after: str | None = None
    spend_cap: bool = False
    garbage: bool = False
    #: The upstream failure's HTTP status (500 for a plain ``@model-error``), or None.
    model_error: int | None = None


def parse_directives(message: str) -> tuple[str, Directives]:
    """Split ``message`` into its text and its directives.

    A directive with a bad value (``@latency=soon``) is left in the text, not obeyed.
    """
    found: dict[str, object] = {}

    def take(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        try:
            if name == "latency" and value is not None:
                found["latency"] = max(0.0, float(value))
            elif name == "status" and value is not None:
                found["status"] = int(value)
            elif name == "retry-after" and value is not None:
                found["retry_after"] = value
            elif name == "model-error":
                found["model_error"] = 500 if value is None else int(value)
            elif name in ("hang", "spend-cap", "garbage") and value is None:
                found[name.replace("-", "_")] = True
            else:
                return match.group(0)
        except ValueError:
            return match.group(0)
        return ""

    text = " ".join(_WORD.sub(take, message).split())
    return text, Directives(**found)  # type: ignore[arg-type]
