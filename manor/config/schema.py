"""Every setting Manor has, as msgspec Structs: the schema the layered sources fill.

A key is ``section.field`` (``gate.size``); its environment variable is
``MANOR_SECTION_FIELD`` (``MANOR_GATE_SIZE``); its flag, where it has one, is declared
by the command that takes it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from ..limits import (
    MAX_AGENTS,
    MAX_FAILURES,
    MAX_REPAIRS,
    Burst,
    Count,
    GateName,
    TenantName,
    Weight,
    GateUrl,
    LeaseSeconds,
    Money,
    PositiveSeconds,
    Rate,
    Seconds,
    Seed,
    Size,
    Ticks,
)

__all__ = ["DERIVED_KEYS", "FORMER_DEFAULTS", "KEYS", "POLICIES", "RETIRED_KEYS", "GateSettings", "GateValues", "Settings", "section_type"]

# Every bound is declared here, in the types (see manor.limits): one declaration checks
# manor.toml, MANOR_* variables, flags and the settings a save recorded.
Probability = Annotated[float, Meta(ge=0, le=1)]
Agents = Annotated[int, Meta(ge=1, le=MAX_AGENTS)]

POLICIES = ("pipeline", "batch", "legacy")


class Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Base of every settings table: an unknown key is an error."""


class PlatformSettings(Section):
    #: The provider platform's session limit (0 = unlimited).
    limit: Count = 6


class GateValues(Section):
    """What the sources may say of the gate: its size, and the learned gate's largest,
    may be left unset (``resolve`` derives them), so ``GateSettings`` is what a resolved
    configuration holds."""

    #: Calls in flight at once; unset means platform.limit - 1; "auto": learned from
    #: the platform's refusals, between gate.min and gate.max (manor.admission.adaptive).
    size: Size | Literal["auto"] | None = None
    #: With size "auto": the size the gate starts at and never grows past; unset, it is
    #: derived as platform.limit - 1 (16 when the platform is unlimited).
    max: Size | None = None
    #: With size "auto": the size the gate never shrinks below.
    min: Size = 1
    #: Token bucket refill, calls per second (0 = no bucket).
    rate: Rate = 0.0
    #: Token bucket capacity.
    burst: Burst = 1
    #: Longest wait at the gate before the call degrades as gate_timeout.
    timeout_s: PositiveSeconds = 30.0
    #: Share the gate across processes and machines through this Redis server
    #: (redis://host:port/db); unset or empty: the gate is this process's own.
    url: GateUrl | None = None
    #: The shared gate's name: every process with the same url and name shares one gate.
    name: GateName = "manor"
    #: How long a shared gate's permit lasts unless its process renews it (a process
    #: killed while calls run loses their permits within this).
    lease_s: LeaseSeconds = 5.0
    #: How long a tenant that shares the gate with others (a world of a fleet) keeps a
    #: claim on its share of the slots after its last call ended: others may borrow
    #: beyond their own share only slots nobody claims (0: lend every idle slot at once).
    claim_s: Seconds = 2.0
    #: How long a run waits for its shared gate (gate.url) when every call of a tick
    #: found it lost (Redis unreachable), before the next tick; after this it stops,
    #: its save kept (0: stop at the first such tick).
    unavailable_wait_s: Seconds = 120.0
    #: This process's tenant at a shared gate (gate.url): processes with the same tenant
    #: share its share; unset or empty: this host and process id.
    tenant: TenantName = ""
    #: This process's tenant's weight at a shared gate, against the other tenants'.
    weight: Weight = 1.0
    #: The most calls this process's tenant may have in flight at a shared gate (0: no
    #: cap but the gate's size).
    max_sessions: Count = 0


class GateSettings(GateValues):
    """The gate's settings, resolved: its size always known — a number, or "auto" with
    its ``max`` derived when unset."""

    size: Size | Literal["auto"]

    @property
    def learns(self) -> bool:
        """Whether the size is learned from the platform's refusals ("auto")."""
        return self.size == "auto"

    @property
    def first_size(self) -> int:
        """The size the gate starts at: its size, or when learned, ``max`` (derived by
        ``resolve`` when left unset)."""
        if self.size != "auto":
            return self.size
        assert self.max is not None, "resolve() derives gate.max for a learned size"
        return self.max


class CallSettings(Section):
    #: Longest a call may take before it degrades as call_timeout.
    timeout_s: PositiveSeconds = 60.0
    #: Times an answer that is not of its request's shape is asked again, with the
    #: error quoted, before the call degrades as invalid_output (manor.answers).
    repair_attempts: Annotated[int, Meta(ge=0, le=MAX_REPAIRS)] = 1


