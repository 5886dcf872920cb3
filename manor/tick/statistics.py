"""Run statistics: the figures ``manor run`` prints and ``--json`` returns."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, final

import attrs
import trio

from ..admission.adaptive import LEARNED_KEY, Adjustment
from ..calls import Request
from ..errors import REASONS
from ..records import CallRecord, StoryEntry, TickRecord
from ..worlds.world import World
from .instruments import Instrument

if TYPE_CHECKING:
    from ..config import Config
    from ..content import Scene
    from .loop import TickLoop

__all__ = [
    "ErrorMessages", "GateSizes", "PlatformRejections", "Reported", "RunStatistics", "empty_degradations", "no_call_succeeded", "percentile",
    "tick_seconds",
]  # fmt: skip


def no_call_succeeded(figures: Iterable[dict[str, Any]]) -> str | None:
    """``no call succeeded: 266 circuit_open, 14 provider_error — first: ...`` when the
    runs of ``figures`` (``RunStatistics.summary``: a run, a replay, a fleet's worlds)
    made calls and none succeeded; ``None`` otherwise."""
    figures = list(figures)
    if not sum(f["calls"] for f in figures) or sum(f["ok"] for f in figures):
        return None
    reasons: Counter[str] = Counter()
    for f in figures:
        for counts in f["degradations"].values():
            reasons.update({reason: count for reason, count in counts.items() if count})
    line = "no call succeeded: " + ", ".join(f"{count} {reason}" for reason, count in reasons.most_common())
    first = next((f["first_error"] for f in figures if f.get("first_error")), None)
    if first is not None:
        who = first["caller"] if first["agent"] == first["caller"] else f"{first['caller']} {first['agent']}"
        line += f" — first: {who} at tick {first['tick']}, {first['reason']}: {first['message'] or '(no message)'}"
    return line


class Reported(Protocol):
    """What a run's figures are reported beside: its settings, its scene and its loop
    (``manor.run.engine.Engine`` is one)."""

    @property
    def config(self) -> Config: ...

    @property
    def scene(self) -> Scene: ...

    @property
    def loop(self) -> TickLoop: ...


def empty_degradations(kinds: Iterable[str] = ()) -> dict[str, dict[str, int]]:
    """caller kind -> reason -> 0, for every kind (the world's: ``World.callers``) and
    reason: zero is shown as zero."""
    return {kind: dict.fromkeys(REASONS, 0) for kind in kinds}


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), interpolating linearly between ranks."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def tick_seconds(spans: Sequence[float]) -> dict[str, float]:
    """Tick makespans as reports show them: mean, p50, p95 and max, in seconds."""
    return {
        "mean": round(sum(spans) / len(spans), 6) if spans else 0.0,
        "p50": round(percentile(spans, 50), 6),
        "p95": round(percentile(spans, 95), 6),
        "max": round(max(spans, default=0.0), 6),
    }


@final
@attrs.define
class PlatformRejections:
    """The one definition of platform rejections, shown alike by ``run``, ``replay``,
    ``bench``, the dashboard and saves: every call degraded ``platform_rejected``, split
    by who refused it — Manor's own platform limiter, or the server (a 429). Tries the
    legacy policy retried after a refusal are not calls that degraded; they are counted
    apart, as ``retried`` (each superseded try that was no repair was a refusal: legacy
    retries nothing else).
    """

    by_limiter: int = 0
    by_server: int = 0
    retried: int = 0

    @property
    def total(self) -> int:
        return self.by_limiter + self.by_server

    def count(self, calls: Iterable[CallRecord]) -> None:
        """Count a tick's calls (the final try of each)."""
        for call in calls:
            self.retried += call.attempts - 1 - call.repairs
            if call.reason == "platform_rejected":
                if call.refused_by == "server":
                    self.by_server += 1
                else:
                    self.by_limiter += 1

    def as_dict(self) -> dict[str, int]:
        return {"total": self.total, "by_limiter": self.by_limiter, "by_server": self.by_server, "retried": self.retried}

    @staticmethod
    def describe(figures: dict[str, int]) -> str:
        """``as_dict()``'s figures in one line, as the reports print them."""
        text = f"{figures['total']} ({figures['by_limiter']} by limiter, {figures['by_server']} by server)"
        return text + (f"; {figures['retried']} refused tries retried" if figures["retried"] else "")


@final
class ErrorMessages:
    """How often each message was a degraded call's error, by reason and caller kind.

    Args:
        kept: distinct messages kept per (reason, caller kind); the rest are counted
            together as one "(other messages)" entry, so a server that puts a request id
            in every message cannot grow this without bound.
    """

    OTHER = "(other messages)"

    def __init__(self, kept: int = 100) -> None:
        self._kept = kept
        self._counts: dict[tuple[str, str], Counter[str]] = {}

    def count(self, call: CallRecord) -> None:
        counts = self._counts.setdefault((call.reason or "provider_error", call.caller), Counter())
        message = call.error or "(no message)"
        if message not in counts and len(counts) >= self._kept:
            message = self.OTHER
        counts[message] += 1

    def most_common(self, per_group: int = 5, *, kinds: Iterable[str] = ()) -> list[dict[str, Any]]:
        """The ``per_group`` most common messages of each (reason, caller kind), in the
        order reports show reasons and ``kinds`` (the world's), most common first:
        ``{reason, caller, message, count}`` each."""
        rows: list[dict[str, Any]] = []
        kinds = list(kinds)
        kinds += sorted({caller for _, caller in self._counts} - set(kinds))
        for reason in REASONS:
            for caller in kinds:
                counts = self._counts.get((reason, caller))
                if counts:
                    for message, count in counts.most_common(per_group):
                        rows.append({"reason": reason, "caller": caller, "message": message, "count": count})
        return rows


@final
@attrs.define
class GateSizes:
    """The gate's size over a run: where it started and every change, a learned gate's
    (``manor.admission.adaptive``) and those made by hand, each with its tick, its time
    (``None``: between ticks) and why."""

    start: int | None = None
    history: list[dict[str, Any]] = attrs.field(factory=list)

    def changed(self, tick: int, at: float | None, size: int, why: str) -> None:
        self.history.append({"tick": tick, "at": at, "size": size, "why": why})

    def as_dict(self, final: int) -> dict[str, Any]:
        """``start``, ``min``, ``max``, ``final``, ``changes`` (how many) and ``history``."""
        sizes = [self.start if self.start is not None else final, *(change["size"] for change in self.history)]
        return {"start": sizes[0], "min": min(sizes), "max": max(sizes), "final": final, "changes": len(self.history), "history": self.history}


@final
class RunStatistics(Instrument):
    """Counts every call's outcome and every tick's makespan, as ticks finish."""

    def __init__(self) -> None:
        self.ticks = 0
        self.calls = 0
        self.ok = 0
        #: caller kind -> reason -> count, zeros included: none until a run starts, then
        #: its world's (a kind no world declared is added as seen).
        self.degradations = empty_degradations()
        self.makespans: list[float] = []
        self.world_hash = ""
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self.rejections = PlatformRejections()
        self.errors = ErrorMessages()
        #: Repairs asked (``call.repair_attempts``), and the calls they made ok.
        self.repairs_asked = 0
        self.repaired = 0
        #: The first call that degraded (the earliest to end, of the first tick with
        #: one): with a breaker, the cause, where the most common is ``circuit_open``.
        self.first_error: CallRecord | None = None
        self.gate_sizes = GateSizes()
        self._tick = 0

    def run_started(self, loop: TickLoop) -> None:
        if not self.calls:
            self.degradations = empty_degradations(loop.world.callers)
        if self.gate_sizes.start is None:
            self.gate_sizes.start = loop.gate.size

    def tick_started(self, tick: int, requests: Sequence[Request]) -> None:
        self._tick = tick

    def setting_changed(self, key: str, value: object, during_tick: bool) -> None:
        at = trio.current_time() if during_tick else None
        if key == "gate.size":
            self.gate_sizes.changed(self._tick, at, int(value), "set by hand")  # type: ignore[call-overload]
        elif key == LEARNED_KEY and isinstance(value, Adjustment) and value.size is not None:
            self.gate_sizes.changed(self._tick, at, value.size, value.why)

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.ticks += 1
        self.makespans.append(record.makespan)
        self.world_hash = record.world_hash
        for call in record.calls:
            self.calls += 1
            self.input_tokens += call.input_tokens
            self.output_tokens += call.output_tokens
            self.cost += call.cost
            ok = call.outcome == "ok"  # (not the ``ok`` property: a frame for every call)
            if call.repairs:
                self.repairs_asked += call.repairs
                self.repaired += ok
            if ok:
                self.ok += 1
            else:
                counts = self.degradations.get(call.caller)
                if counts is None:
                    counts = self.degradations[call.caller] = dict.fromkeys(REASONS, 0)
                counts[call.reason or "provider_error"] += 1
                self.errors.count(call)
        if self.first_error is None and self.ok < self.calls:
            self.first_error = min((call for call in record.calls if not call.ok), key=lambda call: call.finished_at)
        self.rejections.count(record.calls)

    def degradation_counts(self, kinds: Iterable[str]) -> dict[str, dict[str, int]]:
        """caller kind -> reason -> count, for each of ``kinds`` (the world's, in its
        order) and every reason, zeros included."""
        counts = empty_degradations(kinds)
        for kind, by_reason in self.degradations.items():
            counts.setdefault(kind, dict.fromkeys(REASONS, 0)).update(by_reason)
        return counts

    @property
    def degraded(self) -> int:
        return self.calls - self.ok

    def tick_seconds(self) -> dict[str, float]:
        return tick_seconds(self.makespans)

    def summary(self, engine: Reported) -> dict[str, Any]:
        """The run's figures, as ``manor run --json`` prints them."""
        loop = engine.loop
        platform = loop.limiter.statistics()
        return self.figures(
            scene=engine.scene.spec.name, policy=loop.policy.name, order=loop.order, seed=engine.config.settings.run.seed,
            platform_limit=platform.limit, gate_size=loop.gate.size, learns=engine.config.settings.gate.learns,
            peak_platform_sessions=platform.peak, world=loop.world,
        )  # fmt: skip

    def figures(
        self, *, scene: str, policy: str, order: str, seed: int | None, platform_limit: int, gate_size: int, learns: bool,
        peak_platform_sessions: int, world: World,
    ) -> dict[str, Any]:  # fmt: skip
        """The run's figures, as ``manor run --json`` prints them, for a run of these
        settings that left ``world`` (``summary`` takes them from its engine; a save's
        recorded figures from the save). ``learns``: the gate's size was learned
        (``gate.size = auto``): its sizes over the run are given too."""
        kinds = list(world.callers)
        over = world.over
        return {
            "scene": scene,
            "policy": policy,
            "order": order,
            "ticks": self.ticks,
            "seed": seed,
            "platform_limit": platform_limit,
            "gate_size": gate_size,
            **({"gate_sizes": self.gate_sizes.as_dict(gate_size)} if learns else {}),
            "calls": self.calls,
            "ok": self.ok,
            "degraded": self.degraded,
            "degradations": self.degradation_counts(kinds),
            "platform_rejections": self.rejections.as_dict(),
            "repairs": {"asked": self.repairs_asked, "repaired": self.repaired},
            "errors": self.errors.most_common(kinds=kinds),
            "first_error": None if (first := self.first_error) is None else {
                "tick": first.tick, "caller": first.caller, "agent": first.agent, "reason": first.reason, "message": first.error,
            },
            "peak_platform_sessions": peak_platform_sessions,
            "tick_seconds": self.tick_seconds(),
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "cost": round(self.cost, 6),
            # Before any tick (--ticks 0) the world still has its starting hash.
            "world_hash": self.world_hash or world.hash,
            "world": {
                "name": world.name,
                "version": world.version,
                "over": over is not None,
                "summary": over.summary if over is not None else None,
                "result": over.result if over is not None else None,
            },
        }
