"""Hypothesis strategies shared by the property tests.

Hostile input (``hostile_values``, ``mutated_documents``, ``to_toml``): the values a
fuzzer or a careless user puts in a TOML file, a ``MANOR_*`` variable, a flag or a
crafted save — huge, negative, nan and inf numbers, integers past 64 bits, wrong types,
weird strings, template placeholders — and the real files with such values put in,
keys removed, or unknown keys added.

Gate scenarios: every time in a gate scenario lies on a grid of 1/4 s, and token rates are 1/2, 1, 2 or
4 per second, so every instant the gate computes (token refills included) is a dyadic
number: float arithmetic is exact, and a reference model can reproduce the gate's clock
to the bit. Ties are frequent on purpose — same-instant arrivals, releases, timeouts
and token refills are where trio's scheduling order could leak into admission.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import attrs
from hypothesis import strategies as st

__all__ = [
    "GRID",
    "CallSpec",
    "GateScenario",
    "call_specs",
    "gate_scenarios",
    "grid",
    "hostile_scalars",
    "hostile_values",
    "mutated_documents",
    "overlapping_calls",
    "plausible_values",
    "to_toml",
]

#: The spacing of every time in a scenario, in seconds.
GRID = 0.25


def grid(low: int, high: int) -> st.SearchStrategy[float]:
    """Multiples of ``GRID`` from ``low`` to ``high`` steps."""
    return st.integers(low, high).map(lambda steps: steps * GRID)


@attrs.frozen
class CallSpec:
    """One caller of the gate.

    Attributes:
        arrival: when it reaches ``acquire`` (or withdraws its ticket).
        latency: how long its call holds the permit.
        timeout: its acquire timeout (``inf``: none).
        cancel_after: seconds after arrival at which it is cancelled, wherever it is
            then: waiting for a token, for a slot, or in its call (``inf``: never).
        fails: its call raises once the latency has passed.
        withdrawn: with tickets issued up front, it gives its ticket back at ``arrival``
            instead of acquiring.
    """

    arrival: float
    latency: float
    timeout: float = math.inf
    cancel_after: float = math.inf
    fails: bool = False
    withdrawn: bool = False

    @property
    def cancel_at(self) -> float:
        return self.arrival + self.cancel_after


@attrs.frozen
class GateScenario:
    """A gate and the callers that use it.

    Attributes:
        upfront: tickets are issued before any task is spawned (call ``i`` holds ticket
            ``i``); otherwise each caller gets one when it arrives.
        spawn_order: the order the callers' tasks are started in.
        resizes: ``(time, size)`` changes of the gate's size, at most four, off the grid
            so they never tie with another event.
    """

    size: int
    rate: float
    burst: int
    upfront: bool
    calls: tuple[CallSpec, ...]
    spawn_order: tuple[int, ...]
    resizes: tuple[tuple[float, int], ...] = ()


_never = st.just(math.inf)

call_specs = st.builds(
    CallSpec,
    arrival=grid(0, 16),
    latency=grid(1, 16),
    timeout=st.one_of(_never, grid(0, 16)),
    cancel_after=st.one_of(_never, _never, grid(1, 24)),
    fails=st.booleans(),
    withdrawn=st.integers(0, 4).map(lambda roll: roll == 0),
)

rates = st.sampled_from([0.5, 1.0, 2.0, 4.0])


@st.composite
def gate_scenarios(
    draw: st.DrawFn, *, bucket: bool | None = None, resizes: bool = False, max_calls: int = 12
) -> GateScenario:
    """A gate (with a token bucket, without, or either) and up to ``max_calls`` callers."""
    with_bucket = draw(st.booleans()) if bucket is None else bucket
    # Uniform in size, not Hypothesis's default lean towards short lists: crowds are
    # where ticket order and refunds get interesting.
    count = draw(st.integers(1, max_calls))
    calls = tuple(draw(st.lists(call_specs, min_size=count, max_size=count)))
    upfront = draw(st.booleans())
    if not upfront:
        calls = tuple(attrs.evolve(call, withdrawn=False) for call in calls)
    changes: tuple[tuple[float, int], ...] = ()
    if resizes:
        steps = sorted(draw(st.lists(st.integers(0, 40), min_size=1, max_size=4, unique=True)))
        # Off the grid, each by its own offset: a call admitted at a resize ends off the
        # grid too, and the offsets keep such chains from tying with anything else.
        changes = tuple(
            (step * GRID + (2 * j + 1) * GRID / 16, draw(st.integers(1, 5))) for j, step in enumerate(steps)
        )
    return GateScenario(
        size=draw(st.integers(1, 4)),
        rate=draw(rates) if with_bucket else 0.0,
        burst=draw(st.integers(1, 3)),
        upfront=upfront,
        calls=calls,
        spawn_order=tuple(draw(st.permutations(range(len(calls))))),
        resizes=changes,
    )


# -- hostile input ----------------------------------------------------------------------

#: Values that broke a loader once, or sit on a bound.
_NOTORIOUS: tuple[Any, ...] = (
    0, -1, 1, 2**63 - 1, 2**63, 2**64, 10**9 + 1, 100_001, 1_001,
    math.inf, -math.inf, math.nan, 1e308, 1e17, -1.4, 0.0, 604_801.0,
    "", "{butler}", "{", "}", "{0}", "{}", "{mood:d}", "{someone:>100000000}", "{room}{mood!r:^10}",
    "a" * 300, "../etc/passwd", "x\x00y", "line\nbreak", "pipeline", "bogus", "real", "virtual",
)  # fmt: skip

#: One hostile TOML scalar.
hostile_scalars: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(_NOTORIOUS),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.booleans(),
    st.text(max_size=24),
)

#: A hostile TOML value: a scalar, or a small array or table of them.
hostile_values: st.SearchStrategy[Any] = st.recursive(
    hostile_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


#: A value a careful user might write, by type: small numbers, real names and words.
#: Mixed in so that mutated files often still load, and what runs after is exercised.
_PLAUSIBLE_BY_TYPE: dict[type, st.SearchStrategy[Any]] = {
    int: st.integers(0, 12),
    float: st.floats(0, 10),
    bool: st.booleans(),
    str: st.sampled_from(["pipeline", "batch", "legacy", "fifo", "longest-first", "hall", "garden", "hobbes", "heiress",
                          "narrator", "I {mood} fetch the {object:>12} for {someone!s}.", "sim"]),
}  # fmt: skip
plausible_values: st.SearchStrategy[Any] = st.one_of(*_PLAUSIBLE_BY_TYPE.values())


def _nudged(value: Any) -> st.SearchStrategy[Any]:
    """A plausible value of the same type as ``value`` (an array keeps its element type)."""
    if isinstance(value, list) and value:
        return st.lists(_nudged(value[0]), max_size=4)
    return _PLAUSIBLE_BY_TYPE.get(type(value), plausible_values)


def _positions(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path inside nested tables and arrays (the root excluded)."""
    found: list[tuple[Any, ...]] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        found.append((*prefix, key))
        found += _positions(value, (*prefix, key))
    return found


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def mutated_documents(draw: st.DrawFn, doc: dict[str, Any], max_mutations: int = 3) -> dict[str, Any]:
    """``doc`` (a decoded TOML file) after 1..``max_mutations`` edits: a value replaced
    by a hostile or a plausible one, a key removed, or an unknown key added."""
    doc = json.loads(json.dumps(doc))  # a deep copy (TOML documents are JSON-shaped)
    for _ in range(draw(st.integers(1, max_mutations))):
        how = draw(st.sampled_from(["replace", "replace", "nudge", "nudge", "nudge", "remove", "add"]))
        positions = _positions(doc)
        if how == "add" or not positions:
            tables = [()] + [path for path in positions if isinstance(_at(doc, path), dict)]
            table = _at(doc, draw(st.sampled_from(tables)))
            table[draw(st.text(min_size=1, max_size=8))] = draw(hostile_values)
            continue
        path = draw(st.sampled_from(positions))
        parent = _at(doc, path[:-1])
        if how == "remove":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(hostile_values if how == "replace" else _nudged(parent[path[-1]]))
    return doc


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def to_toml(doc: dict[str, Any]) -> str:
    """``doc`` as TOML text: scalars and arrays first, then a ``[table]`` per table
    (nested tables as ``[a.b]``); tables inside arrays inline."""
    lines: list[str] = []
    tables: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def emit(path: tuple[str, ...], table: dict[str, Any]) -> None:
        if path:
            lines.append("[" + ".".join(_key(k) for k in path) + "]")
        for key, value in table.items():
            if isinstance(value, dict):
                tables.append(((*path, key), value))
            else:
                lines.append(f"{_key(key)} = {_value(value)}")

    emit((), doc)
    while tables:
        emit(*tables.pop(0))
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # JSON's escapes are TOML's; TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else "inf" if value == math.inf else "-inf" if value == -math.inf else repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"


def overlapping_calls(max_calls: int = 4) -> st.SearchStrategy[list[tuple[float, float]]]:
    """Calls as ``(start, latency)`` seconds, overlapping in time: hundredths, so that
    their sums round in binary (a grid of dyadic times would never round), and early
    starts on purpose, where one jump of the virtual clock over a whole answer could land
    a bit off where the pieces' jumps would not."""
    times = st.integers(1, 300).map(lambda n: n / 100)
    latencies = st.integers(1, 500).map(lambda n: n / 100)
    return st.lists(st.tuples(times, latencies), min_size=1, max_size=max_calls)
