"""Manor's exception tree.

Every error a layer, a backend or the engine can raise maps to one of these at the
boundary (``raise ProviderError(...) from exc``)::

    ManorError
    ├── ConfigError             a bad setting: names its source and key
    ├── ContentError            a bad agent or scene file: names the file
    ├── SaveError               a save file that cannot be read or written
    ├── SharedGateError         the shared gate's server (Redis) cannot be reached at start
    ├── FleetError              a process of a fleet spread over processes failed
    ├── WorldError              a world's own code (a game's) failed: names it, the method, the tick
    └── CallError               one model call failed; ``reason`` is its degradation reason
        ├── GateTimeout             gate_timeout       waited too long at the shared gate
        ├── GateUnavailable         gate_unavailable   the shared gate's server was lost
        ├── SessionLimitError       platform_rejected  the platform's fail-fast "I'm full":
        │                                              Manor's own limiter, or the server's
        │                                              429/529 or a CLI's rate-limit message
        ├── CallTimeout             call_timeout       the per-call timeout expired
        ├── CircuitOpen             circuit_open       the breaker refused the call
        ├── InvalidOutput           invalid_output     the answer is not of the request's
        │                                              shape (``manor.answers``)
        └── ProviderError           provider_error     the backend failed or answered garbage
            ├── AccessRefused                          the server refused the account (401/403)
            └── BudgetExceeded                         the cost budget is spent

A call error is ``final`` when no retry can cure it: a spend or usage cap reached
(a final ``SessionLimitError``), a key the server refuses (``AccessRefused``). A run that
meets one stops after the tick it happened in (``PlatformClosed``), keeping its save.

The reason of a call that was cancelled (a tick deadline) is ``cancelled``; trio's own
``Cancelled`` carries it, so there is no class for it.

A degraded call's record keeps its error's message (``error_line``): one line, at most
``ERROR_CHARS`` characters, with every secret Manor has read (``add_secret``) masked in
every spelling a server may quote it back in (plain, JSON-escaped, URL-encoded, base64).
Messages say what failed, not who called: the record names the agent.
"""

from __future__ import annotations

import base64
import json
import re
from typing import ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

from .calls import RateLimits

__all__ = [
    "ERROR_CHARS",
    "REASONS",
    "AccessRefused",
    "BudgetExceeded",
    "CallError",
    "CallTimeout",
    "CircuitOpen",
    "ConfigError",
    "ContentError",
    "FleetError",
    "GateTimeout",
    "GateUnavailable",
    "InvalidOutput",
    "ManorError",
    "PlatformClosed",
    "ProviderError",
    "RefusedBy",
    "SaveError",
    "SessionLimitError",
    "SharedGateError",
    "WorldError",
    "add_secret",
    "error_line",
    "leaves",
    "one_line",
    "redacted_url",
]

#: Every degradation reason, in the order the dashboard and reports show them.
REASONS: tuple[str, ...] = (
    "gate_timeout",
    "platform_rejected",
    "call_timeout",
    "provider_error",
    "circuit_open",
    "cancelled",
    "invalid_output",
    "gate_unavailable",
)


def one_line(text: object) -> str:
    """``text`` fit for a one-line message: newlines and other control characters
    escaped, so that quoting a broken file's contents cannot break the line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


#: The longest message a call record keeps.
ERROR_CHARS = 300

#: Values read from the environment for backends (API keys): never shown in a message.
_SECRETS: set[str] = set()
#: One pattern matching every spelling of every secret; made again when one is added.
_masked: re.Pattern[str] | None = None


def add_secret(value: str) -> None:
    """Mask ``value`` wherever a call's error message would quote it — as it is,
    JSON-escaped, URL-encoded (each character or none) or in base64 (standard or
    URL-safe, at any offset of a longer encoded text). Values shorter than 4 characters
    are not masked (they would mask ordinary words)."""
    global _masked
    if len(value) >= 4 and value not in _SECRETS:
        _SECRETS.add(value)
        _masked = None


def _mask(text: str) -> str:
    global _masked
    if not _SECRETS:
        return text
    if _masked is None:
        spellings = sorted({spelling for secret in _SECRETS for spelling in _spellings(secret)}, key=len, reverse=True)
        _masked = re.compile("|".join(spellings))
    return _masked.sub("***", text)


def _spellings(secret: str) -> list[str]:
    """Regular expressions for the ways a server may quote ``secret`` back."""
    # Character by character: itself, percent-encoded (either case of hex digits),
    # JSON-escaped; a server may encode some characters and not others (``sk%2Dabc``).
    characters = "".join(f"(?:{'|'.join(_character_spellings(character))})" for character in secret)
    encoded = secret.encode()
    base64_cores = []
    for offset in range(3):  # where the secret starts in a longer text, modulo 3 bytes
        whole = base64.b64encode(bytes(offset) + encoded).decode()
        # Only the characters made of the secret's bits alone: the first and last may
        # share bits with whatever stands around it.
        core = whole[-(-8 * offset // 6) : 8 * (offset + len(encoded)) // 6]
        if len(core) >= 4:
            base64_cores += [core, core.translate(_URL_SAFE)]
    return [characters, *(re.escape(core) for core in base64_cores)]


_URL_SAFE = str.maketrans("+/", "-_")


def _character_spellings(character: str) -> list[str]:
    utf8 = character.encode()
    spellings = [
        re.escape(character),
        "".join(f"%{_either_case(f'{byte:02x}')}" for byte in utf8),
        "".join(r"\\" + _either_case(f"u{unit:04x}") for unit in _utf16(character)),
    ]
    if (escaped := json.dumps(character)[1:-1]) != character:
        spellings.append(re.escape(escaped))
    if character == " ":
        spellings.append(r"\+")  # a form's encoding
    if character == "/":
        spellings.append(r"\\/")  # JSON may escape it
    return spellings


def _either_case(text: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in text)


def _utf16(character: str) -> list[int]:
    units = character.encode("utf-16-be")
    return [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]


def redacted_url(url: str) -> str:
    """``url`` as it may be shown or saved: a password in it replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def error_line(error: BaseException | str) -> str:
    """What a call record keeps of ``error``: its message on one line, secrets masked,
    cut to ``ERROR_CHARS`` characters (an ellipsis says so)."""
    text = one_line(_mask(str(error))) or type(error).__name__
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"
def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside ``error``, however deep in exception groups (trio's
    nurseries raise groups); ``[error]`` itself when it is no group."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


