"""Manor's own seeded draws (``manor.draws``) are ``random.Random``'s: seeded by any
text, a sequence of draws of every kind, from sequences of every length (1, powers of
two and the lengths just above them, where ``_randbelow`` draws again most often),
gives the same values, and leaves the generator where ``random.Random``'s leaves it."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manor.draws import below, choice, first_gauss, seed

#: Lengths a draw picks among: small ones, powers of two, and the ones just above them.
_LENGTHS = st.one_of(st.integers(1, 40), st.sampled_from([2**k + d for k in range(1, 40) for d in (0, 1)]))

#: One draw: ("choice", length), ("randrange", n) or ("random", 0).
_DRAWS = st.lists(st.tuples(st.sampled_from(["choice", "randrange", "random"]), _LENGTHS), max_size=12)


def _theirs(rng: random.Random, draws: list[tuple[str, int]]) -> list[object]:
    values: list[object] = []
    for kind, n in draws:
        if kind == "choice":
            values.append(rng.choice(range(n)))
        elif kind == "randrange":
            values.append(rng.randrange(n))
        else:
            values.append(rng.random())
    return values


def _ours(rng: random.Random, draws: list[tuple[str, int]]) -> list[object]:
    values: list[object] = []
    for kind, n in draws:
        if kind == "choice":
            values.append(choice(rng, range(n)))
        elif kind == "randrange":
            values.append(below(rng.getrandbits, n))
        else:
            values.append(rng.random())
    return values


@given(text=st.text(), sigma=st.floats(0, 3), mu=st.floats(-5, 5), gauss=st.booleans(), draws=_DRAWS)
def test_the_same_draws_as_random_random(text: str, sigma: float, mu: float, gauss: bool, draws: list[tuple[str, int]]) -> None:
    theirs, ours = random.Random(), random.Random()
    theirs.seed(text)
    seed(ours, text)
    if gauss:
        assert first_gauss(ours.random, mu, sigma) == theirs.gauss(mu, sigma)
    assert _ours(ours, draws) == _theirs(theirs, draws)
    assert ours.getrandbits(64) == theirs.getrandbits(64)


@given(text=st.text())
def test_seed_forgets_a_kept_gauss(text: str) -> None:
    """``seed`` resets what ``random.Random.gauss`` kept, as ``random.Random.seed`` does:
    a ``gauss`` after it is the first of its seed."""
    theirs, ours = random.Random(), random.Random()
    theirs.gauss(), ours.gauss()  # each keeps the second of a pair
    theirs.seed(text)
    seed(ours, text)
    assert ours.gauss() == theirs.gauss()


def test_choice_from_nothing_raises_as_random_random_does() -> None:
    with pytest.raises(IndexError, match="empty sequence"):
        choice(random.Random(), ())
