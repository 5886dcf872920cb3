"""The OpenAI-compatible face of ``manor serve-agent``: ``POST /v1/chat/completions``.

Streaming answers ``data: {chunk}`` lines (``choices[0].delta.content``), a chunk with
``finish_reason``, a usage chunk when ``stream_options.include_usage`` is set, then
``data: [DONE]``. Errors are ``{"error": {"message", "type", "code"}}`` with the HTTP
status, even when a stream was asked for. A client that hangs up cancels its run.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from ..calls import Done, Event, TextDelta, Usage
from .directives import parse_directives
from .host import AgentHost, HostFull, ModelFailed, RunCancelled, RunSpec
from .http_server import HttpRequest, HttpResponse

__all__ = ["chat_completions", "last_user_text", "list_models", "rate_headers"]

_SSE = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))


async def chat_completions(host: AgentHost, request: HttpRequest) -> HttpResponse:
    try:
        body = json.loads(request.body)
    except ValueError:
        return _error(400, "the body is not JSON", "invalid_request_error")
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return _error(400, "'messages' must be a non-empty list", "invalid_request_error")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return _error(400, "'model' is required", "invalid_request_error")
    text, directives = parse_directives(last_user_text(body["messages"]))
    stream = body.get("stream") is True
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    if directives.status is not None:
        retry = [("retry-after", directives.retry_after)] if directives.retry_after else []
        if directives.status == 429 and directives.spend_cap:
            return _error(429, "You exceeded your current quota.", "insufficient_quota", retry, code="insufficient_quota")
        kind = "rate_limit_exceeded" if directives.status == 429 else "server_error"
        return _error(directives.status, f"injected HTTP {directives.status}", kind, retry)
    if directives.garbage:
        if stream:
            return HttpResponse(200, _SSE, stream=_garbage())
        return HttpResponse(200, (("content-type", "text/html"),), b"<html><body>Bad Gateway</body></html>")
    # Any model name is served; it names the agent when it is one.
    agent = model if model in host.agents else host.agents[0]
    meta = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": model}
    events = host.run(RunSpec(meta["id"], agent, text, directives, schema=_schema(body.get("response_format"))))
    try:
        first = await anext(events)
    except HostFull as exc:
        return _error(429, f"server busy: {exc}", "rate_limit_exceeded", [("retry-after", "1"), *rate_headers(host)])
    except ModelFailed as exc:
        return _error(500, str(exc), "server_error")
    except RunCancelled:
        return _error(500, "the request was cancelled", "server_error")
    except BaseException:
        await events.aclose()
        raise
    if stream:
        return HttpResponse(200, (*_SSE, *rate_headers(host)), stream=_chunks(first, events, meta, include_usage))
    async with aclosing(events):
        item: Event = first
        try:
            while not isinstance(item, Done):
                item = await anext(events)
        except (ModelFailed, RunCancelled) as exc:
            return _error(500, str(exc) or "the request was cancelled", "server_error")
    message = {"role": "assistant", "content": item.text}
    return HttpResponse.json(
        200,
        {
            **meta,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": _usage(item.usage),
        },
        rate_headers(host),
    )


async def list_models(host: AgentHost) -> HttpResponse:
    return HttpResponse.json(200, {"object": "list", "data": [{"id": a, "object": "model", "owned_by": "manor"} for a in host.agents]})


async def _chunks(
    first: Event, events: AsyncGenerator[Event, None], meta: dict[str, Any], include_usage: bool
) -> AsyncGenerator[bytes, None]:
    base = {**meta, "object": "chat.completion.chunk"}
    async with aclosing(events):
        yield _data({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
        item: Event = first
        try:
            while not isinstance(item, Done):
                if isinstance(item, TextDelta):
                    yield _data({**base, "choices": [{"index": 0, "delta": {"content": item.text}, "finish_reason": None}]})
                item = await anext(events)
        except (ModelFailed, RunCancelled) as exc:
            yield _data({"error": {"message": str(exc) or "cancelled", "type": "server_error", "code": None}})
            return
        yield _data({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if include_usage:
            yield _data({**base, "choices": [], "usage": _usage(item.usage)})
        yield b"data: [DONE]\n\n"


async def _garbage() -> AsyncGenerator[bytes, None]:
    yield b"data: {\"choices\": [{\"delta\": oops\n\n"


def _data(value: Any) -> bytes:
    return f"data: {json.dumps(value)}\n\n".encode()


def _usage(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens, "total_tokens": usage.total_tokens}


def rate_headers(host: AgentHost) -> list[tuple[str, str]]:
    """``x-ratelimit-limit-requests`` and ``-remaining-requests``: the host's capacity
    and the runs it would take now without queueing."""
    return [("x-ratelimit-limit-requests", str(host.capacity)), ("x-ratelimit-remaining-requests", str(host.room()))]


def _error(status: int, message: str, kind: str, headers: list[tuple[str, str]] | None = None, *, code: str | None = None) -> HttpResponse:
    if code is None and status == 429:
        code = "rate_limit_exceeded"
    return HttpResponse.json(status, {"error": {"message": message, "type": kind, "code": code}}, headers or [])


def _schema(response_format: Any) -> dict[str, Any] | None:
    """The schema of a ``{"type": "json_schema", "json_schema": {"schema": …}}``
    response format; any other format asks for nothing the simulated model can draw."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema")
        if isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
            return spec["schema"]
    return None


def last_user_text(messages: list[Any]) -> str:
    """The text of the last user message (its text parts joined, for content parts)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""