class BreakerSettings(Section):
    #: Consecutive backend failures that open the circuit.
    failures: Annotated[int, Meta(ge=1, le=MAX_FAILURES)] = 5
    #: Seconds the circuit stays open before a trial call.
    cooldown_s: Seconds = 30.0


class CostSettings(Section):
    price_per_1k_tokens: Money = 0.0
    #: Total spend allowed (0 = no budget).
    budget: Money = 0.0


class BackendSettings(Section):
    #: The backend every agent uses, unless a source at least as high maps it in
    #: [agent_backends]: "sim" (the embedded simulator) or a [backends.NAME] table.
    default: Annotated[str, Meta(min_length=1)] = "sim"
    #: The backend's own concurrency cap (0 = unlimited: the shared gate subsumes it).
    sessions: Count = 4


class SimSettings(Section):
    #: Chance a simulated call fails.
    error_rate: Probability = 0.0
    #: Chance a simulated call never answers.
    hang_rate: Probability = 0.0
    #: Chance a simulated answer to a request with a shape is not valid JSON of it.
    invalid_rate: Probability = 0.0


class RunSettings(Section):
    #: Scene name (from scenes/) or a path to a scene file.
    scene: str = "wacky_manor"
    ticks: Ticks = 20
    policy: Literal["pipeline", "batch", "legacy"] = "pipeline"
    #: Characters per barrier for the batch and legacy policies.
    batch_size: Size = 3
    #: Overrides the scene's seed.
    seed: Seed | None = None
    #: virtual (simulated time, exact) or real; unset: virtual for the simulated backend.
    clock: Literal["virtual", "real"] | None = None
    #: Order the tick loop hands out tickets in (see manor.tick.ordering).
    order: Literal["fifo", "longest-first"] = "longest-first"
    #: Seconds between tick starts (0 = free-running).
    tick_interval_s: Seconds = 0.0
    #: Seconds after which a tick's outstanding calls are cancelled (0 = none).
    tick_deadline_s: Seconds = 0.0
    #: Replace the scene's cast with this many generated characters.
    agents: Agents | None = None


class Settings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The resolved settings (``manor.config.resolve``): every key has its value, the
    derived ones (``DERIVED_KEYS``) included, but for ``run.clock`` left to the backends."""

    platform: PlatformSettings = PlatformSettings()
    gate: GateSettings
    call: CallSettings = CallSettings()
    breaker: BreakerSettings = BreakerSettings()
    cost: CostSettings = CostSettings()
    backend: BackendSettings = BackendSettings()
    sim: SimSettings = SimSettings()
    run: RunSettings = RunSettings()


#: Keys this Manor no longer has, and what replaced them (for the message, and so that
#: saves that recorded them replay without a warning: their only value was the default).
RETIRED_KEYS: dict[str, str] = {
    "backend.kind": "name a backend with backend.default (or --backend) and define it in a [backends.NAME] table",
}

#: Keys whose built-in default changed, and the default they had before: a save written
#: before the key existed has no row for it and ran as that default did, so it replays
#: with it (a save written since records every key, its default included).
FORMER_DEFAULTS: dict[str, Any] = {
    "run.order": "fifo",  # longest-first became the default (issue 15)
    "gate.claim_s": 0.0,  # claims on a share came with issue 23's long calls
}

#: Keys the configuration derives from others when they are left unset (origin
#: "derived: ..."): the gate size and the learned gate's largest from the platform
#: limit, the clock from the backends.
DERIVED_KEYS = frozenset({"gate.size", "gate.max", "run.clock"})

#: Each section's type as the sources fill it (a derived key may be left unset).
_SECTIONS: dict[str, type[Section]] = {f.name: f.type for f in msgspec.structs.fields(Settings)} | {"gate": GateValues}

#: Every key, ``section.field``, in schema order.
KEYS: tuple[str, ...] = tuple(
    f"{section}.{field.name}" for section, kind in _SECTIONS.items() for field in msgspec.structs.fields(kind)
)


def section_type(section: str) -> type[Section]:
    return _SECTIONS[section]


def defaults() -> dict[str, Any]:
    """The built-in default of every key."""
    sections = {section: msgspec.to_builtins(kind()) for section, kind in _SECTIONS.items()}
    return {key: sections[key.split(".")[0]][key.split(".")[1]] for key in KEYS}
