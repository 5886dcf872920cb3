"""argparse types for numbers with a range, so a bad value is one clear line.

Like the settings, they have maxima (``manor.limits``): a whole number is a size, at
most ``MAX_SIZE``; a float is a duration or a time scale, at most ``MAX_SECONDS``.
"""

from __future__ import annotations

import argparse
import math

from ..limits import MAX_SECONDS, MAX_SIZE

__all__ = ["non_negative_float", "positive_float", "positive_int"]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    if value > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"{value} is more than {MAX_SIZE:,}")
    return value


def non_negative_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def positive_float(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return value


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text} is more than {MAX_SECONDS:g} (a week, in seconds)")
    return value
