"""``manor ARGV`` run in the test's own process, for a command whose test needs no process
of its own (no signal, no process tree, no interpreter start-up checked): a Python
started for it costs more than most commands do on the virtual clock."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

from manor.cli import main

__all__ = ["manor_here"]


def manor_here(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``manor ARGV`` run here (from ``cwd`` when given), as ``subprocess.run`` would
    report it: its exit status, stdout and stderr. Not from inside a trio run: the
    command runs trio itself."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            status = main(list(argv))
        except SystemExit as exc:  # argparse's refusals
            status = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(list(argv), status, out.getvalue(), err.getvalue())
