"""Named backends, and which agent uses which: the ``[backends.NAME]`` and
``[agent_backends]`` tables of manor.toml.

.. code-block:: toml

    [backends.local]                  # a backend, named by its table
    kind = "openai"                   # sim | openai | command | agno | anthropic | claude-code
    base_url = "http://127.0.0.1:8765/v1"
    model = "manor"

    [backends.remote]
    kind = "agno"
    base_url = "http://127.0.0.1:7777"
    agent_id = "storyteller"
    session_id = "manor-{run}-{agent}"   # the default: one session per agent per run

    [backends.big]
    kind = "command"
    argv = ["ollama", "run", "llama3.1:70b"]

    [backends.claude]
    kind = "anthropic"                # the Messages API (pip install 'manor[anthropic]')
    model = "claude-sonnet-4-5"       # key from ANTHROPIC_API_KEY unless api_key_env says

    [backends.cli]
    kind = "claude-code"              # claude -p ... --output-format stream-json --verbose
    resume = true                     # one Claude Code session per agent across ticks

    [backend]
    default = "local"                 # every agent (a flat setting: MANOR_BACKEND_DEFAULT, --backend)

    [agent_backends]
    narrator = "big"                  # but the narrator

An agent's backend is decided the way every setting is: the highest source that says
something about that agent wins. ``backend.default`` speaks for every agent, an
``[agent_backends]`` line for one, the agent file's own ``backend`` field counts at the
scene's ordinal (150), and below them all is the built-in ``sim``. Within one source the
agent's own line beats ``backend.default``. So ``--backend sim`` (a flag, 400) puts the
whole cast on the simulator whatever manor.toml (250) maps.

A backend table is defined by one source, whole: a higher source's ``[backends.local]``
replaces a lower one's rather than being merged field by field (its kind may differ).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, final

import attrs
import msgspec
from msgspec import Meta

from ..errors import ConfigError, add_secret
from ..limits import PositiveSeconds, Seconds, Size
from ..templates import template_problem
from .schema import Probability

__all__ = [
    "BUILT_IN_BACKEND",
    "CLAUDE_ARGV",
    "DEFAULT_SESSION_ID",
    "KINDS",
    "NON_ASCII_KEY",
    "SESSION_PLACEHOLDERS",
    "AgnoBackend",
    "AnthropicBackend",
    "Assignment",
    "BackendTable",
    "Backends",
    "CapacityStep",
    "ClaudeCodeBackend",
    "CommandBackend",
    "Named",
    "OpenAIBackend",
    "PlatformCapacity",
    "SimBackend",
    "TableValues",
    "describe_table",
    "is_table_key",
    "session_id_problem",
    "unset_variables",
    "variables",
]

#: The embedded simulated backend, set up by the ``[sim]`` settings; always defined.
BUILT_IN_BACKEND = "sim"
#: The ordinal an agent file's ``backend`` field counts at (the scene's).
AGENT_FILE_ORDINAL = 150

NonEmpty = Annotated[str, Meta(min_length=1)]

#: What an agno table's ``session_id`` template may name: the run's id, the agent's.
SESSION_PLACEHOLDERS = ("run", "agent")
#: One remote session per agent per run.
DEFAULT_SESSION_ID = "manor-{run}-{agent}"


class _Table(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True, tag_field="kind"):
    """Base of a ``[backends.NAME]`` table: ``kind`` picks the struct, an unknown key is an error."""

    @property
    def kind(self) -> str:
        return self.__struct_config__.tag  # type: ignore[return-value]


class CapacityStep(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """From ``at`` (a tick, or seconds: ``PlatformCapacity.by``) on, the platform runs at
    most ``sessions`` calls at once."""

    at: Annotated[float, Meta(ge=0)]
    sessions: Size


class PlatformCapacity(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A simulated platform's session limit, moving during a run, as a server answers it:
    a call that finds every session in use is refused at once (HTTP 429, as
    ``SessionLimitError`` refused by the server), with ``retry_after_s`` when set.

    .. code-block:: toml

        [backends.moving]
        kind = "sim"
        capacity = {by = "tick", retry_after_s = 1, steps = [{at = 0, sessions = 6}, {at = 10, sessions = 3}]}
    """

    #: ``tick``: each step's ``at`` is a tick; ``time``: seconds since the backend's first call.
    by: Literal["tick", "time"] = "tick"
    #: The limit from each step's ``at`` on; none before the first step. Sorted by ``at``.
    steps: Annotated[tuple[CapacityStep, ...], Meta(min_length=1)]
    #: Seconds a refusal asks the caller to wait (``Retry-After``); unset: it does not say.
    retry_after_s: Seconds | None = None

    def __post_init__(self) -> None:
        if any(b.at <= a.at for a, b in zip(self.steps, self.steps[1:])):
            raise ValueError("capacity steps must be in increasing order of 'at'")

    def sessions(self, at: float) -> int | None:
        """The limit at tick or time ``at``; ``None`` (no limit) before the first step."""
        limit = None
        for step in self.steps:
            if step.at > at:
                break
            limit = step.sessions
        return limit


