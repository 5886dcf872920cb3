"""Writing a file a user named on the command line (``manor trace -o FILE``).

A new or regular file is replaced whole: the text goes to a temporary file beside it,
which is then renamed over it, so a failed write leaves the old file (or nothing)
behind. A symbolic link is written through, not replaced: the file it points to is. What
is neither (``/dev/null``, ``/dev/stdout``, a FIFO) is written to directly, since
renaming over it would replace a device with a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

__all__ = ["write_output"]


def write_output(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, replacing what was there.

    Raises:
        OSError: the file cannot be written; its ``strerror`` fits one line ("is a
            directory", "no directory out", "File name too long", "Permission denied",
            "No space left on device").
    """
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
