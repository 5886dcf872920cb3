"""Hypothesis strategies shared by the property tests.

Every time in a gate scenario lies on a grid of 1/4 s, and token rates are 1/2, 1, 2 or
4 per second, so every instant the gate computes (token refills included) is a dyadic
number: float arithmetic is exact, and a reference model can reproduce the gate's clock
to the bit. Ties are frequent on purpose — same-instant arrivals, releases, timeouts
and token refills are where trio's scheduling order could leak into admission.
"""

from __future__ import annotations

import math

import attrs
from hypothesis import strategies as st

__all__ = ["GRID", "CallSpec", "GateScenario", "call_specs", "gate_scenarios", "grid"]

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
