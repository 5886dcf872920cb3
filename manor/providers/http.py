"""What the HTTP backends share: status mapping, ``Retry-After``, keys from the environment,
reading a streamed answer to its end so that its connection is reused."""

from __future__ import annotations

import email.utils
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import trio

from ..config.backends import NON_ASCII_KEY
from ..errors import ConfigError, ProviderError, SessionLimitError

__all__ = ["FINISH_S", "auth_headers", "check_response", "finish", "open_client", "retry_after"]

#: Bytes of an error body quoted in a message.
_QUOTE = 200
#: Seconds ``finish`` waits for the rest of a body whose answer is already complete.
FINISH_S = 1.0


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


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from a ``Retry-After`` header (seconds or an HTTP date); None if absent."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def check_response(response: httpx.Response, what: str) -> None:
    """Map an HTTP error status to the exception tree; return quietly on 2xx.

    Raises:
        SessionLimitError: 429, the platform's flow control (``retry_after`` set when sent).
        ProviderError: any other non-2xx status, with the server's message.
    """
    if response.is_success:
        return
    await response.aread()
    message = _error_message(response)
    if response.status_code == 429:
        raise SessionLimitError(f"{what}: 429 too many requests: {message}", retry_after=retry_after(response.headers))
    raise ProviderError(f"{what}: HTTP {response.status_code}: {message}")


def _error_message(response: httpx.Response) -> str:
    text = response.text
    try:
        body = json.loads(text)
    except ValueError:
        return text[:_QUOTE].strip() or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail"))
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:_QUOTE]
        if isinstance(error, str):
            return error[:_QUOTE]
    return text[:_QUOTE].strip()