class SimBackend(_Table, tag="sim"):
    """Another simulated model: the scene's latency profiles, its own fault rates, and
    optionally a platform capacity that moves during the run."""

    #: Chance a call fails.
    error_rate: Probability = 0.0
    #: Chance a call never answers.
    hang_rate: Probability = 0.0
    #: The simulated platform's session limit over the run (unset: none).
    capacity: PlatformCapacity | None = None


class OpenAIBackend(_Table, tag="openai"):
    """OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp, serve-agent)."""

    #: Up to and including ``/v1``.
    base_url: NonEmpty
    #: Used when the agent file names no model.
    model: str = ""
    #: Name of the environment variable holding the API key ("" = none).
    api_key_env: str = ""
    #: A system message sent before every prompt ("" = none).
    system: str = ""
    connect_timeout_s: PositiveSeconds = 10.0
    #: Longest wait for the next bytes of the stream.
    read_timeout_s: PositiveSeconds = 60.0


class CommandBackend(_Table, tag="command"):
    """A command run per call; ``{prompt}`` and ``{model}`` in ``argv`` are filled in."""

    argv: Annotated[tuple[NonEmpty, ...], Meta(min_length=1)]
    #: Used for ``{model}`` when the agent file names no model.
    model: str = ""
    #: Names of environment variables the command needs (never their values).
    env: tuple[NonEmpty, ...] = ()
    #: Working directory (unset: Manor's own).
    cwd: str | None = None
    #: Seconds between SIGTERM and SIGKILL when a call is abandoned.
    kill_after_s: Seconds = 2.0


class AgnoBackend(_Table, tag="agno"):
    """A remote agent (Agno AgentOS, serve-agent) through the bounded-wait adapter."""

    #: The AgentOS root, e.g. ``http://127.0.0.1:7777``.
    base_url: NonEmpty
    #: The remote agent's id.
    agent_id: NonEmpty
    #: The remote session of each call; ``{run}`` and ``{agent}`` are filled in.
    session_id: NonEmpty = DEFAULT_SESSION_ID
    api_key_env: str = ""
    #: Calls in progress at once; the rest wait, FIFO.
    workers: Size = 2
    #: Seconds a call may take from getting a worker (0 = none; call.timeout_s still bounds it).
    timeout_s: Seconds = 0.0
    #: On timeout, also cancel the run remotely.
    cancel_remote: bool = False
    #: Ask for streaming runs.
    stream: bool = False
    connect_timeout_s: PositiveSeconds = 5.0
    #: Longest wait for the next bytes of an answer (unset: the adapter's timeout bounds it).
    read_timeout_s: PositiveSeconds | None = None


