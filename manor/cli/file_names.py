"""The argparse type of a file a command writes (``-o FILE``)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["output_path"]


def output_path(text: str) -> Path:
    """The argparse type of ``-o FILE``: a path, never empty (``Path("")`` would be ".",
    the current directory, and the message would not say what was really given)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty file name")
    return Path(text)
