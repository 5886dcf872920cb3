"""The ``openai`` backend: OpenAI-compatible chat completions, streamed over SSE.

Works against OpenAI and the servers that copy its API (Ollama's ``/v1``, vLLM,
llama.cpp's server, LM Studio, ``manor serve-agent``). A 429 is the platform's flow
control: ``SessionLimitError`` with the ``Retry-After`` seconds when the server sent
them, never a provider error to retry blindly.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, final

import attrs
import httpx

from ..answers import response_format
from ..calls import Done, Event, RateLimits, Request, Started, TextDelta, Usage
from ..errors import CallTimeout, ProviderError
from .provider import Provider
from .http import auth_headers, check_response, finish, open_client, rate_limits
from .sse import SseEvent, sse_events

__all__ = ["OpenAIProvider"]


@final
@attrs.define(eq=False)
class OpenAIProvider(Provider):
    """Chat completions at ``{base_url}/chat/completions``, always streamed.

    Args:
        base_url: up to and including ``/v1``, e.g. ``https://api.openai.com/v1`` or
            ``http://127.0.0.1:11434/v1`` (Ollama).
        model: used when the request names none.
        api_key_env: name of the environment variable holding the key ("" = none, as
            local servers want). Only the name is ever shown.
        system: a system message sent before the prompt ("" = none).
        connect_timeout: seconds to connect and send the request.
        read_timeout: seconds to wait for the next bytes of the stream.
        client: an httpx client to share; by default each call opens its own.
    """

    base_url: str
    model: str = ""
    api_key_env: str = ""
    system: str = ""
    connect_timeout: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))
    read_timeout: float = attrs.field(default=60.0, validator=attrs.validators.gt(0))
    client: httpx.AsyncClient | None = None

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        model = request.model or self.model
        if not model:
            raise ProviderError("no model configured for the openai backend")
        url = f"{self.base_url.rstrip('/')}/chat/completions"
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages.append({"role": "user", "content": request.prompt})
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
        if request.shape is not None:
            body["response_format"] = response_format(request.shape)
        what = f"{model} at {self.base_url}"
        timeout = httpx.Timeout(connect=self.connect_timeout, read=self.read_timeout, write=self.connect_timeout, pool=None)
        try:
            async with open_client(self.client, timeout) as client:
                headers = auth_headers(self.api_key_env)
                async with client.stream("POST", url, json=body, headers=headers, timeout=timeout) as response:
                    await check_response(response, what)
                    kind = response.headers.get("content-type", "")
                    if not kind.startswith("text/event-stream"):
                        sample = (await response.aread())[:80]
                        raise ProviderError(f"{what}: answered garbage: expected an event stream, got {kind or 'no content type'}: {sample!r}")
                    async for event in _completion_events(sse_events(response.aiter_lines()), what, rate_limits(response.headers)):
                        yield event
        except httpx.TimeoutException as exc:
            raise CallTimeout(f"{what}: {type(exc).__name__} (connect {self.connect_timeout:g}s, read {self.read_timeout:g}s)") from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"{what}: {type(exc).__name__}: {exc}") from exc


async def _completion_events(frames: AsyncIterator[SseEvent], what: str, rates: RateLimits | None) -> AsyncGenerator[Event, None]:
    """The events of a chat completion stream; the body is read to its end (``finish``)
    after ``[DONE]`` and after an error the server sent, so its connection is reused.
    ``rates``: what the answer's rate headers said, for its ``Done``."""
    pieces: list[str] = []
    usage = Usage()
    finished = False
    started = False
    async for frame in frames:
        if frame.data.strip() == "[DONE]":
            await finish(frames)
            break
        try:
            chunk, choices = _decode(frame.data, what)
        except ProviderError:
            await finish(frames)  # the failure is the server's answer: the connection is sound
            raise
        if isinstance(chunk.get("usage"), dict):
            usage = Usage(
                input_tokens=_int(chunk["usage"].get("prompt_tokens")),
                output_tokens=_int(chunk["usage"].get("completion_tokens")),
            )
        for choice in choices:
            delta = choice.get("delta") or {}
            text = delta.get("content") if isinstance(delta, dict) else None
            if not started:
                started = True
                yield Started()
            if isinstance(text, str) and text:
                pieces.append(text)
                yield TextDelta(text)
            finished = finished or bool(choice.get("finish_reason"))
    else:
        if not finished:
            raise ProviderError(f"{what}: the stream was cut off before [DONE]")
    if not started:
        yield Started()
    yield Done(text="".join(pieces), usage=usage, rates=rates)


def _decode(data: str, what: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One chunk and its choices.

    Raises:
        ProviderError: the chunk is garbage, or an error the server sent after the 200.
    """
    try:
        chunk = json.loads(data)
    except ValueError:
        raise ProviderError(f"{what}: answered garbage: not JSON: {data[:80]!r}") from None
    if not isinstance(chunk, dict):
        raise ProviderError(f"{what}: answered garbage: not a chunk object: {data[:80]!r}")
    if "error" in chunk:  # as some servers send mid-stream
        raise ProviderError(f"{what}: {_message(chunk['error'])}")
    choices = chunk.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(choice, dict) for choice in choices):
        raise ProviderError(f"{what}: answered garbage: choices are not a list of objects: {data[:80]!r}")
    return chunk, choices


def _message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
