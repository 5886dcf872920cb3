"""What the HTTP backends share: status mapping, ``Retry-After`` and rate headers, keys
from the environment, reading a streamed answer to its end so that its connection is reused.

How a server says "full", and what Manor makes of it (``refusal``):

- 429 ``rate_limit_error`` / ``rate_limit_exceeded``: ``SessionLimitError`` refused by the
  server, with ``retry_after`` (``Retry-After`` in seconds or as an HTTP date, or
  OpenAI's ``retry-after-ms``) and the rate headers (``RateLimits``);
- 429 meaning a cap no retry lifts (Anthropic's ``enforced_spend_limit_reached``,
  OpenAI's ``insufficient_quota``): the same, ``final``: the run stops;
- 529 or an ``overloaded_error``: the service is full for everyone: ``SessionLimitError``;
- 401, 403: ``AccessRefused`` (``final``): the key is missing, wrong or not allowed;
- any other status: ``ProviderError`` with the server's message.
"""

from __future__ import annotations

import email.utils
import json
import os
import re
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime

import httpx
import trio

from ..calls import RateLimits
from ..config.backends import NON_ASCII_KEY
from ..errors import (
    AccessRefused,
    CallError,
    ConfigError,
    ProviderError,
    SessionLimitError,
)

__all__ = [
    "FINAL_CODES", "FINISH_S", "auth_headers", "check_response", "error_fields", "finish", "open_client", "rate_limits", "refusal", "retry_after",
]  # fmt: skip

#: Bytes of an error body quoted in a message.
_QUOTE = 200
#: Seconds ``finish`` waits for the rest of a body whose answer is already complete.
FINISH_S = 1.0
#: Error types or codes of a 429 that no retry cures: a spend cap, a quota spent.
FINAL_CODES = frozenset({"enforced_spend_limit_reached", "insufficient_quota"})


def auth_headers(api_key_env: str) -> dict[str, str]:
    """``Authorization: Bearer`` from the environment variable named ``api_key_env``.

    The key itself never appears in a message, a log or a save: only the variable's name.

    Raises:
        ConfigError: the variable is named but not set, or not ASCII.
    """
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise ConfigError(f"environment variable {api_key_env} (the API key) is not set")
    if not key.isascii():
        raise ConfigError(f"environment variable {api_key_env} (the API key) {NON_ASCII_KEY}")
    return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def open_client(client: httpx.AsyncClient | None, timeout: httpx.Timeout) -> AsyncIterator[httpx.AsyncClient]:
    """The given client, left open; or a fresh one for this call, closed after it."""
    if client is not None:
        yield client
        return
    async with httpx.AsyncClient(timeout=timeout) as fresh:
        yield fresh


