"""The argparse types of the files a command writes (``-o FILE``, ``--save PATH``)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["output_path", "save_path"]


def output_path(text: str) -> Path:
    """The argparse type of ``-o FILE``: a path, never empty (``Path("")`` would be ".",
    the current directory, and the message would not say what was really given)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty file name")
    return Path(text)


def save_path(text: str) -> Path:
    """The argparse type of ``--save PATH``: a file, never ``-`` nor empty. A save is
    written as the run goes and its header rewritten at the end, which standard output
    cannot take; ``-`` would otherwise become a file named ``-``."""
    if text == "-":
        raise argparse.ArgumentTypeError("a save cannot go to standard output ('-'): name a file, e.g. --save run.msav")
    return output_path(text)
