"""The suites of ``manor bench`` by name, without importing them: what the command line
offers and runs by default. ``runner`` imports each suite from the module named here."""

from __future__ import annotations

__all__ = ["DEFAULT_SUITES", "SUITE_MODULES"]

#: Every suite's name and its module (``manor.bench.<module>``, whose ``SUITE`` it is),
#: in the order ``manor bench`` runs them.
SUITE_MODULES: dict[str, str] = {
    "scheduling": "scheduling",
    "overhead": "overhead",
    "fastforward": "fastforward",
    "scale": "scale",
    "replay": "replay",
    "play": "play",
    "fleet": "fleet",
    "redis-gate": "redis_gate",
    "adaptive": "adaptive",
}
#: The suites ``manor bench`` runs when none is named: not ``fleet``, so that a plain
#: ``manor bench`` is what it was, nor ``redis-gate``, which needs a Redis server, nor
#: ``adaptive``.
DEFAULT_SUITES: tuple[str, ...] = ("scheduling", "overhead", "fastforward", "scale", "replay", "play")
