"""Writing a file a user named on the command line (``manor trace -o FILE``).

A new or regular file is replaced whole: the text goes to a temporary file beside it,
which is then renamed over it, so a failed write leaves the old file (or nothing)
behind. A symbolic link is written through, not replaced: the file it points to is. What
is neither (``/dev/null``, ``/dev/stdout``, a FIFO) is written to directly, since
renaming over it would replace a device with a file. ``-`` is standard output.

No file a command reads is ever written over (``check_not_read``): ``manor story SAVE -o
SAVE``, or ``-o`` onto a link to the save or a hard link of it, is refused before anything
is read or written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from .errors import ManorError

__all__ = ["STDOUT", "STORY_FORMATS", "check_not_read", "output_name", "write_output"]

#: The path that means standard output, wherever a command writes a file.
STDOUT = "-"
#: The formats a story is written in (``manor story --format``, or ``-o``'s suffix):
#: here, below the replay that writes them, so that the command line names them
#: without loading the engine.
STORY_FORMATS = ("md", "txt", "jsonl")


def output_name(path: str | Path) -> str:
    """``path`` as a message names it: ``stdout`` for ``-``."""
    return "stdout" if str(path) == STDOUT else str(path)


def check_not_read(path: str | Path, reading: Mapping[str, str | Path]) -> None:
    """Refuse to write ``path`` if it is one of the files the command reads.

    The same file is the same resolved path or the same inode on the same device (a
    symbolic link to it, a hard link of it, another spelling of its path); ``-`` is
    whatever standard output is open on (``manor story SAVE >> SAVE``).

    Args:
        path: the file the command is to write.
        reading: what each file read is, for the message ("the save being exported"),
            and its path.

    Raises:
        ManorError: ``path`` is a file read.
    """
    for what, source in reading.items():
        if _same_file(path, source):
            raise ManorError(f"{output_name(path)}: is {what} ({source}); name another file")


def _same_file(path: str | Path, source: str | Path) -> bool:
    try:
        read = os.stat(source)
    except OSError:
        return False  # a file that cannot be read: reading it will say so
    try:
        written = os.fstat(sys.stdout.fileno()) if str(path) == STDOUT else os.stat(path)
    except (AttributeError, OSError, ValueError):
        written = None  # not there yet (or no stdout to ask): only its resolved path can match
    if written is not None and (written.st_dev, written.st_ino) == (read.st_dev, read.st_ino):
        return True
    return str(path) != STDOUT and os.path.realpath(path) == os.path.realpath(source)


def write_output(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, replacing what was there; ``-`` writes it
    to standard output.

    Raises:
        BrokenPipeError: the reader of a pipe stopped early (``| head``): no error,
            ``manor.cli.main`` ends the command quietly.
        OSError: the file cannot be written; its ``strerror`` fits one line ("is a
            directory", "no directory out", "File name too long", "Permission denied",
            "No space left on device").
    """
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        status: os.stat_result | None = os.stat(path)  # through links: what is written
    except FileNotFoundError:
        status = None
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    if status is not None and not stat.S_ISREG(status.st_mode):
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        return
    if status is not None and not os.access(path, os.W_OK):
        # Renaming over it would succeed where writing to it fails: respect a read-only file.
        raise PermissionError(errno.EACCES, "Permission denied")
    target = Path(os.path.realpath(path))
    if not target.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"no directory {target.parent}")
    # A short name of our own beside the target: the target's name may be as long as
    # the system allows, with no room left for a suffix. O_EXCL: never someone else's.
    temporary = target.parent / f".manor-{secrets.token_hex(6)}.partial"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with open(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        if status is not None:  # the file replaced keeps its permissions
            os.chmod(temporary, stat.S_IMODE(status.st_mode))
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
