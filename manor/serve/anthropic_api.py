"""The Anthropic Messages face of ``manor serve-agent``: ``POST /v1/messages``.

Streaming answers ``event: NAME`` / ``data: {json}`` frames as the real service does:
``message_start`` (usage so far), ``content_block_start``, ``ping``, ``content_block_delta``
(``text_delta``) pieces, ``content_block_stop``, ``message_delta`` (``stop_reason`` and the
final ``usage.output_tokens``), ``message_stop``; a failure after the 200 is an ``event:
error`` frame. Errors are ``{"type": "error", "error": {"type", "message"}}``: a full host
answers 429 ``rate_limit_error`` with ``retry-after`` and ``anthropic-ratelimit-requests-*``
headers; ``@status=529`` is ``overloaded_error``; ``@status=429 @spend-cap`` is a 429 whose
``details.error_code`` is ``enforced_spend_limit_reached``. Every answer carries the rate
headers: the limit is the host's capacity, the remaining its free room.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from ..calls import Done, Event, TextDelta
from .directives import parse_directives
from .host import AgentHost, HostFull, ModelFailed, RunCancelled, RunSpec
from .http_server import HttpRequest, HttpResponse
from .openai_api import last_user_text

__all__ = ["ERROR_TYPES", "messages"]

_SSE = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))

#: The error type the real service names for each status.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


async def messages(host: AgentHost, request: HttpRequest) -> HttpResponse:
    try:
        body = json.loads(request.body)
    except ValueError:
        return _error(host, 400, "the body is not JSON")
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return _error(host, 400, "messages: field required, a non-empty list")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return _error(host, 400, "model: field required")
    if not isinstance(body.get("max_tokens"), int):
        return _error(host, 400, "max_tokens: field required")
    text, directives = parse_directives(last_user_text(body["messages"]))
    if directives.status is not None:
        retry = [("retry-after", directives.retry_after)] if directives.retry_after else []
        if directives.status == 429 and directives.spend_cap:
            message = "You have reached your specified workspace API usage limits."
            return _error(host, 429, message, retry, code="enforced_spend_limit_reached")
        return _error(host, directives.status, f"injected HTTP {directives.status}", retry)
    if directives.garbage:
        return HttpResponse(200, _SSE, stream=_garbage())
    agent = model if model in host.agents else host.agents[0]
    meta = {"id": f"msg_{uuid.uuid4().hex[:24]}", "model": model}
    events = host.run(RunSpec(meta["id"], agent, text, directives))
    try:
        first = await anext(events)
    except HostFull as exc:
        return _error(host, 429, f"server busy: {exc}", [("retry-after", "1")])
    except (ModelFailed, RunCancelled) as exc:
        return _error(host, 500, str(exc) or "the request was cancelled")
    except BaseException:
        await events.aclose()
        raise
    headers = (*_SSE, *rate_headers(host))
    input_tokens = len(text.split())
    if body.get("stream") is True:
        return HttpResponse(200, headers, stream=_frames(first, events, meta, input_tokens))
    async with aclosing(events):
        item: Event = first
        try:
            while not isinstance(item, Done):
                item = await anext(events)
        except (ModelFailed, RunCancelled) as exc:
            return _error(host, 500, str(exc) or "the request was cancelled")
    usage = {"input_tokens": item.usage.input_tokens, "output_tokens": item.usage.output_tokens}
    content = [{"type": "text", "text": item.text}]
    return HttpResponse.json(200, _message(meta, content, "end_turn", usage), rate_headers(host))


def rate_headers(host: AgentHost) -> list[tuple[str, str]]:
    """``anthropic-ratelimit-requests-limit`` and ``-remaining``: the host's capacity and
    the runs it would take now without queueing."""
    return [
        ("anthropic-ratelimit-requests-limit", str(host.capacity)),
        ("anthropic-ratelimit-requests-remaining", str(host.room())),
    ]


async def _frames(first: Event, events: AsyncGenerator[Event, None], meta: dict[str, str], input_tokens: int) -> AsyncGenerator[bytes, None]:
    async with aclosing(events):
        usage = {"input_tokens": input_tokens, "output_tokens": 1}
        yield _frame("message_start", {"type": "message_start", "message": _message(meta, [], None, usage)})
        yield _frame("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        yield _frame("ping", {"type": "ping"})
        item: Event = first
        try:
            while not isinstance(item, Done):
                if isinstance(item, TextDelta):
                    delta = {"type": "text_delta", "text": item.text}
                    yield _frame("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
                item = await anext(events)
        except (ModelFailed, RunCancelled) as exc:
            error = {"type": "api_error", "message": str(exc) or "the request was cancelled"}
            yield _frame("error", {"type": "error", "error": error})
            return
        yield _frame("content_block_stop", {"type": "content_block_stop", "index": 0})
        delta = {"stop_reason": "end_turn", "stop_sequence": None}
        yield _frame("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": item.usage.output_tokens}})
        yield _frame("message_stop", {"type": "message_stop"})


def _message(meta: dict[str, str], content: list[Any], stop_reason: str | None, usage: dict[str, int]) -> dict[str, Any]:
    return {
        **meta,
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


async def _garbage() -> AsyncGenerator[bytes, None]:
    yield b"event: content_block_delta\ndata: {\"delta\": oops\n\n"


def _frame(name: str, value: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(value)}\n\n".encode()


def _error(host: AgentHost, status: int, message: str, headers: list[tuple[str, str]] | None = None, *, code: str | None = None) -> HttpResponse:
    error: dict[str, Any] = {"type": ERROR_TYPES.get(status, "api_error"), "message": message}
    if code is not None:
        error["details"] = {"error_code": code}
    return HttpResponse.json(status, {"type": "error", "error": error}, [*(headers or []), *rate_headers(host)])

