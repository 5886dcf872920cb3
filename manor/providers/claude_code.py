"""The ``claude-code`` backend: Claude Code run per call, its ``stream-json`` events read.

``claude -p PROMPT --output-format stream-json --verbose`` writes one JSON object a
line: ``system`` (``subtype: init``, ``session_id``), ``assistant`` messages whose text
blocks are the answer as it comes, tool events, and last a ``result`` (``subtype``
``success`` or ``error_*``, ``is_error``, ``result`` text, ``usage``,
``total_cost_usd``, ``session_id``): the call's record takes its tokens and that cost
(in place of ``cost.price_per_1k_tokens``). The process is run as the ``command`` backend runs
its own (``providers.process``): its own process group, stopped and reaped however the
call ends.

How it fails, read from the ``result`` and stderr (its limits are not published):

- a rate limit ("API Error: 429", "rate limit", "temporarily limiting requests",
  "overloaded", 529): ``SessionLimitError`` refused by the server;
- a usage cap ("usage limit reached", with its reset time when it says one, as
  ``...|EPOCH`` or "resets at"): the same, ``final``: the run stops;
- not logged in, an invalid key: ``AccessRefused`` (``final``);
- anything else: ``ProviderError`` with what it said.

With ``resume``, each agent keeps one session across ticks: a call after the agent's
first passes ``--resume SESSION_ID``, the id the agent's last successful call reported.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import IO, Any, final

import attrs
import trio

from ..answers import prompt_with_schema
from ..calls import Done, Event, Request, Started, TextDelta, Usage
from ..errors import (
    AccessRefused,
    CallError,
    ConfigError,
    ProviderError,
    SessionLimitError,
)
from .provider import Provider
from .process import command_line, exit_problem, require_variables, spawned, stderr_tail

__all__ = ["ClaudeCodeProvider", "classify_failure"]

#: The longest line of output kept in memory (a tool's result can be long).
_MAX_LINE = 16 << 20
#: Characters of a non-JSON line quoted in a message.
_QUOTE = 200

_USAGE_CAP = re.compile(r"usage limit|limit reached|out of (?:extra )?usage|credit balance is too low|billing_error", re.IGNORECASE)
_RATE_LIMIT = re.compile(r"\b429\b|\b529\b|rate[ _-]?limit|temporarily limiting|too many requests|overloaded", re.IGNORECASE)
_ACCESS = re.compile(
    r"invalid api key|not logged in|please run /login|/login|authentication|unauthori[sz]ed|\b401\b|\b403\b|oauth token", re.IGNORECASE
)
#: A reset time: Claude Code's ``...usage limit reached|1767225600`` (epoch seconds).
_RESET_EPOCH = re.compile(r"\|(\d{10})\b")


@final
@attrs.define(eq=False)
class ClaudeCodeProvider(Provider):
    """Run Claude Code for every call.

    Args:
        argv: the program and its arguments; ``{prompt}`` and ``{model}`` are filled in
            (without ``{prompt}``, the prompt goes to stdin).
        model: passed as ``--model`` when set (here, or by the request) and ``argv`` does
            not name ``{model}`` itself.
        resume: one session per agent across ticks (``--resume SESSION_ID``).
        env: names of environment variables it needs; each must be set.
        cwd: the working directory (None: Manor's own).
        kill_after: seconds between SIGTERM and SIGKILL when the call is abandoned.
    """

    argv: Sequence[str] = attrs.field(converter=tuple)
    model: str = ""
    resume: bool = False
    env: Sequence[str] = attrs.field(default=(), converter=tuple)
    cwd: str | None = None
    kill_after: float = attrs.field(default=2.0, validator=attrs.validators.ge(0))
    _sessions: dict[str, str] = attrs.field(factory=dict, init=False)

    @argv.validator
    def _check_argv(self, attribute: object, value: tuple[str, ...]) -> None:
        if not value or not value[0]:
            raise ConfigError("claude-code backend: 'argv' must name a program")

    def session(self, agent: str) -> str | None:
        """The session ``agent``'s next call resumes (with ``resume``), if it has one."""
        return self._sessions.get(agent)

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        require_variables(self.env, "claude-code")
        model = request.model or self.model
        argv, stdin = command_line(self.argv, prompt_with_schema(request.prompt, request.shape), model)
        if model and not any("{model}" in arg for arg in self.argv):
            argv += ["--model", model]
        if self.resume and (session := self._sessions.get(request.agent)):
            argv += ["--resume", session]
        name = os.path.basename(argv[0])
        async with spawned(argv, stdin=stdin, cwd=self.cwd, kill_after=self.kill_after) as (process, stderr):
            async for event in self._read(process, name, stderr, request.agent):
                yield event

    async def _read(self, process: trio.Process, name: str, stderr: IO[bytes], agent: str) -> AsyncGenerator[Event, None]:
        assert process.stdout is not None
        pieces: list[str] = []
        result: dict[str, Any] | None = None
        other: list[str] = []  # lines that are not events: quoted if it fails
        started = False
        async for line in _lines(process.stdout):
            event = _event(line)
            if event is None:
                if line.strip():
                    other.append(line.strip()[:_QUOTE])
                continue
            if not started:
                started = True
                yield Started()
            if event.get("type") == "assistant":
                if isinstance(event.get("error"), str):  # authentication_failed, rate_limit, billing_error...
                    other.append(f"error: {event['error']}")
                for text in _texts(event.get("message")):
                    pieces.append(text)
                    yield TextDelta(text)
            elif event.get("type") == "result":
                result = event
        code = await process.wait()
        said = " | ".join(filter(None, [_result_text(result), *other[-3:], stderr_tail(stderr)]))
        if result is None or result.get("is_error") or result.get("subtype", "success") != "success" or code != 0:
            how = f"{exit_problem(code)}" if code != 0 else f"failed ({result.get('subtype') if result else 'no result event'})"
            raise classify_failure(f"{name} {how}", said or "no output")
        if self.resume and isinstance(result.get("session_id"), str):
            self._sessions[agent] = result["session_id"]
        if not started:
            yield Started()
        text = result["result"] if isinstance(result.get("result"), str) else "".join(pieces)
        cost = result.get("total_cost_usd")
        yield Done(text=text, usage=_usage(result.get("usage")), cost=float(cost) if isinstance(cost, int | float) else None)


def classify_failure(what: str, said: str, now: float | None = None) -> CallError:
    """The error of a failed Claude Code call, from what it said (see the module's docstring).

    Args:
        what: how it ended, e.g. ``claude exited with status 1``.
        said: its result text, odd stdout lines and stderr, on one line.
        now: the wall clock (seconds since the epoch) for a reset time; default: now.
    """
    message = f"{what}: {said}"
    if _USAGE_CAP.search(said):
        wait = None
        if match := _RESET_EPOCH.search(said):
            wait = max(0.0, int(match[1]) - (time.time() if now is None else now))
        return SessionLimitError(f"{message} (a usage cap: no retry will help before it resets)", retry_after=wait, final=True)
    if _RATE_LIMIT.search(said):
        return SessionLimitError(message)
    if _ACCESS.search(said):
        return AccessRefused(f"{message} (log in with `claude` or set the key it reads)")
    return ProviderError(message)


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncGenerator[str, None]:
    """Lines of ``stream`` as text, without their newline; the last one even without one."""
    buffer = bytearray()
    while chunk := await stream.receive_some(65536):
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            yield buffer[:end].decode("utf-8", "replace")
            del buffer[: end + 1]
        if len(buffer) > _MAX_LINE:
            raise ProviderError(f"claude-code: a line of output longer than {_MAX_LINE} bytes")
    if buffer:
        yield buffer.decode("utf-8", "replace")


def _event(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _texts(message: Any) -> list[str]:
    """The text blocks of an assistant message."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return []
    return [block["text"] for block in content if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"]]


def _result_text(result: Mapping[str, Any] | None) -> str:
    if result is None:
        return ""
    text = result.get("result")
    errors = result.get("errors")
    parts = [text] if isinstance(text, str) and text else []
    if isinstance(status := result.get("api_error_status"), int):
        parts.append(f"HTTP {status}")
    if isinstance(errors, list):
        parts += [str(error) for error in errors]
    return " | ".join(part.strip() for part in parts)[:_QUOTE * 2]


def _usage(usage: Any) -> Usage:
    """Tokens from the result's ``usage``; cache writes and reads count as input."""
    if not isinstance(usage, Mapping):
        return Usage()

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) else 0

    spent_in = count("input_tokens") + count("cache_creation_input_tokens") + count("cache_read_input_tokens")
    return Usage(input_tokens=spent_in, output_tokens=count("output_tokens"))
