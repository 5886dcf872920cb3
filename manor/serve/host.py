"""The remote agent itself, without the wire: a capacity, a FIFO queue, runs.

Both faces of ``manor serve-agent`` (the Agno-style and the OpenAI-compatible endpoints)
and the in-process transport of the bounded-wait experiment drive this one class, so the
remote agent behaves the same whether it is reached over HTTP or under the virtual clock.

A run waits in the queue until one of ``capacity`` slots is free, then "thinks" for its
latency and answers. Runs are owned by the host, not by the client's task: a client that
goes away while its run is queued drops it; one that goes away while it runs either
cancels it (a streaming client) or leaves it running to its natural end (a non-streaming
Agno client, like a real AgentOS) — forever, if it hangs.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import final

import attrs
import trio

from ..answers import draw_from_schema, schema_in_prompt
from ..calls import Done, Event, Started, TextDelta, Usage
from .directives import Directives

__all__ = [
    "AgentHost",
    "HostFull",
    "HostStatistics",
    "ModelFailed",
    "RunCancelled",
    "RunRecord",
    "RunSpec",
    "UnknownAgent",
]

#: Runs remembered for ``record()``; the oldest are forgotten first.
_MAX_RECORDS = 10_000
#: Words of a message an answer quotes. Quoting all of it would let a world feed answers
#: back into prompts (the narrator reads last tick's answers) and grow them every tick.
_QUOTED_WORDS = 24


class HostFull(Exception):
    """All slots are busy and the host rejects rather than queues."""


class UnknownAgent(Exception):
    """No agent of that id is served here."""


class ModelFailed(Exception):
    """The (simulated) model failed while running the call."""


class RunCancelled(Exception):
    """The run was cancelled (the cancel endpoint, or its streaming client left)."""


@attrs.frozen
class RunSpec:
    """One run as a client asked for it."""

    run_id: str
    agent_id: str
    text: str
    directives: Directives = Directives()
    #: The client's session ("" = none), kept for the record.
    session_id: str = ""
    #: The JSON schema the answer must match (OpenAI's ``response_format``); ``None``:
    #: the one the text's instruction names, if any (``manor.answers.schema_in_prompt``).
    schema: dict[str, object] | None = None


@attrs.frozen
class RunRecord:
    """What happened to one run, in host clock seconds; ``None`` where it did not happen.

    ``status`` is one of queued, running, completed, error, cancelled, dropped.
    """

    run_id: str
    agent_id: str
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    status: str
    session_id: str = ""


@attrs.frozen
class HostStatistics:
    capacity: int
    running: int
    queued: int
    peak_running: int
    submitted: int
    completed: int
    errors: int
    cancelled: int
    dropped: int
    rejected: int


@attrs.define(eq=False)
class _Run:
    spec: RunSpec
    submitted_at: float
    send: trio.MemorySendChannel[object]
    receive: trio.MemoryReceiveChannel[object]
    status: str = "queued"
    started_at: float | None = None
    finished_at: float | None = None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    def post(self, item: object) -> None:
        try:
            self.send.send_nowait(item)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client is gone; the run goes on without it

    def record(self) -> RunRecord:
        return RunRecord(
            self.spec.run_id,
            self.spec.agent_id,
            self.submitted_at,
            self.started_at,
            self.finished_at,
            self.status,
            self.spec.session_id,
        )


@final
@attrs.define(eq=False)
class AgentHost:
    """A remote agent with ``capacity`` slots and a FIFO queue.

    Start it with ``await nursery.start(host.serve)``; cancelling that nursery ends every
    run. Then ``host.run(spec)`` streams one run's events.

    Args:
        agents: the agent ids served; a run for another id raises ``UnknownAgent``.
        capacity: runs in progress at once.
        reject_when_full: when every slot is busy, raise ``HostFull`` (an HTTP 429)
            instead of queueing.
        latency: seconds a run takes unless its message says ``@latency=S``.
        time_scale: every latency is multiplied by this (0.1: ten times faster).
        settle: awaited before a freed slot is handed to the queue. The default lets
            nothing wait; under the virtual clock the experiment passes
            ``trio.testing.wait_all_tasks_blocked`` so that clients whose deadline falls
            on the same instant leave the queue first (deadlines are inclusive).
    """

    agents: Sequence[str] = ("agent",)
    capacity: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    reject_when_full: bool = False
    latency: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    time_scale: float = attrs.field(default=1.0, validator=attrs.validators.gt(0))
    settle: Callable[[], Awaitable[object]] = trio.lowlevel.checkpoint
    _queue: deque[_Run] = attrs.field(factory=deque, init=False)
    _running: set[_Run] = attrs.field(factory=set, init=False)
    _runs: dict[str, _Run] = attrs.field(factory=dict, init=False)
    _wakeup: trio.Event = attrs.field(factory=trio.Event, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _counts: dict[str, int] = attrs.field(factory=dict, init=False)
    _peak: int = attrs.field(default=0, init=False)

    async def serve(self, *, task_status: trio.TaskStatus[AgentHost] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the host until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._dispatch)
            task_status.started(self)
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    async def run(self, spec: RunSpec, *, outlive_client: bool = False) -> AsyncGenerator[Event, None]:
        """Queue ``spec`` and stream its events: ``Started``, ``TextDelta``..., ``Done``.

        Args:
            outlive_client: when the consumer stops early, a started run goes on to its
                natural end instead of being cancelled.

        Raises:
            UnknownAgent, HostFull, ModelFailed, RunCancelled.
        """
        if spec.agent_id not in self.agents:
            raise UnknownAgent(spec.agent_id)
        if self._nursery is None:
            raise RuntimeError("AgentHost.run() before serve() started")
        self._count("submitted")
        # Queued runs count too: a run accepted a moment ago waits in the queue until the
        # dispatcher task moves it to a slot, and it has that slot already.
        if self.reject_when_full and len(self._queue) + len(self._running) >= self.capacity:
            self._count("rejected")
            raise HostFull(f"all {self.capacity} slots busy")
        send, receive = trio.open_memory_channel[object](math.inf)
        run = _Run(spec, trio.current_time(), send, receive)
        self._remember(run)
        self._queue.append(run)
        self._wakeup.set()
        try:
            async for item in receive:
                if isinstance(item, Exception):
                    raise item
                yield item  # type: ignore[misc]
                if isinstance(item, Done):
                    return
        finally:
            receive.close()
            if run.status == "queued":
                self._queue.remove(run)
                self._finish(run, "dropped")
            elif run.status == "running" and not outlive_client:
                run.scope.cancel()

    def resize(self, capacity: int) -> None:
        """Run at most ``capacity`` runs at once from now on: a platform whose limit
        moves. Runs already in progress above it finish; queued ones wait for room.

        Raises:
            ValueError: ``capacity`` is below 1.
        """
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._wakeup.set()

    def room(self) -> int:
        """Runs it would take now without queueing: its rate headers' "remaining"."""
        return max(0, self.capacity - len(self._running) - len(self._queue))

    def cancel(self, run_id: str) -> None:
        """Cancel a run now, queued or running. An unknown or finished run: nothing."""
        run = self._runs.get(run_id)
        if run is None:
            return
        if run.status == "queued":
            self._queue.remove(run)
            self._finish(run, "cancelled")
            run.post(RunCancelled(run_id))
        elif run.status == "running":
            run.scope.cancel()

    def records(self) -> list[RunRecord]:
        """Every remembered run, oldest first."""
        return [run.record() for run in self._runs.values()]

    def record(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        return None if run is None else run.record()

    def statistics(self) -> HostStatistics:
        count = self._counts.get
        return HostStatistics(
            capacity=self.capacity,
            running=len(self._running),
            queued=len(self._queue),
            peak_running=self._peak,
            submitted=count("submitted", 0),
            completed=count("completed", 0),
            errors=count("error", 0),
            cancelled=count("cancelled", 0),
            dropped=count("dropped", 0),
            rejected=count("rejected", 0),
        )

    async def _dispatch(self) -> None:
        assert self._nursery is not None
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            await self.settle()
            while self._queue and len(self._running) < self.capacity:
                run = self._queue.popleft()
                run.status = "running"
                run.started_at = trio.current_time()
                self._running.add(run)
                self._peak = max(self._peak, len(self._running))
                self._nursery.start_soon(self._work, run)

    async def _work(self, run: _Run) -> None:
        directives = run.spec.directives
        answer = _answer(run.spec)
        try:
            with run.scope:
                run.post(Started())
                if directives.hang:
                    await trio.sleep_forever()
                latency = (self.latency if directives.latency is None else directives.latency) * self.time_scale
                words = answer.split(" ")
                pieces = min(4, len(words))
                step = math.ceil(len(words) / pieces)
                start = trio.current_time()
                for i in range(pieces):
                    # Absolute times, so the pieces' sleeps do not add up their slack; the
                    # last one is exactly start + latency.
                    await trio.sleep_until(start + (latency if i == pieces - 1 else latency * (i + 1) / pieces))
                    chunk = " ".join(words[i * step : (i + 1) * step])
                    if chunk:
                        run.post(TextDelta(chunk if i == 0 else " " + chunk))
                if directives.model_error == 429:
                    # As Agno passes on an OpenAI-style provider's refusal.
                    self._finish(run, "error")
                    run.post(ModelFailed("Error code: 429 - Rate limit reached for requests (simulated). Please try again in 2s."))
                elif directives.model_error:
                    self._finish(run, "error")
                    run.post(ModelFailed(f"{run.spec.agent_id}: the model failed (simulated)"))
                else:
                    self._finish(run, "completed")
                    usage = Usage(input_tokens=len(run.spec.text.split()), output_tokens=len(words))
                    run.post(Done(text=answer, usage=usage))
            if run.scope.cancelled_caught:
                self._finish(run, "cancelled")
                run.post(RunCancelled(run.spec.run_id))
        finally:
            self._running.discard(run)
            self._wakeup.set()

    def _finish(self, run: _Run, status: str) -> None:
        run.status = status
        run.finished_at = trio.current_time()
        self._count(status)

    def _count(self, what: str) -> None:
        self._counts[what] = self._counts.get(what, 0) + 1

    def _remember(self, run: _Run) -> None:
        self._runs.pop(run.spec.run_id, None)
        self._runs[run.spec.run_id] = run
        while len(self._runs) > _MAX_RECORDS:
            del self._runs[next(iter(self._runs))]


def _answer(spec: RunSpec) -> str:
    """What the simulated model says: the message quoted, or, asked for JSON of a
    schema, valid JSON of it drawn from the message (the same message, the same answer)."""
    schema = spec.schema if spec.schema is not None else schema_in_prompt(spec.text)
    if schema is not None:
        return draw_from_schema(schema, random.Random(spec.text), (spec.agent_id, _quote(spec)))
    return _quote(spec)


def _quote(spec: RunSpec) -> str:
    if not spec.text:
        return f"{spec.agent_id} says nothing."
    words = spec.text.split()
    if len(words) > _QUOTED_WORDS:
        return f"{spec.agent_id} heard: {' '.join(words[:_QUOTED_WORDS])} …"
    return f"{spec.agent_id} heard: {spec.text}"
