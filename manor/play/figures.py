"""Numbers as the panels print them: exact when they fit, abbreviated before they are cut.

A panel has a few cells of room for a figure. A count that does not fit is written
shorter (``18,900`` → ``18.9k`` → ``19k``), never cut: ``gate_timeout 904/189…`` reads as
a different number, ``904/18.9k`` as the same one rounded. Each figure comes as a list
of forms, most precise first, and ``fit`` takes the first that fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["count", "counts", "fit", "fit_width", "seconds", "tick_label"]

_UNITS = ((1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T"), (1e15, "P"), (1e18, "E"))


def count(n: int) -> list[str]:
    """``n`` exact (``1234567``), then abbreviated to three significant figures
    (``1.23M``), two (``1.2M``), one (``1M``) — each kept only if it is shorter than the
    forms before it (``18900`` is as short as ``18.9k``, and exact)."""
    if abs(n) < 1000:
        return [str(n)]
    return _shorter([str(n), *(_abbreviated(n, digits) for digits in (3, 2, 1))])


def counts(now: int, ever: int) -> list[str]:
    """``now/ever``, each as short as the cell needs: the total is shortened first."""
    nows, evers = count(now), count(ever)
    forms = [f"{nows[0]}/{e}" for e in evers]
    forms += [f"{n}/{evers[-1]}" for n in nows[1:]]
    return _unique(forms)


def seconds(value: float) -> list[str]:
    """A duration in simulated seconds, ``4.60s``, then shorter: fewer decimals, then
    minutes and hours (``604800.00s`` → ``10080m`` → ``168h``)."""
    if not math.isfinite(value):
        return [str(value)]
    return _shorter(
        [
            f"{value:.2f}s",
            f"{value:.1f}s",
            f"{value:.0f}s",
            f"{value / 60:.1f}m",
            f"{value / 60:.0f}m",
            f"{value / 3600:.1f}h",
            f"{value / 3600:.0f}h",
        ]
    )


def fit(width: int, forms: Sequence[str]) -> str:
    """The first of ``forms`` at most ``width`` cells wide; the shortest if none is."""
    for form in forms:
        if len(form) <= width:
            return form
    return min(forms, key=len)


def fit_width(forms: Sequence[str]) -> int:
    """The fewest cells in which one of ``forms`` fits."""
    return min(map(len, forms))


def tick_label(tick: int, under_way: bool) -> str:
    """Which tick a panel shows: ``tick 42`` (finished), or ``tick 43…`` while it runs
    (its counts still growing). Every panel says it the same way."""
    return f"tick {tick}…" if under_way else f"tick {tick}"


def _abbreviated(n: int, digits: int) -> str:
    """``n`` in the smallest unit that keeps it below 1,000 once rounded."""
    for scale, unit in _UNITS:
        text = _significant(n / scale, digits)
        if abs(float(text)) < 1000:
            break
    return text + unit


def _significant(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant figures, without a trailing ``.0``."""
    places = max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))
    text = f"{value:.{places}f}"
    # Rounding up can add a figure (999.5 → 1000): the coarser form then.
    if len(text.replace(".", "").lstrip("-")) > digits and places:
        text = f"{value:.{places - 1}f}"
    return text


def _shorter(forms: list[str]) -> list[str]:
    """The first form, then each one shorter than all before it: a form no shorter
    than a more precise one is never worth taking."""
    kept = forms[:1]
    for form in forms[1:]:
        if len(form) < len(kept[-1]):
            kept.append(form)
    return kept


def _unique(forms: list[str]) -> list[str]:
    return list(dict.fromkeys(forms))
