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
from collections.abc import AsyncGenerator, Sequence
from typing import IO, final

import attrs
import trio

from ..answers import prompt_with_schema
from ..calls import Done, Event, Request, Started, TextDelta
from ..errors import ConfigError, ProviderError
from .provider import Provider
from .process import command_line, exit_problem, require_variables, spawned, stderr_tail

__all__ = ["CommandProvider"]


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
        require_variables(self.env, "command")
        model = request.model or self.model
        argv, stdin = command_line(self.argv, prompt_with_schema(request.prompt, request.shape), model)
        name = os.path.basename(argv[0])
        async with spawned(argv, stdin=stdin, cwd=self.cwd, kill_after=self.kill_after) as (process, stderr):
            async for event in self._read(process, name, stderr):
                yield event

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
            raise ProviderError(f"{name} {exit_problem(code)}: {stderr_tail(stderr) or 'no output on stderr'}")
        yield Done(text="".join(pieces))
