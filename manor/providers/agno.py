"""The ``agno`` backend: the remote-agent adapter with bounded waits.

A call to a remote agent holds one of the adapter's workers until it ends; requests wait
for a worker in FIFO order and send their call the moment they get one. The per-call
timeout counts from getting the worker (remote queueing included). On timeout the worker
is freed and the adapter hangs up — a run still queued remotely is dropped by the server,
but a run that started goes on to its natural end unless ``cancel_remote`` is set, which
also sends ``POST /agents/{id}/runs/{run_id}/cancel``. Timed out is not cancelled.

The adapter speaks to the remote agent through a ``RemoteAgentTransport`` (one run, one
cancel): ``HttpAgentTransport`` for a real AgentOS or ``manor serve-agent``;
``manor.serve.local.LocalAgentTransport`` for a simulated agent in the same process,
under the virtual clock. The adapter code is the same for both.
"""

from __future__ import annotations

import abc
import math
import re
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, final
from urllib.parse import quote

import attrs
import httpx
import msgspec
import trio

from ..answers import prompt_with_schema
from ..calls import Done, Event, Request, Started, TextDelta, Usage
from ..config.backends import DEFAULT_SESSION_ID, session_id_problem
from ..errors import CallError, CallTimeout, ProviderError, SessionLimitError
from .provider import Provider
from .http import auth_headers, check_response, finish, open_client
from .sse import SseEvent, sse_events

__all__ = ["AdapterStatistics", "AgnoProvider", "HttpAgentTransport", "RemoteAgentTransport", "RunCall"]


@attrs.frozen
class RunCall:
    """One run as sent to the remote agent (the form fields of ``POST .../runs``)."""

    agent_id: str
    run_id: str
    message: str
    session_id: str
    stream: bool = False


class RemoteAgentTransport(abc.ABC):
    """How the adapter reaches a remote agent: start a run, cancel a run."""

    @abc.abstractmethod
    def run(self, call: RunCall) -> AsyncGenerator[Event, None]:
        """Send ``call`` when first iterated; stream ``Started``, ``TextDelta``, ``Done``.

        Closing the stream early hangs up: the remote agent drops the run if it is
        still queued.

        Raises:
            CallError: (from iteration) the run failed; a 429 is ``SessionLimitError``.
        """

    @abc.abstractmethod
    async def cancel(self, agent_id: str, run_id: str) -> None:
        """Ask the remote agent to cancel a run.

        Raises:
            ProviderError: the request could not be made.
        """


@attrs.frozen
class AdapterStatistics:
    workers: int
    busy: int
    waiting: int
    calls: int
    timed_out: int
    cancels_sent: int


