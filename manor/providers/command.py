"""The ``command`` backend: one process per call, the way people drive CLI models
(``ollama run MODEL``, ``llm -m MODEL``, ``claude -p``).

The command is an argv list, never a shell line. The prompt goes to the process's
stdin, or into the arguments where one of them holds ``{prompt}``; ``{model}`` is
replaced by the request's model. stdout streams back as text deltas. When the call is
cancelled or times out (a ``TimeoutLayer`` above, a tick deadline) the process group is
sent SIGTERM, then SIGKILL after ``kill_after`` seconds, and always reaped: no zombies.
A non-zero exit is a ``ProviderError`` carrying the last lines of stderr, and so is a
prompt holding a NUL character where ``{prompt}`` would put it into an argument (stdin
carries any prompt).
"""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import tempfile
from collections.abc import AsyncGenerator, Sequence
from typing import IO, final

import attrs
import trio

from ..answers import prompt_with_schema
from ..calls import Done, Event, Request, Started, TextDelta
from ..errors import ConfigError, ProviderError
from .base import Provider

__all__ = ["CommandProvider"]

#: Lines of stderr quoted when the command fails.
_STDERR_LINES = 5
_STDERR_TAIL_BYTES = 8192


@final
@attrs.define(eq=False)
class CommandProvider(Provider):
    """Run ``argv`` for every call.

    Args:
        argv: the program and its arguments; ``{prompt}`` and ``{model}`` are filled in.
        model: used for ``{model}`` when the request names none.
        env: names of environment variables the command needs (API keys): each must be
            set, or the call fails naming the variable. Their values are passed on to
            the process with the rest of the environment and are never shown.
        cwd: the working directory (None: Manor's own).
        kill_after: seconds between SIGTERM and SIGKILL when the call is abandoned.
    """

    argv: Sequence[str] = attrs.field(converter=tuple)
    model: str = ""
    env: Sequence[str] = attrs.field(default=(), converter=tuple)
    cwd: str | None = None
    kill_after: float = attrs.field(default=2.0, validator=attrs.validators.ge(0))

    @argv.validator
    def _check_argv(self, attribute: object, value: tuple[str, ...]) -> None:
        if not value or not value[0]:
            raise ConfigError("command backend: 'argv' must name a program")

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        for name in self.env:
            if not os.environ.get(name):
                raise ConfigError(f"command backend: environment variable {name} is not set")
        model = request.model or self.model
        prompt = prompt_with_schema(request.prompt, request.shape)
        on_command_line = any("{prompt}" in arg for arg in self.argv)
        argv = [arg.replace("{model}", model).replace("{prompt}", prompt) for arg in self.argv]
        name = os.path.basename(argv[0])
        if on_command_line and "\0" in prompt:
            # The OS takes arguments as C strings, which end at the first NUL.
            raise ProviderError(
                f"{name}: the prompt holds a NUL character, which a command-line argument cannot carry "
                "(leave {prompt} out of argv to pass the prompt on stdin)"
            )
        with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stderr:
            # Files, not pipes, for stdin and stderr: the process can never block on
            # them while we read stdout, so no helper tasks are needed around a yield.
            if not on_command_line:
                stdin.write(prompt.encode())
                stdin.seek(0)
            try:
                process = await trio.lowlevel.open_process(
                    argv,
                    stdin=subprocess.DEVNULL if on_command_line else stdin,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    cwd=self.cwd,
                    start_new_session=True,  # its own process group, so we can end all of it
                )
            except OSError as exc:
                raise ProviderError(f"{name}: cannot run {argv[0]!r}: {exc.strerror or exc}") from None
            except ValueError as exc:  # a NUL in an argument ({model}), the environment or cwd
                raise ProviderError(f"{name}: cannot run {argv[0]!r}: {exc}") from None
            try:
                async for event in self._read(process, name, stderr):
                    yield event
            finally:
                # Shielded: this runs while the call is being cancelled, and every await
                # here must finish, or the process outlives the call.
                with trio.CancelScope(shield=True):
                    if process.returncode is None:
                        await self._stop(process)
                    assert process.stdout is not None
                    await process.stdout.aclose()

    async def _read(self, process: trio.Process, name: str, stderr: IO[bytes]) -> AsyncGenerator[Event, None]:
        assert process.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces: list[str] = []
        yield Started()
        while chunk := await process.stdout.receive_some(65536):
            text = decoder.decode(chunk)
            if text:
                pieces.append(text)
                yield TextDelta(text)
        if tail := decoder.decode(b"", final=True):
            pieces.append(tail)
            yield TextDelta(tail)
        code = await process.wait()
        if code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            raise ProviderError(f"{name} {how}: {_tail(stderr) or 'no output on stderr'}")
        yield Done(text="".join(pieces))

    async def _stop(self, process: trio.Process) -> None:
        """SIGTERM the process group, SIGKILL it if still there after ``kill_after``, reap."""
        _signal_group(process, signal.SIGTERM)
        with trio.move_on_after(self.kill_after):
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


def _tail(stderr: IO[bytes]) -> str:
    size = stderr.seek(0, os.SEEK_END)
    stderr.seek(max(0, size - _STDERR_TAIL_BYTES))
    lines = stderr.read().decode("utf-8", "replace").strip().splitlines()
    return " | ".join(line.strip() for line in lines[-_STDERR_LINES:] if line.strip())
