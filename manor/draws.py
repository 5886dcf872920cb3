"""Seeded draws, owned: the values ``random.Random`` draws after ``seed(text)``, made
with fewer Python frames and written down here rather than borrowed.

The simulator seeds a generator for every call and draws a latency, a fault and a line
from it (``manor.providers.sim``). Through ``random.Random``'s own methods a call's
draws were about twenty Python frames — ``seed`` (``super().seed``), ``gauss``, four
``choice`` (each ``_randbelow`` → ``_randbelow_with_getrandbits``), ``randrange`` (its
argument checks, then ``_randbelow``) — about 3 µs of a simulated call's 63 under the
virtual clock, beside the 3 µs the C generator's own seeding takes
(benchmarks/notes/sim_draws.md). Here each is at most one frame over the C generator.

Each function draws exactly what CPython 3.11's ``Lib/random.py`` draws (version 2
seeding of a ``str``; ``_randbelow_with_getrandbits``; ``gauss``'s Box-Muller pair), as
a property test checks against ``random.Random`` itself. Owning the algorithm keeps
every save's answers the same should a later Python change ``random.py``: only the
Mersenne Twister of ``_random``, which Python has kept since 2.3, is borrowed.
"""

from __future__ import annotations

import _random
import random
from collections.abc import Callable, Sequence
from math import cos, log, sqrt, tau
from typing import TypeVar

__all__ = ["below", "choice", "first_gauss", "seed"]

T = TypeVar("T")

# SHA-512 as random.py takes it: CPython's own, a quarter fewer instructions than
# OpenSSL's (hashlib) for a key this short; either gives the same digest.
try:
    from _sha512 import sha512  # CPython 3.11
except ImportError:  # pragma: no cover - later Pythons
    try:
        from _sha2 import sha512  # CPython 3.12 on
    except ImportError:
        from hashlib import sha512

#: The C generator's own seeding, by an integer (``random.Random.seed``'s ``super().seed``).
_seed_int = _random.Random.seed


def seed(rng: random.Random, text: str) -> None:
    """``rng.seed(text)``: the generator seeded by the integer whose bytes are the
    text's UTF-8 followed by their SHA-512 digest, big-endian (version 2 seeding)."""
    data = text.encode()
    _seed_int(rng, int.from_bytes(data + sha512(data).digest(), "big"))
    rng.gauss_next = None  # type: ignore[attr-defined]


def below(getrandbits: Callable[[int], int], n: int) -> int:
    """``rng._randbelow(n)`` given ``rng.getrandbits``: ``n``'s bit length of bits
    drawn until they are below ``n``. ``rng.randrange(n)`` for an ``int`` ``n``, and
    the index ``rng.choice`` picks from ``n`` items. ``n`` must be above 0: for 0 it
    never returns, as ``_randbelow`` never does (``choice`` checks)."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


def choice(rng: random.Random, seq: Sequence[T]) -> T:
    """``rng.choice(seq)`` (``seq`` not empty).

    Raises:
        IndexError: ``seq`` is empty, as ``random.Random.choice`` raises it.
    """
    if not len(seq):
        raise IndexError("Cannot choose from an empty sequence")
    return seq[below(rng.getrandbits, len(seq))]


def first_gauss(random: Callable[[], float], mu: float, sigma: float) -> float:
    """``rng.gauss(mu, sigma)`` given ``rng.random``, as the first ``gauss`` after a
    ``seed`` draws it: the cosine of a Box-Muller pair made of two ``random()``. The
    pair's sine, which ``random.Random`` keeps for its next ``gauss``, is not made: a
    second ``gauss`` after the same seed is not this module's to draw."""
    x2pi = random() * tau
    g2rad = sqrt(-2.0 * log(1.0 - random()))
    return mu + cos(x2pi) * g2rad * sigma
