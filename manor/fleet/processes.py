"""A fleet spread over OS processes: ``manor fleet --processes P``.

One process runs its worlds on one core at most. A fleet that needs more runs its N
worlds in P processes — world ``i`` in process ``i mod P`` (``manor.fleet.in_process.parts``) —
each a whole engine for its worlds (``manor.fleet.in_process.build_fleet``), and every call of
every world goes through the one gate shared through Redis (``manor.admission.redis_gate``): the
platform sees no more sessions than with one process.

Both ends are here. The parent (``ProcessFleet``) starts each process as ``python -m
manor fleet-part`` (a command ``manor --help`` does not list), writes its ``Part`` to
the process's stdin as one JSON line, and reads its messages, JSON lines on its stdout:
``Ready`` once it has joined the gate, a ``Ticked`` after each tick of each of its
worlds (the progress, the tick's makespan and the platform sessions its calls held) and
a ``Finished`` with each world's figures at the end. From them it builds the report of
a fleet in one process, with the same totals and fairness (``manor.fleet``); its
``peak_platform_sessions`` is the most calls in flight at once over every process,
counted from the calls' admission and end on the monotonic clock every process of the
machine shares (``PeakSessions``), and each world's share of the gate's session-time
(``manor.fleet.shares``) is counted from the same spans, every world a tenant by its
weight and cap, as in one process. The worlds start together: once every process is
ready, the parent renews their tenants' claims on the Redis gate in one transition (each
claimed its share from its join, which may have lapsed while the slowest started) and
tells each to start (a line on its stdin), so that a process that took longer to start,
or whose first calls reach the server a moment later, does not find the others' calls
holding its share.

Stopping. The processes run in sessions of their own, so a Ctrl-C at the terminal
reaches the parent alone. The parent stops each process still running once, with
SIGTERM (which ``manor`` takes as it takes Ctrl-C, and which a script's background job
does not ignore, unlike SIGINT): the process closes its saves with every tick it
finished. The parent reads its last messages, and kills it if it has not ended within
``STOP_GRACE_S``. It does so on a signal, and when one process fails, which it then
names with its worlds and why (``FleetError``). A process whose parent has gone (its
stdin closed) stops itself (``listen_to_parent``).
"""

from __future__ import annotations

import contextlib
import heapq
import math
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, final

import attrs
import msgspec
import trio

from ..config import Source
from ..errors import FleetError, SharedGateError, one_line
from ..records import CallRecord, StoryEntry, TickRecord
from ..tick.instruments import Instrument
from .in_process import add_shares, fairness, fleet_total
from .shares import CallSpan, shifted

__all__ = [
    "PART_COMMAND",
    "STOP_GRACE_S",
    "Finished",
    "Part",
    "PartReporter",
    "PeakSessions",
    "ProcessFleet",
    "Ready",
    "SavesFailed",
    "Ticked",
    "describe_worlds",
    "listen_to_parent",
    "message_channel",
    "read_part",
    "send",
]

#: The command a process of the fleet runs: ``python -m manor fleet-part``.
PART_COMMAND = "fleet-part"
#: How long a process may take to stop after SIGTERM before it is killed.
STOP_GRACE_S = 5.0
#: The last lines of a process's stderr kept, to say why it failed.
_ERRORS_KEPT = 20


