"""The files a command reads and writes on its command line: the save it reads (``SAVE``),
and the argparse types and flags of what it writes (``-o FILE``, ``--save PATH``)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_output_flag", "add_save_argument", "output_path", "save_path"]


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


def add_save_argument(parser: argparse.ArgumentParser) -> None:
    """``SAVE``: the save file a command reads (``manor replay``, ``story``, ``trace``)."""
    parser.add_argument("save", type=Path, metavar="SAVE", help="the save file (from 'manor run --save' or 'manor play')")


def add_output_flag(parser: argparse.ArgumentParser, what: str, *, required: bool = False) -> None:
    """``-o FILE``: the file a command writes (``manor.output_file.write_output``), ``what``
    leading its help (``"the trace file to write"``)."""
    parser.add_argument(
        "-o", "--output", type=output_path, required=required, default=None, metavar="FILE",
        help=f"{what} (replaced if it exists; a symbolic link is written through; - for stdout)",
    )  # fmt: skip
