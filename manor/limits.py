"""The largest sizes and values Manor accepts, declared once as constrained types.

The settings schema, the content schema (scenes, agents, simulated profiles) and so
the save reader all build on these, so a value is refused at load — from manor.toml,
``MANOR_*``, a flag, a scene or a save alike — with one line naming its source and key,
instead of crashing or hanging a run later:

- every number is finite (``nan`` and ``inf`` are refused by the bounds below);
- every integer fits the save format (MessagePack holds 64-bit integers);
- every size has a maximum, so that a typo cannot run for hours or eat the memory.

docs/configuration.md ("Limits") lists them for users; keep the two in step.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from msgspec import Meta

__all__ = [
    "AgentId",
    "Burst",
    "Count",
    "GateName",
    "MAX_WEIGHT",
    "TenantName",
    "Weight",
    "GateUrl",
    "gate_url_problem",
    "LeaseSeconds",
    "MAX_AGENTS",
    "MAX_WORLDS",
    "DEFAULT_WORLDS",
    "MAX_BEATS_PER_TICK",
    "MAX_BURST",
    "MAX_FAILURES",
    "MAX_REPAIRS",
    "MAX_ID_LENGTH",
    "MAX_JITTER",
    "MAX_LEASE_SECONDS",
    "MAX_LINE_WIDTH",
    "MAX_MONEY",
    "MAX_RATE",
    "MAX_SECONDS",
    "MAX_SIZE",
    "MAX_TICKS",
    "MIN_LEASE_SECONDS",
    "Money",
    "PositiveSeconds",
    "Rate",
    "Seconds",
    "Seed",
    "Size",
    "Ticks",
]

#: Characters in a cast (``run.agents``, a scene's ``cast``). A tick of 100,000 simulated
#: characters takes about 10 s and 700 MB.
MAX_AGENTS = 100_000
#: Worlds in a fleet (``manor fleet --worlds``).
MAX_WORLDS = 1_000
#: A fleet's worlds when neither a number nor scenes are given: beside the maximum, so
#: that the command line states both without loading the fleet.
DEFAULT_WORLDS = 4
#: Calls in flight, sessions, barrier sizes: more than a tick could ever make at once.
MAX_SIZE = 100_000
#: Token bucket capacity.
MAX_BURST = 1_000_000
#: Scene-beat calls per tick.
MAX_BEATS_PER_TICK = 1_000
#: Ticks in a run.
MAX_TICKS = 10**9
#: Consecutive failures before the breaker opens.
MAX_FAILURES = 1_000_000
#: Repairs of one invalid answer: each is another call through the gate.
MAX_REPAIRS = 5
#: Any duration: a week. Longer is indistinguishable from "never" for a run, and a
#: clock that must reach ``inf`` never gets there.
MAX_SECONDS = 7 * 24 * 3600.0
#: Token bucket refill, calls per second.
MAX_RATE = 1e6
#: Prices and budgets.
MAX_MONEY = 1e12
#: The spread (log-normal sigma) of a simulated latency.
MAX_JITTER = 3.0
#: An agent's id: it names its file, ``agents/<id>.toml``.
MAX_ID_LENGTH = 64
#: The largest weight a tenant of a shared gate may have.
MAX_WEIGHT = 1_000_000.0
#: The widest field in a simulated line template (``{someone:>20}``).
MAX_LINE_WIDTH = 200
#: A shared gate's lease: long enough to be renewed over a loaded network, short
#: enough that a killed process's permits come back within minutes.
MIN_LEASE_SECONDS, MAX_LEASE_SECONDS = 0.5, 3600.0


Seconds = Annotated[float, Meta(ge=0, le=MAX_SECONDS)]
PositiveSeconds = Annotated[float, Meta(gt=0, le=MAX_SECONDS)]
Rate = Annotated[float, Meta(ge=0, le=MAX_RATE)]
Money = Annotated[float, Meta(ge=0, le=MAX_MONEY)]
#: A size: 1 .. MAX_SIZE.
Size = Annotated[int, Meta(ge=1, le=MAX_SIZE)]
#: A count that may be zero (0 often means "unlimited"): 0 .. MAX_SIZE.
Count = Annotated[int, Meta(ge=0, le=MAX_SIZE)]
Burst = Annotated[int, Meta(ge=1, le=MAX_BURST)]
Ticks = Annotated[int, Meta(ge=0, le=MAX_TICKS)]
#: A seed: any 64-bit signed integer (a save holds 64-bit integers; msgspec bounds
#: only signed ones).
Seed = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
#: Letters, digits, ``_`` and ``-``: a file name on every system, never a path.
AgentId = Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")]
#: A Redis server, or nothing.
GateUrl = Annotated[str, Meta(max_length=2000, pattern=r"^$|^(redis|rediss|unix)://")]


def gate_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a shared gate's server (``GateUrl`` checks its
    scheme), in words for a one-line error; ``None`` if nothing is. The Redis client
    would fail on it later, and not in words a user can act on."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        if "Port" in str(exc):
            return "the port must be a number from 1 to 65535"
        return f"not a URL: {exc}"
    if parts.scheme == "unix":
        return None if parts.path else "no socket path (unix:///path/to/redis.sock)"
    if not parts.hostname:
        return f"no host ({parts.scheme}://HOST:PORT/DB)"
    if port == 0:
        return "the port must be a number from 1 to 65535"
    if (db := parts.path.strip("/")) and not db.isdigit():
        return f"the database after the host must be a number, not {db!r}"
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "db" and not value.isdigit():
            return f"?db= must be a number, not {value!r}"
    return None
#: Part of every key of the gate at the server.
GateName = Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[A-Za-z0-9_.-]+$")]
#: A tenant of a shared gate: empty (this host and process) or a name without '|'.
TenantName = Annotated[str, Meta(max_length=MAX_ID_LENGTH, pattern=r"^[A-Za-z0-9_.:@#-]*$")]
#: A tenant's weight against the others'.
Weight = Annotated[float, Meta(gt=0, le=MAX_WEIGHT)]
LeaseSeconds = Annotated[float, Meta(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]