@final
@attrs.define(eq=False)
class AgnoProvider(Provider):
    """The remote-agent adapter.

    Args:
        transport: how to reach the agent.
        agent_id: the remote agent's id.
        workers: calls in progress at once; further requests wait, FIFO.
        timeout: seconds a call may take from getting its worker; 0 = no timeout.
        cancel_remote: when the adapter stops waiting for a run (its timeout, or the
            caller cancelling), cancel the run remotely too.
        stream: ask for a streaming run. A streaming run is cancelled by the server
            when the client hangs up (Agno's rule); a non-streaming one is not.
        run_id: the id of the run the calls belong to (the engine's ``run_id``); by
            default a fresh one, so each adapter has sessions of its own.
        session_id: the remote session of a call: ``{run}`` (``run_id``) and
            ``{agent}`` (the calling agent) are filled in. The default gives every agent
            its own session in every run, so runs never pile into one session.

    Raises:
        ValueError: ``session_id`` names another placeholder.
    """

    transport: RemoteAgentTransport
    agent_id: str
    workers: int = attrs.field(default=2, validator=attrs.validators.ge(1))
    timeout: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    cancel_remote: bool = False
    stream: bool = False
    run_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    session_id: str = attrs.field(default=DEFAULT_SESSION_ID)
    _slots: trio.Semaphore = attrs.field(init=False)
    _counts: dict[str, int] = attrs.field(factory=dict, init=False)

    @session_id.validator
    def _check_session_id(self, attribute: object, value: str) -> None:
        if problem := session_id_problem(value):
            raise ValueError(f"session_id: {problem}")

    def __attrs_post_init__(self) -> None:
        # trio.Semaphore hands a released unit to the longest waiter: FIFO workers.
        self._slots = trio.Semaphore(self.workers)

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        call = RunCall(
            agent_id=self.agent_id,
            run_id=uuid.uuid4().hex,
            message=prompt_with_schema(request.prompt, request.shape),
            session_id=self.session_id.format(run=self.run_id, agent=request.agent),
            stream=self.stream,
        )
        async with self._slots:
            self._count("calls")
            deadline = trio.current_time() + self.timeout if self.timeout else math.inf
            timed_out = settled = False
            try:
                async with aclosing(self.transport.run(call)) as events:
                    while True:
                        with trio.move_on_at(deadline) as scope:
                            try:
                                event = await anext(events)
                            except StopAsyncIteration:
                                break
                        if scope.cancelled_caught:
                            timed_out = True
                            break
                        # The run's answer is whole: a caller that stops here (as
                        # ``collect`` does) has not abandoned it — nothing to cancel.
                        settled = settled or isinstance(event, Done)
                        yield event
                settled = True
            except CallError:
                settled = True  # the run ended remotely, with an error
                raise
            finally:
                if not settled and self.cancel_remote:
                    # The caller gave up on us before the answer (cancelled, or closed
                    # the stream early).
                    with trio.CancelScope(shield=True):
                        await self._cancel(call)
        # The worker is free again before the cancel request goes out.
        if timed_out:
            self._count("timed_out")
            note = ""
            if self.cancel_remote:
                failure = await self._cancel(call)
                note = f"; remote cancel failed: {failure}" if failure else "; remote run cancelled"
            raise CallTimeout(f"no answer from agent {self.agent_id} within {self.timeout:g}s{note}")

    def statistics(self) -> AdapterStatistics:
        waiting = self._slots.statistics().tasks_waiting
        return AdapterStatistics(
            workers=self.workers,
            busy=self.workers - self._slots.value,
            waiting=waiting,
            calls=self._counts.get("calls", 0),
            timed_out=self._counts.get("timed_out", 0),
            cancels_sent=self._counts.get("cancels_sent", 0),
        )

    async def _cancel(self, call: RunCall) -> str:
        """Cancel the run remotely; return why it failed, or "" when it was sent."""
        self._count("cancels_sent")
        try:
            await self.transport.cancel(call.agent_id, call.run_id)
        except ProviderError as exc:
            return str(exc)
        return ""

    def _count(self, what: str) -> None:
        self._counts[what] = self._counts.get(what, 0) + 1


class _Metrics(msgspec.Struct):
    input_tokens: Any = 0
    output_tokens: Any = 0


class _RunOutput(msgspec.Struct):
    """The parts of an AgentOS run response (or stream event) the adapter reads."""

    content: Any = None
    status: str = ""
    metrics: _Metrics | None = None


_decode_output = msgspec.json.Decoder(_RunOutput).decode


@final
@attrs.define(eq=False)
class HttpAgentTransport(RemoteAgentTransport):
    """An Agno AgentOS (or ``manor serve-agent``) over HTTP.

    Args:
        base_url: the AgentOS root, e.g. ``http://127.0.0.1:7777``.
        api_key_env: name of the environment variable holding the bearer key ("" = none).
        connect_timeout: seconds to connect (and to send the form).
        read_timeout: seconds to wait for the next bytes of an answer; ``None`` leaves
            the bound to the adapter's per-call timeout.
        client: an httpx client to share; by default each call opens its own.
    """

    base_url: str
    api_key_env: str = ""
    connect_timeout: float = 5.0
    read_timeout: float | None = None
    client: httpx.AsyncClient | None = None

    async def run(self, call: RunCall) -> AsyncGenerator[Event, None]:
        url = f"{self.base_url.rstrip('/')}/agents/{quote(call.agent_id, safe='')}/runs"
        form = {
            "message": call.message,
            "stream": "true" if call.stream else "false",
            "session_id": call.session_id,
            "run_id": call.run_id,
        }
        what = f"agent {call.agent_id} at {self.base_url}"
        try:
            async with open_client(self.client, self._timeout()) as client:
                async with client.stream("POST", url, data=form, headers=auth_headers(self.api_key_env)) as response:
                    if response.status_code == 404:
                        await response.aread()  # read to the end, so the connection is reused
                        raise ProviderError(f"{what}: no such agent (404)")
                    await check_response(response, what)
                    if call.stream:
                        async for event in _stream_events(response, what):
                            yield event
                    else:
                        for event in _run_events(await response.aread(), what):
                            yield event
        except httpx.TimeoutException as exc:
            raise CallTimeout(f"{what}: {type(exc).__name__} after {self._timeout()}") from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"{what}: {type(exc).__name__}: {exc}") from exc

    async def cancel(self, agent_id: str, run_id: str) -> None:
        url = f"{self.base_url.rstrip('/')}/agents/{quote(agent_id, safe='')}/runs/{quote(run_id, safe='')}/cancel"
        timeout = httpx.Timeout(self.connect_timeout)
        try:
            async with open_client(self.client, timeout) as client:
                response = await client.post(url, headers=auth_headers(self.api_key_env), timeout=timeout)
        except httpx.HTTPError as exc:
            raise ProviderError(f"cancel of run {run_id}: {type(exc).__name__}: {exc}") from exc
        await check_response(response, f"cancel of run {run_id}")

    def _timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout, read=self.read_timeout, write=self.connect_timeout, pool=self.connect_timeout
        )