class AnthropicBackend(_Table, tag="anthropic"):
    """Anthropic's Messages API, streamed through the official SDK (the ``anthropic`` extra)."""

    #: Used when the agent file names no model.
    model: str = ""
    #: Name of the environment variable holding the API key.
    api_key_env: NonEmpty = "ANTHROPIC_API_KEY"
    #: The API's root ("" = the SDK's, https://api.anthropic.com; serve-agent's for tests).
    base_url: str = ""
    #: A system prompt sent with every call ("" = none).
    system: str = ""
    #: The longest answer asked for, in tokens.
    max_tokens: Annotated[int, Meta(ge=1)] = 1024
    connect_timeout_s: PositiveSeconds = 10.0
    #: Longest wait for the next bytes of the stream.
    read_timeout_s: PositiveSeconds = 60.0


#: How ``claude-code`` runs Claude Code: ``{prompt}`` is filled in. ``--tools=`` turns
#: its tools off: a character answers in words, it does not read or run anything in the
#: directory Manor runs in (name the tools to allow: ``--tools=Read,Grep``).
CLAUDE_ARGV = ("claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose", "--tools=")


class ClaudeCodeBackend(_Table, tag="claude-code"):
    """Claude Code run per call, its ``stream-json`` events read (text, tokens, cost)."""

    #: The program and its arguments; ``{prompt}`` and ``{model}`` are filled in.
    argv: Annotated[tuple[NonEmpty, ...], Meta(min_length=1)] = CLAUDE_ARGV
    #: Passed as ``--model`` (unless ``argv`` names ``{model}``) when set here or in the agent file.
    model: str = ""
    #: Keep one Claude Code session per agent across ticks (``--resume SESSION_ID``).
    resume: bool = False
    #: Names of environment variables it needs (never their values).
    env: tuple[NonEmpty, ...] = ()
    #: Working directory (unset: Manor's own).
    cwd: str | None = None
    #: Seconds between SIGTERM and SIGKILL when a call is abandoned.
    kill_after_s: Seconds = 2.0


BackendTable = SimBackend | OpenAIBackend | CommandBackend | AgnoBackend | AnthropicBackend | ClaudeCodeBackend

#: Every backend kind, as ``kind = "..."`` spells it.
KINDS: tuple[str, ...] = tuple(
    t.__struct_config__.tag for t in (SimBackend, OpenAIBackend, CommandBackend, AgnoBackend, AnthropicBackend, ClaudeCodeBackend)  # type: ignore[misc]
)

_TABLES = "backends."
_AGENTS = "agent_backends."


def is_table_key(key: str) -> bool:
    """Whether ``key`` belongs to a named table (``backends.NAME``, ``agent_backends.AGENT``)."""
    return key.startswith((_TABLES, _AGENTS))


def describe_table(table: BackendTable) -> str:
    """One line for ``manor config``: the kind and where it points (never a secret)."""
    match table:
        case OpenAIBackend():
            return f"openai {table.base_url} model={table.model or '(the agent’s)'}"
        case AgnoBackend():
            return f"agno {table.base_url} agent={table.agent_id} workers={table.workers}"
        case CommandBackend():
            return "command " + " ".join(table.argv)
        case AnthropicBackend():
            return f"anthropic {table.base_url or 'api.anthropic.com'} model={table.model or '(the agent’s)'}"
        case ClaudeCodeBackend():
            return "claude-code " + " ".join(table.argv) + (" (a session per agent)" if table.resume else "")
        case SimBackend():
            moving = "" if table.capacity is None else f" capacity by {table.capacity.by}: " + ", ".join(f"{step.at:g}→{step.sessions}" for step in table.capacity.steps)
            return f"sim error_rate={table.error_rate:g} hang_rate={table.hang_rate:g}{moving}"


