"""The Agno AgentOS face of ``manor serve-agent``: create a run, cancel a run.

``POST /agents/{agent_id}/runs`` takes a form (urlencoded or multipart; JSON is refused
with 422): ``message``, ``stream`` (default true), ``session_id``, ``user_id``, ``run_id``.
Non-streaming: one JSON object with ``status`` COMPLETED, ERROR or CANCELLED (a model
error is a 200, not an HTTP error). Streaming: ``event: RunStarted`` / ``RunContent`` /
``RunCompleted`` (or ``RunError`` / ``RunCancelled``) frames, no end marker.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any
from urllib.parse import parse_qs

from ..calls import Done, Event, Started, TextDelta, Usage
from .directives import parse_directives
from .host import AgentHost, HostFull, ModelFailed, RunCancelled, RunSpec
from .http_server import HttpRequest, HttpResponse

__all__ = ["cancel_run", "create_run"]

_SSE = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))
_TRUE = frozenset({"true", "1", "yes", "on"})


async def create_run(host: AgentHost, request: HttpRequest, agent_id: str) -> HttpResponse:
    form = _form(request)
    if form is None:
        return _detail(422, "expected a form (application/x-www-form-urlencoded or multipart/form-data)")
    if "message" not in form:
        return _detail(422, "field required: message")
    if agent_id not in host.agents:
        return _detail(404, "Agent not found")
    stream = form.get("stream", "true").strip().lower() in _TRUE
    text, directives = parse_directives(form["message"])
    ids = {"run_id": form.get("run_id") or str(uuid.uuid4()), "session_id": form.get("session_id") or str(uuid.uuid4())}
    if directives.status is not None:
        retry = [("retry-after", directives.retry_after)] if directives.retry_after else []
        return HttpResponse.json(directives.status, {"detail": f"injected HTTP {directives.status}"}, retry)
    if directives.garbage:
        if stream:
            return HttpResponse(200, _SSE, stream=_garbage_frames())
        return HttpResponse(200, (("content-type", "application/json"),), b"<html>502 upstream sent garbage</html>")
    spec = RunSpec(ids["run_id"], agent_id, text, directives, session_id=ids["session_id"])
    # A non-streaming AgentOS run outlives its client; a streaming one is cancelled.
    events = host.run(spec, outlive_client=not stream)
    started = time.monotonic()
    try:
        first = await anext(events)
    except HostFull as exc:
        return _detail(429, f"agent busy: {exc}", [("retry-after", "1")])
    except (ModelFailed, RunCancelled) as exc:
        await events.aclose()
        first = exc  # reported in the body below, like any later failure
    except BaseException:
        await events.aclose()
        raise
    meta = {**ids, "agent_id": agent_id}
    if stream:
        return HttpResponse(200, _SSE, stream=_frames(first, events, meta, started))
    async with aclosing(events):
        return HttpResponse.json(200, await _run_output(first, events, meta, started))


async def cancel_run(host: AgentHost, run_id: str) -> HttpResponse:
    host.cancel(run_id)
    return HttpResponse.json(200, {})


async def _run_output(first: Event | Exception, events: AsyncIterator[Event], meta: dict[str, str], started: float) -> Any:
    pieces: list[str] = []
    item: Event | Exception = first
    try:
        while not isinstance(item, (Done, Exception)):
            if isinstance(item, TextDelta):
                pieces.append(item.text)
            item = await anext(events)
    except (ModelFailed, RunCancelled) as exc:
        item = exc
    if isinstance(item, Done):
        return {**meta, "content": item.text, "status": "COMPLETED", "metrics": _metrics(item.usage, started)}
    if isinstance(item, RunCancelled):
        return {**meta, "content": "Run cancelled", "status": "CANCELLED", "metrics": _metrics(Usage(), started)}
    return {**meta, "content": str(item), "status": "ERROR", "metrics": _metrics(Usage(), started)}


async def _frames(
    first: Event | Exception, events: AsyncGenerator[Event, None], meta: dict[str, str], started: float
) -> AsyncGenerator[bytes, None]:
    async with aclosing(events):
        item: Event | Exception = first
        try:
            while True:
                if isinstance(item, Started):
                    yield _frame("RunStarted", {**meta, "created_at": int(time.time())})
                elif isinstance(item, TextDelta):
                    yield _frame("RunContent", {**meta, "content": item.text, "content_type": "str"})
                elif isinstance(item, Done):
                    yield _frame("RunCompleted", {**meta, "content": item.text, "metrics": _metrics(item.usage, started)})
                    return
                elif isinstance(item, Exception):
                    raise item
                item = await anext(events)
        except ModelFailed as exc:
            yield _frame("RunError", {**meta, "content": str(exc)})
        except RunCancelled:
            yield _frame("RunCancelled", {**meta, "reason": "cancelled"})


async def _garbage_frames() -> AsyncGenerator[bytes, None]:
    yield b"event: RunStarted\ndata: {not json at all\n\n"


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps({'event': event, **data})}\n\n".encode()


def _metrics(usage: Usage, started: float) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "duration": round(time.monotonic() - started, 3),
    }


def _detail(status: int, message: str, headers: list[tuple[str, str]] | None = None) -> HttpResponse:
    return HttpResponse.json(status, {"detail": message}, headers or [])


def _form(request: HttpRequest) -> dict[str, str] | None:
    """The form fields of a urlencoded or multipart body; None for anything else."""
    kind = request.headers.get("content-type", "")
    if kind.startswith("application/x-www-form-urlencoded"):
        try:
            fields = parse_qs(request.body.decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            return None
        return {name: values[-1] for name, values in fields.items()}
    if kind.startswith("multipart/form-data"):
        head = f"Content-Type: {kind}\r\n\r\n".encode("latin-1")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + request.body)
        if not message.is_multipart():
            return None
        form: dict[str, str] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if isinstance(name, str):
                payload = part.get_payload(decode=True) or b""
                form[name] = payload.decode("utf-8", "replace")
        return form
    return None