def _run_events(body: bytes, what: str) -> list[Event]:
    """The events of a non-streaming run response."""
    try:
        output = _decode_output(body)
    except msgspec.DecodeError as exc:
        raise ProviderError(f"{what}: answered garbage, not a run ({exc}): {body[:80]!r}") from None
    text = _text(output.content)
    _raise_for_status(output, text, what)
    return [Started(), TextDelta(text), Done(text=text, usage=_usage(output.metrics))]


async def _stream_events(response: httpx.Response, what: str) -> AsyncGenerator[Event, None]:
    """The events of a streaming run: RunStarted, RunContent..., RunCompleted.

    The body is read to its end (``finish``) after the run's last event, or an error the
    server sent, so that its connection is reused.
    """
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        body = await response.aread()
        raise ProviderError(f"{what}: expected an event stream, got {response.headers.get('content-type')!r}: {body[:80]!r}")
    pieces: list[str] = []
    frames = sse_events(response.aiter_lines())
    async for frame in frames:
        try:
            output = _decode_frame(frame, what)
        except ProviderError:
            await finish(frames)  # the failure is the server's answer: the connection is sound
            raise
        if frame.name == "RunStarted":
            yield Started()
        elif frame.name == "RunContent" and output.content is not None:
            piece = _text(output.content)
            pieces.append(piece)
            yield TextDelta(piece)
        elif frame.name == "RunCompleted":
            await finish(frames)
            text = _text(output.content) if output.content is not None else "".join(pieces)
            yield Done(text=text, usage=_usage(output.metrics))
            return
    raise ProviderError(f"{what}: the event stream ended before RunCompleted")


def _decode_frame(frame: SseEvent, what: str) -> _RunOutput:
    """One stream event's run output.

    Raises:
        ProviderError: the event is garbage, or it is ``RunError`` / ``RunCancelled``.
    """
    try:
        output = _decode_output(frame.data)
    except msgspec.DecodeError:
        raise ProviderError(f"{what}: answered garbage in event {frame.name!r}: {frame.data[:80]!r}") from None
    if frame.name in ("RunError", "RunCancelled"):
        _raise_for_status(output, _text(output.content), what, default="ERROR" if frame.name == "RunError" else "CANCELLED")
    return output


#: A model provider's refusal as Agno passes it on in a run's ``status: ERROR``: its
#: message is the provider's (OpenAI "Error code: 429 - Rate limit reached...",
#: Anthropic "rate_limit_error", a gateway's "Too Many Requests").
_REFUSAL = re.compile(r"\b429\b|rate[ _-]?limit|too many requests", re.IGNORECASE)
#: When the message says how long to wait: "Please try again in 20s", "retry after 3 seconds".
_RETRY_AFTER = re.compile(r"(?:try again in|retry after)\s+(\d+(?:\.\d+)?)\s*s", re.IGNORECASE)


def _raise_for_status(output: _RunOutput, text: str, what: str, default: str = "") -> None:
    status = (output.status or default).upper()
    if status == "ERROR" and _REFUSAL.search(text):
        # The platform behind the agent refusing, not the agent failing: flow control.
        wait = _RETRY_AFTER.search(text)
        raise SessionLimitError(
            f"{what}: refused upstream: {text[:200]}", refused_by="server", retry_after=float(wait[1]) if wait else None
        )
    if status == "ERROR":
        raise ProviderError(f"{what}: the run failed: {text[:200] or 'no message'}")
    if status == "CANCELLED":
        raise ProviderError(f"{what}: the run was cancelled remotely")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return msgspec.json.encode(content).decode()


def _usage(metrics: _Metrics | None) -> Usage:
    if metrics is None:
        return Usage()
    return Usage(input_tokens=_tokens(metrics.input_tokens), output_tokens=_tokens(metrics.output_tokens))


def _tokens(value: Any) -> int:
    # AgentOS v2 reports a number; older versions a list of per-message numbers.
    if isinstance(value, list):
        return sum(v for v in value if isinstance(v, int))
    return value if isinstance(value, int) else 0