async def finish(rest: AsyncIterator[object]) -> None:
    """Read what is left of a streamed body, so that its connection goes back to the pool.

    httpx keeps a connection for the next request only when the response on it was read
    to the end; one closed early is discarded, and the next call opens another (a new
    port, a socket left in TIME_WAIT). Call this once the answer is complete (``[DONE]``,
    ``RunCompleted``, an error event), with the iterator the body was being read from:
    what is left is normally just the end of the chunked body, already on its way. The
    wait is bounded by ``FINISH_S`` and a failure to read is ignored: the answer stands,
    and the connection is then closed instead of reused.
    """
    with trio.move_on_after(FINISH_S):
        try:
            async for _ in rest:
                pass
        except httpx.HTTPError:
            pass


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date);
    None if neither is there or readable. Header names in any case (httpx's headers)."""
    if (value := _seconds(headers.get("retry-after-ms"))) is not None:
        return value / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    if (seconds := _seconds(value)) is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def rate_limits(headers: Mapping[str, str]) -> RateLimits | None:
    """What the rate headers say is left: OpenAI's ``x-ratelimit-remaining-requests``
    and ``x-ratelimit-reset-requests`` (a duration, ``6m0s``), Anthropic's
    ``anthropic-ratelimit-requests-remaining`` and ``-reset`` (an RFC 3339 instant),
    and the same for tokens. None when there are none."""
    found = RateLimits(
        requests_remaining=_count(headers, "x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining"),
        requests_reset_s=_reset(headers, "x-ratelimit-reset-requests", "anthropic-ratelimit-requests-reset"),
        tokens_remaining=_count(
            headers, "x-ratelimit-remaining-tokens", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-input-tokens-remaining"
        ),
        tokens_reset_s=_reset(headers, "x-ratelimit-reset-tokens", "anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-input-tokens-reset"),
    )
    return None if found == RateLimits() else found


def refusal(what: str, status: int, headers: Mapping[str, str], kind: str | None, code: str | None, message: str) -> CallError:
    """The error of a server's refusal (see the module's docstring).

    Args:
        what: names the server and model in the message.
        status: the HTTP status (200 for an error sent inside a stream).
        kind, code: the error's type and code as the body gives them.
        message: the server's message.
    """
    kind = kind or ""
    if status == 429 or kind in ("rate_limit_error", "rate_limit_exceeded"):
        final = kind in FINAL_CODES or code in FINAL_CODES
        said = "429 spend or quota cap reached, no retry will help" if final else "429 too many requests"
        return SessionLimitError(f"{what}: {said}: {message}", retry_after=retry_after(headers), final=final, rates=rate_limits(headers))
    if status == 529 or kind == "overloaded_error":
        return SessionLimitError(f"{what}: 529 overloaded: {message}", retry_after=retry_after(headers), rates=rate_limits(headers))
    if status in (401, 403):
        return AccessRefused(f"{what}: HTTP {status} access refused (check the API key): {message}")
    return ProviderError(f"{what}: HTTP {status}: {message}")


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _count(headers: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = headers.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


#: A Go-style duration, as OpenAI writes its resets: ``1s``, ``6m0s``, ``20ms``, ``1h2m``.
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _reset(headers: Mapping[str, str], *names: str) -> float | None:
    for name in names:
        value = (headers.get(name) or "").strip()
        if not value:
            continue
        if (seconds := _seconds(value)) is not None:
            return seconds
        if _DURATION.fullmatch(value):
            return sum(float(n) * _UNIT_S[unit] for n, unit in _PART.findall(value))
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            continue
        if when.tzinfo is not None:
            return max(0.0, when.timestamp() - time.time())
    return None


async def check_response(response: httpx.Response, what: str) -> None:
    """Map an HTTP error status to the exception tree (``refusal``); return quietly on 2xx.

    Raises:
        SessionLimitError: 429 or 529, the platform's flow control (``final`` for a cap).
        AccessRefused: 401 or 403.
        ProviderError: any other non-2xx status, with the server's message.
    """
    if response.is_success:
        return
    await response.aread()
    message, kind, code = _error_fields(response)
    raise refusal(what, response.status_code, response.headers, kind, code, message)


def _error_fields(response: httpx.Response) -> tuple[str, str | None, str | None]:
    text = response.text
    try:
        body = json.loads(text)
    except ValueError:
        return text[:_QUOTE].strip() or response.reason_phrase, None, None
    return error_fields(body, text)


def error_fields(body: object, text: str) -> tuple[str, str | None, str | None]:
    """The server's message, error type and error code from a decoded JSON error body
    (OpenAI's ``{"error": {"message", "type", "code"}}``, Anthropic's ``{"type": "error",
    "error": {"type", "message", "details": {"error_code"}}}``, FastAPI's ``detail``);
    ``text``, the raw body, quoted when there is no message."""
    fallback = text[:_QUOTE].strip()
    error = body.get("error", body.get("detail")) if isinstance(body, dict) else None
    if isinstance(error, str):
        return error[:_QUOTE], None, None
    if not isinstance(error, dict):
        return fallback, None, None
    message, kind, details = error.get("message"), error.get("type"), error.get("details")
    code = error.get("error_code", error.get("code"))
    if isinstance(details, dict) and isinstance(details.get("error_code"), str):
        code = details["error_code"]
    return (
        message[:_QUOTE] if isinstance(message, str) else fallback,
        kind if isinstance(kind, str) else None,
        code if isinstance(code, str) else None,
    )