class Part(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What one process runs: some worlds of the fleet that ``sources`` describe (the
    parent's settings as it read them: every process configures the same fleet)."""

    sources: list[Source]
    #: The fleet's worlds, all processes together, and its scenes (``configure_worlds``).
    worlds: int
    scenes: list[str]
    #: The worlds this process runs, by their number in the fleet.
    indices: list[int]
    #: Their save files, in the same order; none without ``--save-dir``.
    saves: list[str] = []
    force: bool = False
    #: Every agent on the scene's simulated backend, its latencies times this (``manor
    #: bench``'s redis-gate suite); ``None``: each agent's configured backend.
    sim_latency_scale: float | None = None


class Ready(msgspec.Struct, tag="ready", kw_only=True):
    """The process has joined the gate and waits for the word to start its worlds; on
    a gate shared through Redis, which gate (``url``, ``name``) and its ``tenant`` there,
    whose claim the parent renews before the word (``claim_shares``)."""

    url: str = ""
    name: str = ""
    tenant: str = ""


class Ticked(msgspec.Struct, tag="ticked", kw_only=True):
    """A world finished a tick: its makespan, when it ended, and its calls' spans at the
    gate, (queued, admitted or ``None``, ended) each: the platform sessions they held
    and the world's share of them; times on the machine's monotonic clock."""

    world: int
    makespan: float
    ended_at: float
    spans: list[CallSpan]


class Finished(msgspec.Struct, tag="finished", kw_only=True):
    """A world's figures, once its process's run has ended (``Fleet.world_summaries``)."""

    world: int
    figures: dict[str, Any]


class SavesFailed(msgspec.Struct, tag="saves_failed", kw_only=True):
    """A save of the process's worlds could not be written (said as it is stopped)."""

    problem: str


_MESSAGES = msgspec.json.Decoder(Ready | Ticked | Finished | SavesFailed)
_ENCODER = msgspec.json.Encoder()


def describe_worlds(indices: Sequence[int]) -> str:
    """``world 3``, ``worlds 1, 3, 5``, or ``worlds 0, 2, 4, …, 98 (50 worlds)``."""
    if len(indices) == 1:
        return f"world {indices[0]}"
    if len(indices) <= 6:
        return "worlds " + ", ".join(map(str, indices))
    return f"worlds {indices[0]}, {indices[1]}, {indices[2]}, …, {indices[-1]} ({len(indices)} worlds)"


# -- a process of the fleet ------------------------------------------------------------


def read_part(stream: BinaryIO) -> Part:
    """What this process runs: one JSON line on ``stream`` (its stdin).

    Raises:
        FleetError: the line is not a ``Part``.
    """
    try:
        return msgspec.json.decode(stream.readline(), type=Part)
    except msgspec.DecodeError as exc:
        raise FleetError(f"manor {PART_COMMAND}: its stdin is not a part of a fleet ({exc}); 'manor fleet --processes' runs this command") from None


def message_channel() -> BinaryIO:
    """Stdout, for messages to the parent alone: whatever else this process prints to
    stdout (a backend's library, say) goes to stderr, where it cannot break a message."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return channel


def send(channel: BinaryIO, message: Ready | Ticked | Finished | SavesFailed) -> None:
    """Write one message, whole, to the parent."""
    channel.write(_ENCODER.encode(message) + b"\n")
    channel.flush()


@final
class PartReporter(Instrument):
    """Tells the parent of each tick of world number ``world`` (``Ticked``)."""

    def __init__(self, world: int, channel: BinaryIO) -> None:
        self.world = world
        self.channel = channel
        self._offset = 0.0
        self._spans: list[CallSpan] = []

    def run_started(self, loop: object) -> None:
        # trio's clock is the monotonic clock plus an offset of its own, a different one
        # in every process: the parent compares the processes' times on the monotonic one.
        self._offset = time.perf_counter() - trio.current_time()

    def call_finished(self, record: CallRecord) -> None:
        # Every attempt, a superseded one too: each held a session while it ran.
        self._spans.append(shifted((record.queued_at, record.admitted_at, record.finished_at), self._offset))

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        ticked = Ticked(world=self.world, makespan=record.makespan, ended_at=record.finished_at + self._offset, spans=self._spans)
        self._spans = []
        send(self.channel, ticked)


async def listen_to_parent(start: trio.Event, orphaned: trio.CancelScope) -> None:
    """Set ``start`` when the parent says to start (it writes a line on stdin once every
    process is ready); cancel ``orphaned`` when stdin closes: the parent holds it open
    while it runs, so it closes when the parent has gone (killed, say) and nobody would
    stop this process."""
    async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
        while await stdin.receive_some():
            start.set()
    orphaned.cancel()


# -- the parent ------------------------------------------------------------------------


@final
@attrs.define(eq=False)
class PeakSessions:
    """The most platform sessions open at once over every process, counted as ticks
    are reported.

    A world reports its ticks in order, and none of its calls starts before its last
    reported tick ended; so every session that opens or closes before the earliest of
    the worlds' last reported tick ends is known, and is counted (and forgotten) then.
    """

    worlds: int
    peak: int = attrs.field(default=0, init=False)
    _open: int = attrs.field(default=0, init=False)
    # (time, +1 for a session opened or -1 for one closed), not counted yet; a close
    # sorts before an open at the same instant.
    _changes: list[tuple[float, int]] = attrs.field(factory=list, init=False)
    # Each world's last reported tick end (+inf once it has reported its last tick),
    # and the same as a heap (with stale entries) for the earliest of them.
    _reported: list[float] = attrs.field(init=False)
    _earliest: list[tuple[float, int]] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._reported = [-math.inf] * self.worlds
        self._earliest = [(-math.inf, world) for world in range(self.worlds)]

    def tick(self, world: int, ended_at: float, spans: Sequence[CallSpan], *, last: bool) -> None:
        for _, opened, closed in spans:
            if opened is not None:
                heapq.heappush(self._changes, (opened, 1))
                heapq.heappush(self._changes, (closed, -1))
        self._reported[world] = math.inf if last else ended_at
        heapq.heappush(self._earliest, (self._reported[world], world))
        while self._earliest[0][0] != self._reported[self._earliest[0][1]]:
            heapq.heappop(self._earliest)
        self._count(before=self._earliest[0][0])

    def finish(self) -> int:
        """Count what is left (the run has ended); the peak."""
        self._count(before=math.inf)
        return self.peak

    def _count(self, before: float) -> None:
        changes = self._changes
        while changes and changes[0][0] < before:
            self._open += heapq.heappop(changes)[1]
            self.peak = max(self.peak, self._open)


@final
@attrs.define(eq=False)
class ProcessFleet:
    """The worlds of a fleet run in OS processes, one ``Part`` each.

    Args:
        parts: what each process runs; together, every world of the fleet once.
        ticks: the ticks every world runs.
        ticked: called after each tick of any world (a progress bar).
        warn: called with each distinct warning line the processes print.
    """

    parts: Sequence[Part]
    ticks: int
    ticked: Callable[[], None] = lambda: None
    warn: Callable[[str], None] = lambda line: None
    _done: list[int] = attrs.field(init=False)
    _makespans: list[list[float]] = attrs.field(init=False)
    _figures: dict[int, dict[str, Any]] = attrs.field(factory=dict, init=False)
    # Each world's calls' spans at the gate (``Ticked``), for the shares.
    _spans: list[list[CallSpan]] = attrs.field(init=False)
    _peak: PeakSessions = attrs.field(init=False)
    _warned: set[str] = attrs.field(factory=set, init=False)
    _failures: list[str] = attrs.field(factory=list, init=False)
    _saves_problem: str | None = attrs.field(default=None, init=False)
    _ready: list[Ready] = attrs.field(factory=list, init=False)
    _all_ready: trio.Event = attrs.field(factory=trio.Event, init=False)
    _started: trio.Event = attrs.field(factory=trio.Event, init=False)

    def __attrs_post_init__(self) -> None:
        worlds = sum(len(part.indices) for part in self.parts)
        self._done = [0] * worlds
        self._makespans = [[] for _ in range(worlds)]
        self._spans = [[] for _ in range(worlds)]
        self._peak = PeakSessions(worlds)

    @property
    def ticks_done(self) -> list[int]:
        """Ticks finished, world by world."""
        return list(self._done)

    @property
    def makespans(self) -> list[list[float]]:
        """Each world's tick makespans so far, in order, world by world."""
        return [list(spans) for spans in self._makespans]

    @property
    def worlds_reported(self) -> int:
        """Worlds whose figures have come in (every world's, once ``run`` has returned;
        stopped, those of the processes that said them as they stopped)."""
        return len(self._figures)

    @property
    def saves_problem(self) -> str | None:
        """What went wrong with a save, as a process said when it was stopped."""
        return self._saves_problem

    async def run(self) -> None:
        """Run every process to its end; stopped (cancelled), stop them all first.

        Raises:
            FleetError: a process failed (the line names its worlds and says why);
                the others were stopped, their saves closed.
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._start)
            async with trio.open_nursery() as parts:
                for part in self.parts:
                    parts.start_soon(self._run_part, part, nursery.cancel_scope)
            nursery.cancel_scope.cancel()  # the start, if a process ended before all were ready
        if self._failures:
            more = len(self._failures) - 1
            raise FleetError(self._failures[0] + (f" (and {more} more process{'es' if more > 1 else ''})" if more else ""))

    def summary(self) -> dict[str, Any]:
        """The report of a fleet in one process (``Fleet.summary``), once ``run`` has
        returned; stopped, of the worlds reported (``worlds_reported``, at least one)."""
        worlds = [self._figures[index] for index in sorted(self._figures)]
        add_shares(worlds, [self._spans[world["index"]] for world in worlds])
        total = fleet_total(worlds, peak_platform_sessions=self._peak.finish(), makespans=[span for spans in self._makespans for span in spans])
        return {"worlds": worlds, "total": total, "fairness": fairness(worlds)}

    async def _run_part(self, part: Part, fleet: trio.CancelScope) -> None:
        """Run one process to its end, or stop it when ``fleet`` is cancelled; if it
        fails, say why and cancel ``fleet``."""
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "manor", PART_COMMAND],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # A Ctrl-C at the terminal reaches the parent alone, which stops each process
            # once (a second signal would make it quit without closing its saves).
            start_new_session=True,
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        errors: deque[str] = deque(maxlen=_ERRORS_KEPT)
        garbled: list[str] = []
        # Reading goes on while the process stops, for the ticks it finishes meanwhile.
        reading = trio.CancelScope(shield=True)
        stopped = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read, process, errors, garbled, reading)
            try:
                async with trio.open_nursery() as starting:
                    starting.start_soon(self._hand_over, process, part)
                    await process.wait()
                    starting.cancel_scope.cancel()  # it ended before every process was ready
            finally:
                with trio.CancelScope(shield=True):
                    if process.returncode is None:
                        stopped = True
                        await _stop(process)
                    # A process that leaves its stdout open to one of its own children.
                    reading.deadline = trio.current_time() + 1.0
                    await process.stdin.aclose()
        if stopped:
            return
        why = _failure(process.returncode, errors)
        if why is None and garbled:
            why = f"it wrote {garbled[0]!r} where a message belongs"
        if why is None and not all(index in self._figures for index in part.indices):
            why = "it ended without its worlds' figures"
        if why is not None:
            self._failures.append(f"fleet {describe_worlds(part.indices)} (process {process.pid}): {why}")
            fleet.cancel()

    async def _start(self) -> None:
        """Once every process is ready: on a gate shared through Redis, their tenants
        claim their shares from now, in one transition (each process's claim from its
        join has lapsed while it waited for the slowest to start, and whichever part's
        first calls reached the server first took every free slot); then the word to
        start may go."""
        await self._all_ready.wait()
        shared = [ready for ready in self._ready if ready.url]
        if shared:
            from ..admission.redis_gate import (
                claim_shares,  # Redis is touched only for a shared gate
            )

            with contextlib.suppress(SharedGateError):  # each process finds the server lost itself
                await claim_shares(shared[0].url, shared[0].name, sorted({ready.tenant for ready in shared}))
        self._started.set()

    async def _hand_over(self, process: trio.Process, part: Part) -> None:
        """Give the process its part, and once every process is ready, the word to start."""
        assert process.stdin is not None
        try:
            await process.stdin.send_all(_ENCODER.encode(part) + b"\n")
            await self._started.wait()
            await process.stdin.send_all(b"start\n")
        except trio.BrokenResourceError:
            pass  # it has ended already: its status says why

    async def _read(self, process: trio.Process, errors: deque[str], garbled: list[str], reading: trio.CancelScope) -> None:
        assert process.stdout is not None and process.stderr is not None
        with reading:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_read_lines, process.stdout, lambda line: self._take(line, garbled))
                nursery.start_soon(_read_lines, process.stderr, lambda line: self._said(line, errors))

    def _take(self, line: bytes, garbled: list[str]) -> None:
        try:
            message = _MESSAGES.decode(line)
        except msgspec.DecodeError:
            garbled.append(one_line(line.decode(errors="replace"))[:80])
            return
        if isinstance(message, Ticked):
            self._done[message.world] += 1
            self._makespans[message.world].append(message.makespan)
            self._spans[message.world] += message.spans
            last = self._done[message.world] == self.ticks
            self._peak.tick(message.world, message.ended_at, message.spans, last=last)
            self.ticked()
        elif isinstance(message, Ready):
            self._ready.append(message)
            if len(self._ready) == len(self.parts):
                self._all_ready.set()
        elif isinstance(message, Finished):
            self._figures[message.world] = message.figures
        elif self._saves_problem is None:
            self._saves_problem = message.problem

    def _said(self, line: bytes, errors: deque[str]) -> None:
        text = one_line(line.decode(errors="replace").rstrip())
        if text.startswith("manor: warning: "):
            if text not in self._warned:
                self._warned.add(text)
                self.warn(text)
        elif text:
            errors.append(text)


async def _read_lines(stream: trio.abc.ReceiveStream, take: Callable[[bytes], None]) -> None:
    """Give ``take`` each line ``stream`` carries (without its newline), to its end."""
    pending = bytearray()
    while chunk := await stream.receive_some():
        pending += chunk
        *lines, rest = pending.split(b"\n")
        for line in lines:
            take(bytes(line))
        pending = rest
    if pending:
        take(bytes(pending))


async def _stop(process: trio.Process) -> None:
    """SIGTERM, which stops it as Ctrl-C stops ``manor fleet``; killed if it is still
    running after ``STOP_GRACE_S``."""
    process.send_signal(signal.SIGTERM)
    with trio.move_on_after(STOP_GRACE_S):
        await process.wait()
        return
    process.kill()
    await process.wait()


def _failure(status: int, errors: Sequence[str]) -> str | None:
    """Why a process that ended with ``status`` failed, from its last line; ``None``
    if it did not (status 0)."""
    if status == 0:
        return None
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    if not errors:
        return f"it exited with status {status}"
    line = errors[-1].removeprefix("manor: ")
    return line.removeprefix("error: ")
