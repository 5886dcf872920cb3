"""The bounded-wait experiment (docs/internals.md, "The bounded-wait experiment").

Twelve requests, request i arriving at (i - 1) s, go through the real ``AgnoProvider``
(workers, per-call timeout, cancel-on-timeout) to a remote agent that runs at most 3
calls at once and queues the rest FIFO. The run lasts 60 s. Two rigs, same adapter code:

- in process, against an ``AgentHost`` under ``trio.testing.MockClock``: exact. The
  virtual clock counts *milliseconds* here, so every instant is a whole number and two
  events that the table puts at the same time really are simultaneous (0.1 + 0.2 is not
  0.3 in binary floating point; 100 + 200 is 300). At such an instant, a deadline comes
  first: a call whose timeout falls when a slot frees or its answer arrives has timed out.
- over HTTP, against a real ``manor serve-agent`` server on loopback, in real time scaled
  by ``time_scale``: the same results, within the resolution of the scale.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Literal

import attrs
import httpx
import msgspec
import trio

from ..calls import Done, Request
from ..clock import MockClock, wait_all_tasks_blocked
from ..errors import CallTimeout
from ..providers.agno import (
    AgnoProvider,
    HttpAgentTransport,
    RemoteAgentTransport,
    RunCall,
)
from ..run import interrupts
from ..serve.host import AgentHost
from ..serve.local import LocalAgentTransport
from .design import CAPACITY, DURATION_S, HANG_CHOICES, LATENCIES_S

__all__ = [
    "CAPACITY",
    "DURATION_S",
    "HANG_CHOICES",
    "LATENCIES_S",
    "ExperimentResult",
    "ExperimentSettings",
    "RequestResult",
    "run_in_process",
    "run_over_http",
]


_AGENT = "remote"
Outcome = Literal["answered", "timed_out", "unfinished"]


class ExperimentSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    workers: int = 2
    timeout_s: float = 0.0
    cancel: bool = False
    hangs: tuple[int, ...] = (4, 8)


class RequestResult(msgspec.Struct, frozen=True, kw_only=True):
    """One request; times in seconds from the start, ``None`` where it did not happen."""

    id: int
    arrived_s: float
    worker_s: float | None
    remote_start_s: float | None
    finished_s: float | None
    outcome: Outcome


class ExperimentResult(msgspec.Struct, frozen=True, kw_only=True):
    workers: int
    timeout_s: float
    cancel: bool
    hangs: tuple[int, ...]
    answered: int
    timed_out: int
    unfinished: int
    requests: tuple[RequestResult, ...]


def run_in_process(settings: ExperimentSettings) -> ExperimentResult:
    """Run the experiment under the virtual clock: exact, and takes no wall time."""
    return interrupts.run(_in_process, settings, clock=MockClock(autojump_threshold=0))


async def _in_process(settings: ExperimentSettings) -> ExperimentResult:
    clock = _Timebase(per_second=1000, exact=True)
    host = AgentHost(agents=(_AGENT,), capacity=CAPACITY, latency=0, settle=wait_all_tasks_blocked)
    async with trio.open_nursery() as nursery:
        await nursery.start(host.serve)
        result = await _drive(settings, LocalAgentTransport(host), host, clock)
        nursery.cancel_scope.cancel()
    return result


async def run_over_http(settings: ExperimentSettings, *, time_scale: float = 0.1) -> ExperimentResult:
    """Run the experiment against a ``manor serve-agent`` server started on loopback,
    in real time: ``time_scale`` real seconds per experiment second."""
    from ..serve.server import AgentServer  # the HTTP stack only when asked for

    clock = _Timebase(per_second=time_scale, exact=False)
    host = AgentHost(agents=(_AGENT,), capacity=CAPACITY, latency=0)
    async with trio.open_nursery() as nursery:
        await nursery.start(host.serve)
        url = await nursery.start(AgentServer(host).serve, "127.0.0.1", 0)
        # One client for all calls: connecting is quick, building a client is not.
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None)) as client:
            await client.get(f"{url}/stats")  # connect once before the clock starts
            result = await _drive(settings, HttpAgentTransport(url, client=client), host, clock)
        nursery.cancel_scope.cancel()
    return result


@attrs.frozen
class _Timebase:
    """Experiment seconds to clock seconds and back."""

    per_second: float
    exact: bool

    def to_clock(self, seconds: float) -> float:
        value = seconds * self.per_second
        return float(round(value)) if self.exact else value

    def to_seconds(self, clock: float | None) -> float | None:
        return None if clock is None else round(clock / self.per_second, 3)


@attrs.define
class _Trace:
    arrived: float = 0.0
    worker: float | None = None
    run_id: str | None = None
    finished: float | None = None
    outcome: Outcome = "unfinished"


@attrs.define(eq=False)
class _Recording(RemoteAgentTransport):
    """Notes when each call is sent (the moment its request got a worker)."""

    inner: RemoteAgentTransport
    on_send: Callable[[RunCall], None]

    async def run(self, call: RunCall):  # type: ignore[override]
        self.on_send(call)
        async with aclosing(self.inner.run(call)) as events:
            async for event in events:
                yield event

    def cancel(self, agent_id: str, run_id: str) -> Awaitable[None]:
        return self.inner.cancel(agent_id, run_id)


async def _drive(
    settings: ExperimentSettings, transport: RemoteAgentTransport, host: AgentHost, clock: _Timebase
) -> ExperimentResult:
    start = trio.current_time()
    traces = {i: _Trace() for i in range(1, len(LATENCIES_S) + 1)}
    messages = {_message(i, settings, clock): i for i in traces}

    def on_send(call: RunCall) -> None:
        trace = traces[messages[call.message]]
        trace.worker, trace.run_id = trio.current_time(), call.run_id

    adapter = AgnoProvider(
        _Recording(transport, on_send),
        _AGENT,
        workers=settings.workers,
        timeout=clock.to_clock(settings.timeout_s),
        cancel_remote=settings.cancel,
    )

    async def request(i: int, message: str) -> None:
        await trio.sleep_until(start + clock.to_clock(i - 1))
        trace = traces[i]
        trace.arrived = trio.current_time()
        try:
            call = Request(caller="character", agent=f"request {i}", ticket=i, prompt=message)
            async with aclosing(adapter.invoke(call)) as stream:
                async for event in stream:
                    if isinstance(event, Done):
                        trace.finished, trace.outcome = trio.current_time(), "answered"
        except CallTimeout:
            trace.finished, trace.outcome = trio.current_time(), "timed_out"

    with trio.move_on_at(start + clock.to_clock(DURATION_S)):
        async with trio.open_nursery() as nursery:
            for message, i in messages.items():
                nursery.start_soon(request, i, message)

    def seconds(t: float | None) -> float | None:
        return clock.to_seconds(None if t is None else t - start)

    results = []
    for i, trace in traces.items():
        record = host.record(trace.run_id) if trace.run_id else None
        results.append(
            RequestResult(
                id=i,
                arrived_s=seconds(trace.arrived) or 0.0,
                worker_s=seconds(trace.worker),
                remote_start_s=seconds(record.started_at if record else None),
                finished_s=seconds(trace.finished) if trace.outcome != "unfinished" else None,
                outcome=trace.outcome,
            )
        )
    outcomes = [r.outcome for r in results]
    return ExperimentResult(
        workers=settings.workers,
        timeout_s=settings.timeout_s,
        cancel=settings.cancel,
        hangs=settings.hangs,
        answered=outcomes.count("answered"),
        timed_out=outcomes.count("timed_out"),
        unfinished=outcomes.count("unfinished"),
        requests=tuple(results),
    )


def _message(i: int, settings: ExperimentSettings, clock: _Timebase) -> str:
    if i in settings.hangs:
        return f"request {i} @hang"
    return f"request {i} @latency={clock.to_clock(LATENCIES_S[i - 1])!r}"