def variables(table: BackendTable) -> list[tuple[str, str]]:
    """(key, variable): the environment variables ``table`` names, with the key naming each
    (``api_key_env``, ``env``)."""
    match table:
        case OpenAIBackend() | AgnoBackend() | AnthropicBackend():
            return [("api_key_env", table.api_key_env)] if table.api_key_env else []
        case CommandBackend() | ClaudeCodeBackend():
            return [("env", variable) for variable in table.env]
        case SimBackend():
            return []


def unset_variables(table: BackendTable, environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """The environment variables ``table`` names that are unset or empty in ``environ``,
    or (an API key, sent in an HTTP header) hold a character a header cannot carry.

    Returns:
        (key, variable, what is wrong) for each: the key that names it, its name, and
        "is not set", "is empty" or what is wrong with its value. Never a value.
    """
    # An empty variable counts as unset: the backends refuse it too.
    return [
        (key, variable, wrong)
        for key, variable in variables(table)
        if (wrong := _unusable(key, variable, environ)) is not None
    ]


def _unusable(key: str, variable: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(variable)
    if not value:
        return "is not set" if value is None else "is empty"
    if key == "api_key_env" and not value.isascii():
        return NON_ASCII_KEY
    return None


#: What is wrong with an API key that is not ASCII (never the key itself).
NON_ASCII_KEY = "holds a non-ASCII character, which an HTTP header cannot carry (a key copied with a typographic dash or quote?)"


@final
@attrs.frozen
class Named:
    """A value of a named table, with the source it came from and that source's ordinal.

    Attributes:
        origin: the source's name (``manor config``'s source column).
        where: the key as that source spells it, for messages (``command line: --backend``).
    """

    value: Any
    origin: str
    ordinal: int
    where: str


@final
@attrs.frozen
class Assignment:
    """The backend an agent's calls go to, and what decided it."""

    backend: str
    origin: str


@final
@attrs.frozen
class Backends:
    """The named backends and the per-agent lines, after layering.

    Attributes:
        tables: backend name -> its table (``Named.value`` is a ``BackendTable``).
        agents: agent id -> the backend name its ``[agent_backends]`` line gives.
        default: ``backend.default``, with its source.
    """

    tables: Mapping[str, Named] = attrs.field(factory=dict)
    agents: Mapping[str, Named] = attrs.field(factory=dict)
    default: Named = Named(BUILT_IN_BACKEND, "built-in defaults", 100, "built-in defaults: backend.default")

    def table(self, name: str) -> BackendTable | None:
        """The table of backend ``name``; None for the built-in simulator."""
        return None if name == BUILT_IN_BACKEND else self.tables[name].value

    def assign(self, agent_files: Mapping[str, str], scene: str) -> dict[str, Assignment]:
        """The backend of every agent.

        Args:
            agent_files: agent id -> the ``backend`` field of its agent file.
            scene: names the scene in messages.

        Raises:
            ConfigError: an ``[agent_backends]`` line for an agent the scene does not
                have, or a backend name that no ``[backends.NAME]`` table defines.
        """
        for agent, line in self.agents.items():
            if agent not in agent_files:
                known = ", ".join(agent_files)
                raise ConfigError(f"{line.where}: no agent '{agent}' in {scene} (its agents: {known})")
            self._check_defined(line.value, line.where)
        self._check_defined(self.default.value, self.default.where)
        assigned: dict[str, Assignment] = {}
        for agent, own in agent_files.items():
            # (ordinal, specificity): the highest source wins; in one source, the agent's line.
            candidates = [((self.default.ordinal, 0), self.default.value, self.default.where)]
            if own != BUILT_IN_BACKEND:
                candidates.append(((AGENT_FILE_ORDINAL, 1), own, f"agent file of {agent}: backend"))
            if (line := self.agents.get(agent)) is not None:
                candidates.append(((line.ordinal, 1), line.value, line.where))
            _, name, origin = max(candidates, key=lambda candidate: candidate[0])
            self._check_defined(name, origin)
            assigned[agent] = Assignment(name, origin)
        return assigned

    def check_environment(self, names: Iterable[str], environ: Mapping[str, str]) -> None:
        """Check that every environment variable the backends ``names`` need is set, so
        that a missing API key stops a run before its first tick instead of failing
        every call; and mask every value they hold in call records' error messages
        (``errors.add_secret``), whatever a server quotes back.

        Args:
            names: the backends in use (``assign``'s choices).
            environ: the environment the backends will read.

        Raises:
            ConfigError: one line naming, for each unset variable, the source and key
                that named it and the variable (never a value).
        """
        wanted = set(names)
        for name in wanted & self.tables.keys():
            for _, variable in variables(self.tables[name].value):
                add_secret(environ.get(variable, ""))
        problems = [
            f"{named.where}.{key}: environment variable {variable} {wrong}"
            for name, named in self.tables.items()  # in the order they are defined
            if name in wanted
            for key, variable, wrong in unset_variables(named.value, environ)
        ]
        if problems:
            raise ConfigError("; ".join(problems))

    def _check_defined(self, name: str, where: str) -> None:
        if name != BUILT_IN_BACKEND and name not in self.tables:
            defined = ", ".join([BUILT_IN_BACKEND, *self.tables])
            raise ConfigError(f"{where}: no backend named '{name}' (defined: {defined}; add a [backends.{name}] table)")


@final
@attrs.define
class TableValues:
    """Collects the named-table values of the sources, lowest ordinal first."""

    _tables: dict[str, Named] = attrs.field(factory=dict, init=False)
    _agents: dict[str, Named] = attrs.field(factory=dict, init=False)

    def put(self, key: str, value: Any, *, source: str, ordinal: int, where: str, textual: bool = False) -> None:
        """Check one value and keep it over any from a lower source.

        Args:
            source: the source's name (shown by ``manor config``).
            where: how the key is named in messages (the source and its spelling).
            textual: the value is text to convert (an environment variable).

        Raises:
            ConfigError: a bad table, kind or field; names ``where`` and the field.
        """
        section, _, name = key.partition(".")
        if not name or "." in name:
            raise ConfigError(f"{where}: expected [{section}] with one entry per name, got '{key}'")
        if section == "backends":
            if name == BUILT_IN_BACKEND:
                raise ConfigError(f"{where}: '{BUILT_IN_BACKEND}' is the built-in simulated backend (set up by [sim]); give yours another name")
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: expected a table [backends.{name}] with a kind ({', '.join(KINDS)})")
            try:
                table = msgspec.convert(value, BackendTable, strict=not textual)  # type: ignore[arg-type]
            except msgspec.ValidationError as exc:
                raise ConfigError(f"{where}{_field_message(exc)}") from None
            if isinstance(table, AgnoBackend) and (problem := session_id_problem(table.session_id)):
                raise ConfigError(f"{where}.session_id: {problem}")
            self._tables[name] = Named(table, source, ordinal, where)
        else:
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}: expected a backend name, got {value!r}")
            self._agents[name] = Named(value, source, ordinal, where)

    def resolve(self, default: Named) -> Backends:
        return Backends(tables=dict(self._tables), agents=dict(self._agents), default=default)


def session_id_problem(template: str) -> str | None:
    """What is wrong with a ``session_id`` template, or ``None`` if it can be filled in:
    it may name only ``SESSION_PLACEHOLDERS``, plainly (an id has no use for a format)."""
    return template_problem(template, SESSION_PLACEHOLDERS)


def _field_message(exc: msgspec.ValidationError) -> str:
    """msgspec's message with its ``$.field`` path turned into ``.field: ...``."""
    message, _, path = str(exc).partition(" - at `$")
    path = path.rstrip("`")
    if message.startswith("Invalid value") and path == ".kind":
        message += f" (kinds: {', '.join(KINDS)})"
    return f"{path}: {message}"
