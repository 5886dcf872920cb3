"""A process per call, the way the CLI backends run models: started in its own process
group, its stdout read by the caller, and — however the call ends (an answer, an error,
a cancel, a timeout) — sent SIGTERM, then SIGKILL after ``kill_after`` seconds, and
always reaped: no zombies.

stdin and stderr are temporary files, not pipes: the process can never block on them
while the caller reads stdout, so no helper tasks are needed around a ``yield``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import IO

import trio

from ..errors import ConfigError, ProviderError

__all__ = ["command_line", "exit_problem", "require_variables", "spawned", "stderr_tail"]

#: Lines of stderr quoted when the command fails.
_STDERR_LINES = 5
_STDERR_TAIL_BYTES = 8192


def require_variables(names: Sequence[str], kind: str) -> None:
    """Check that every environment variable ``names`` lists is set (their values are
    passed on to the process with the rest of the environment and never shown).

    Raises:
        ConfigError: one is unset or empty; names it and the backend ``kind``.
    """
    for name in names:
        if not os.environ.get(name):
            raise ConfigError(f"{kind} backend: environment variable {name} is not set")


def command_line(argv: Sequence[str], prompt: str, model: str) -> tuple[list[str], bytes | None]:
    """``argv`` with ``{prompt}`` and ``{model}`` filled in, and what goes to stdin: the
    prompt, unless an argument holds ``{prompt}`` (then nothing).

    Raises:
        ProviderError: the prompt holds a NUL character and goes into an argument.
    """
    on_command_line = any("{prompt}" in arg for arg in argv)
    if on_command_line and "\0" in prompt:
        # The OS takes arguments as C strings, which end at the first NUL.
        raise ProviderError(
            f"{os.path.basename(argv[0])}: the prompt holds a NUL character, which a command-line argument cannot carry "
            "(leave {prompt} out of argv to pass the prompt on stdin)"
        )
    filled = [arg.replace("{model}", model).replace("{prompt}", prompt) for arg in argv]
    return filled, None if on_command_line else prompt.encode()


@asynccontextmanager
async def spawned(
    argv: Sequence[str], *, stdin: bytes | None, cwd: str | None, kill_after: float
) -> AsyncIterator[tuple[trio.Process, IO[bytes]]]:
    """Run ``argv``; within, (the process, its stderr file). Its stdout is a pipe.

    Args:
        stdin: what the process reads on stdin (``None``: nothing, /dev/null).
        kill_after: seconds between SIGTERM and SIGKILL when the block is left while
            the process still runs.

    Raises:
        ProviderError: the program cannot be run: not found or not executable (``final``:
            the run stops), or a NUL in an argument.
    """
    name = os.path.basename(argv[0])
    with tempfile.TemporaryFile() as stdin_file, tempfile.TemporaryFile() as stderr:
        if stdin is not None:
            stdin_file.write(stdin)
            stdin_file.seek(0)
        try:
            process = await trio.lowlevel.open_process(
                list(argv),
                stdin=subprocess.DEVNULL if stdin is None else stdin_file,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=cwd,
                start_new_session=True,  # its own process group, so we can end all of it
            )
        except OSError as exc:
            # Not there, not executable: every later call would fail the same way.
            missing = ProviderError(f"{name}: cannot run {argv[0]!r}: {exc.strerror or exc}")
            missing.final = True
            raise missing from None
        except ValueError as exc:  # a NUL in an argument, the environment or cwd
            raise ProviderError(f"{name}: cannot run {argv[0]!r}: {exc}") from None
        try:
            yield process, stderr
        finally:
            # Shielded: this runs while the call is being cancelled, and every await
            # here must finish, or the process outlives the call.
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    await _stop(process, kill_after)
                assert process.stdout is not None
                await process.stdout.aclose()


def exit_problem(code: int) -> str:
    """How a process that failed ended: ``exited with status 2``, ``was killed by signal 9``."""
    return f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"


def stderr_tail(stderr: IO[bytes]) -> str:
    """The last lines of ``stderr``, joined by `` | ``, for a one-line message."""
    size = stderr.seek(0, os.SEEK_END)
    stderr.seek(max(0, size - _STDERR_TAIL_BYTES))
    lines = stderr.read().decode("utf-8", "replace").strip().splitlines()
    return " | ".join(line.strip() for line in lines[-_STDERR_LINES:] if line.strip())


async def _stop(process: trio.Process, kill_after: float) -> None:
    """SIGTERM the process group, SIGKILL it if still there after ``kill_after``, reap."""
    _signal_group(process, signal.SIGTERM)
    with trio.move_on_after(kill_after):
        await process.wait()
        return
    _signal_group(process, signal.SIGKILL)
    await process.wait()


def _signal_group(process: trio.Process, sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass  # already gone
    except PermissionError:
        process.send_signal(sig)