class ManorError(Exception):
    """Base of every error Manor raises on purpose.

    Its message is one line by construction: control characters in it (a newline in a
    TOML key or a file name it quotes) are escaped with ``one_line``, so no quoted input
    can break the ``manor: error: ...`` line, whichever raise forgot to.
    """

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (one_line(args[0]),)
        super().__init__(*args)


class ConfigError(ManorError):
    """A setting is unknown or has a bad value. The message names the source and key."""


class ContentError(ManorError):
    """An agent or scene file is missing or malformed. The message names the file."""


class SaveError(ManorError):
    """A save file cannot be read or written. The message names the file."""


class SharedGateError(ManorError):
    """A gate shared across processes cannot be used: its server cannot be reached when
    a run starts, or refuses the gate's scripts. The message names the server."""


class FleetError(ManorError):
    """A process running some of a fleet's worlds (``manor fleet --processes``) failed,
    or was given work it cannot read. The message names its worlds and says why."""


class PlatformClosed(ManorError):
    """A backend's refusal that no retry can cure (a spend cap, a usage cap, a key the
    server refuses) stopped the run after the tick it came in. The message is the
    refusal's, and says what the run had done (ticks, the save)."""


class WorldError(ManorError):
    """A world's own code failed (``manor.worlds.failures``): a bug in the game, not in
    Manor. The message names the world, its file, the method and the tick."""


class CallError(ManorError):
    """One model call failed; ``reason`` is the degradation it is counted under.

    ``final``: no retry can cure it; the run stops after this tick (``PlatformClosed``).
    """

    reason: ClassVar[str] = "provider_error"
    final: bool = False


class GateTimeout(CallError):
    """The call waited at the shared gate longer than its timeout."""

    reason = "gate_timeout"


class GateUnavailable(CallError):
    """The shared gate's server (Redis) was lost: the call was not let through, since
    nobody could tell whether the platform had room. Calls already running go on."""

    reason = "gate_unavailable"


#: Who refused a ``platform_rejected`` call: Manor's own platform limiter (the call never
#: reached the backend) or the server (an HTTP 429: it did).
RefusedBy = Literal["limiter", "server"]


class SessionLimitError(CallError):
    """The provider platform is at its session limit (fail-fast flow control).

    Args:
        refused_by: ``limiter`` when Manor's own platform limiter refused the call,
            ``server`` (the default: what a backend raises) when the server did (an
            HTTP 429 or 529, a CLI's rate-limit message).
        retry_after: seconds the server asked us to wait, when it said (``Retry-After``).
        final: no retry will help (a spend cap, a CLI's usage cap): the run stops.
        rates: what the server's rate headers said, when it sent them.
    """

    reason = "platform_rejected"

    def __init__(
        self,
        message: str = "platform session limit reached",
        *,
        refused_by: RefusedBy = "server",
        retry_after: float | None = None,
        final: bool = False,
        rates: RateLimits | None = None,
    ):
        super().__init__(message)
        self.refused_by: RefusedBy = refused_by
        self.retry_after = retry_after
        self.final = final
        self.rates = rates


class CallTimeout(CallError):
    """The per-call timeout expired before the backend answered."""

    reason = "call_timeout"


class CircuitOpen(CallError):
    """The circuit breaker is open: the call was refused without reaching the backend."""

    reason = "circuit_open"


class InvalidOutput(CallError):
    """The backend answered, but not with JSON of the request's shape; the message is
    the validation error (what a repair quotes back)."""

    reason = "invalid_output"


class ProviderError(CallError):
    """The backend failed, or answered something that is not a valid response."""

    reason = "provider_error"


class AccessRefused(ProviderError):
    """The server refused the account itself (HTTP 401 or 403: a missing or invalid
    key, no permission): no retry will help, so the run stops (``final``)."""

    final = True


class BudgetExceeded(ProviderError):
    """The configured cost budget is spent; no further calls are made."""
