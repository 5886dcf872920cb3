"""Layered configuration: every value comes from a source with an ordinal; highest wins.

    100  built-in defaults           (the schema)
    150  the scene file              (its platform limit and seed)
    200  a layer's own defaults      (the gate sets backend.sessions = 0)
    250  the user's manor.toml
    300  environment, MANOR_*
    400  command-line flags

Besides the flat ``section.field`` keys of the schema, a source may hold the named tables
of ``manor.config.backends`` (``backends.NAME``, ``agent_backends.AGENT``): layered by
the same ordinals, resolved into ``Config.backends``.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, final

import attrs
import msgspec

from ..errors import ConfigError, one_line, redacted_url
from ..limits import gate_url_problem
from .backends import (
    Assignment,
    Backends,
    BackendTable,
    Named,
    TableValues,
    is_table_key,
)
from .schema import (
    KEYS,
    RETIRED_KEYS,
    PlatformSettings,
    Settings,
    defaults,
    section_type,
)

__all__ = [
    "LEARNED_MAX_UNLIMITED",
    "Config",
    "Source",
    "check_value",
    "environment_source",
    "file_source",
    "flags_source",
    "layer_defaults_source",
    "resolve",
    "scene_source",
    "standard_sources",
    "unknown_variable",
    "with_backends",
]

BUILT_IN = 100
SCENE = 150
LAYER_DEFAULTS = 200
USER_FILE = 250
ENVIRONMENT = 300
FLAGS = 400

#: What the gate layer sets when it is in the stack: one gate subsumes the backends'
#: own session semaphores.
GATE_LAYER_DEFAULTS: Mapping[str, Any] = {"backend.sessions": 0}

ENV_PREFIX = "MANOR_"
#: The learned gate's largest size (``gate.max``) when the platform is unlimited.
LEARNED_MAX_UNLIMITED = 16
#: Environment variables that are not settings.
ENV_RESERVED = frozenset({"MANOR_CONFIG", "MANOR_DEBUG"})  # MANOR_DEBUG: manor.cli.main
_ENV_NAMES = {ENV_PREFIX + key.replace(".", "_").upper(): key for key in KEYS}


@final
@attrs.frozen
class Source:
    """Values from one place, with its ordinal and how to name a key from it in errors."""

    name: str
    ordinal: int
    values: Mapping[str, Any]
    #: How a key is spelled in this source (an env var name, a flag), for messages.
    spelling: Mapping[str, str] = attrs.field(factory=dict)
    #: Values are text (environment) and are converted to the key's type.
    textual: bool = False

    def describe(self, key: str) -> str:
        return f"{self.name}: {self.spelling.get(key, key)}"


@final
@attrs.frozen
class Config:
    """The effective settings, and for each key the source it came from; the named
    backends and per-agent lines in ``backends``."""

    settings: Settings
    origins: Mapping[str, str]
    backends: Backends = attrs.field(factory=Backends)

    def value(self, key: str) -> Any:
        section, field = key.split(".")
        return getattr(getattr(self.settings, section), field)

    def rows(self) -> list[tuple[str, Any, str]]:
        """(key, value, source) for every key, in schema order, as they may be shown and
        saved: a password in ``gate.url`` masked."""
        return [(key, redacted_url(value) if key == "gate.url" and value else value, self.origins[key]) for key in KEYS for value in (self.value(key),)]

    def table_rows(self) -> list[tuple[str, BackendTable | str, str]]:
        """(key, value, source) for every ``[backends.NAME]`` table and ``[agent_backends]`` line."""
        tables = [(f"backends.{name}", named.value, named.origin) for name, named in self.backends.tables.items()]
        lines = [(f"agent_backends.{agent}", named.value, named.origin) for agent, named in self.backends.agents.items()]
        return [*tables, *lines]

    def assign_backends(self, agent_files: Mapping[str, str], scene: str) -> dict[str, Assignment]:
        """Every agent's backend (see ``manor.config.backends``).

        Raises:
            ConfigError: a line for an agent the scene lacks, or an undefined backend.
        """
        return self.backends.assign(agent_files, scene)


def built_in_source() -> Source:
    return Source("built-in defaults", BUILT_IN, defaults())


def scene_source(path: str, values: Mapping[str, Any]) -> Source:
    """Settings a scene file carries (its platform limit, its seed)."""
    return Source(f"scene {Path(path).name}", SCENE, values)


def layer_defaults_source() -> Source:
    return Source("gate layer defaults", LAYER_DEFAULTS, GATE_LAYER_DEFAULTS)


def file_source(path: Path) -> Source:
    """The user's manor.toml.

    Raises:
        ConfigError: the file is missing, is not TOML, or has a key that is no setting.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    values: dict[str, Any] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: '{section}' is not a settings table (expected [{section}])")
        for field, value in table.items():
            values[f"{section}.{field}"] = value
    return Source(str(path), USER_FILE, values)


def environment_source(environ: Mapping[str, str]) -> Source:
    """``MANOR_*`` variables. One that names no setting is ignored with a warning on
    stderr, once a process (``unknown_variable``): other tools share the prefix in a
    user's shell, and a command they do not concern must still run."""
    values: dict[str, Any] = {}
    spelling: dict[str, str] = {}
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX) or name in ENV_RESERVED:
            continue
        key = _ENV_NAMES.get(name)
        if key is None:
            if name not in _WARNED:
                _WARNED.add(name)
                print(f"manor: warning: {unknown_variable(name)}", file=sys.stderr)
            continue
        values[key] = text
        spelling[key] = name
    return Source("environment", ENVIRONMENT, values, spelling, textual=True)


#: The unknown ``MANOR_*`` variables already warned of, by this process.
_WARNED: set[str] = set()


def unknown_variable(name: str) -> str:
    """What to tell a user of the ``MANOR_*`` variable ``name`` that no setting has:
    that it is ignored, and the setting they may have meant."""
    retired = next((hint for old, hint in RETIRED_KEYS.items() if name == ENV_PREFIX + old.replace(".", "_").upper()), "")
    if retired:
        return f"environment: {name} is not a Manor setting any more ({retired}); ignored"
    # Compared without the prefix they all share, which would make any two look alike.
    known = {known.removeprefix(ENV_PREFIX): known for known in [*_ENV_NAMES, *sorted(ENV_RESERVED)]}
    nearest = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), known, n=1, cutoff=0.6)
    hint = f"did you mean {known[nearest[0]]}?" if nearest else "'manor config' lists the settings"
    return f"environment: {name} is not a Manor setting; ignored ({hint})"


def flags_source(values: Mapping[str, Any], spelling: Mapping[str, str]) -> Source:
    """Values given on the command line (flags left out are not in ``values``)."""
    return Source("command line", FLAGS, values, spelling)


def user_file_path(explicit: Path | None, environ: Mapping[str, str]) -> Path | None:
    """--config, else $MANOR_CONFIG, else ./manor.toml if there is one."""
    if explicit is not None:
        return explicit
    if environ.get("MANOR_CONFIG"):
        return Path(environ["MANOR_CONFIG"])
    local = Path("manor.toml")
    return local if local.is_file() else None


def standard_sources(
    *, flags: Source | None = None, config_path: Path | None = None, environ: Mapping[str, str] | None = None
) -> list[Source]:
    """Built-in defaults, gate layer defaults, manor.toml, environment, flags."""
    environ = os.environ if environ is None else environ
    sources = [built_in_source(), layer_defaults_source()]
    path = user_file_path(config_path, environ)
    if path is not None:
        sources.append(file_source(path))
    sources.append(environment_source(environ))
    if flags is not None:
        sources.append(flags)
    return sources


def resolve(sources: Iterable[Source]) -> Config:
    """Merge sources, highest ordinal last, into validated settings.

    Raises:
        ConfigError: a key no setting has, or a bad value; names the source and key.
    """
    merged: dict[str, dict[str, Any]] = {}
    origins: dict[str, str] = {}
    default_at = (BUILT_IN, "built-in defaults: backend.default")
    tables = TableValues()
    for source in sorted(sources, key=lambda s: s.ordinal):
        for key, value in source.values.items():
            if is_table_key(key):
                where = source.describe(key)
                tables.put(key, value, source=source.name, ordinal=source.ordinal, where=where, textual=source.textual)
                continue
            merged.setdefault(key.split(".")[0], {})[key.split(".", 1)[-1]] = check_value(source, key, value)
            origins[key] = source.name
            if key == "backend.default":  # its ordinal is weighed against [agent_backends] lines
                default_at = (source.ordinal, source.describe(key))
    gate = merged.setdefault("gate", {})
    limit = merged.get("platform", {}).get("limit", PlatformSettings().limit)
    if gate.get("size") is None:
        gate["size"] = max(1, limit - 1) if limit else 8
        origins["gate.size"] = "derived: platform.limit - 1" if limit else "derived: platform unlimited"
    if gate["size"] == "auto" and gate.get("max") is None:
        gate["max"] = max(1, limit - 1) if limit else LEARNED_MAX_UNLIMITED
        origins["gate.max"] = "derived: platform.limit - 1" if limit else "derived: platform unlimited"
    settings = msgspec.convert(merged, Settings)
    default = Named(settings.backend.default, origins.get("backend.default", "built-in defaults"), *default_at)
    if settings.gate.learns and settings.gate.min > settings.gate.first_size:
        raise ConfigError(
            f"gate.min {settings.gate.min} ({origins.get('gate.min', 'built-in defaults')}) is above gate.max "
            f"{settings.gate.max} ({origins['gate.max']}): the learned gate would have no size to take"
        )
    return Config(settings, origins, tables.resolve(default))


def with_backends(config: Config, agent_files: Mapping[str, str], scene: str) -> Config:
    """Check every agent's backend and derive the clock from them.

    Real backends cannot run under the virtual clock (it would jump over their network
    waits), so an unset ``run.clock`` becomes real when any agent is on one; so does a
    gate shared through Redis (``gate.url``).

    Args:
        agent_files: agent id -> the ``backend`` field of its agent file.
        scene: names the scene in messages.

    Raises:
        ConfigError: an undefined backend, a line for no agent, or ``run.clock =
            virtual`` with an agent on a real backend or a shared gate.
    """
    real = {
        agent: (assignment.backend, table.kind)
        for agent, assignment in config.assign_backends(agent_files, scene).items()
        if (table := config.backends.table(assignment.backend)) is not None and table.kind != "sim"
    }
    clock = config.settings.run.clock
    if real:
        agent, (name, kind) = next(iter(real.items()))
        if clock == "virtual":
            raise ConfigError(
                f"{config.origins['run.clock']}: run.clock = virtual cannot time a real backend "
                f"({agent} is on '{name}', kind {kind}); use the real clock (--clock real)"
            )
        why = f"{agent} is on the {kind} backend '{name}'"
    elif config.settings.gate.url:
        # Processes that share a gate wait for each other in real time.
        if clock == "virtual":
            raise ConfigError(
                f"{config.origins['run.clock']}: run.clock = virtual cannot time a gate shared through Redis "
                f"({config.origins['gate.url']} sets gate.url); use the real clock (--clock real)"
            )
        why = "the gate is shared (gate.url)"
    else:
        return config
    if clock is None:
        run = msgspec.structs.replace(config.settings.run, clock="real")
        origins = {**config.origins, "run.clock": f"derived: {why}"}
        config = attrs.evolve(config, settings=msgspec.structs.replace(config.settings, run=run), origins=origins)
    return config


def check_value(source: Source, key: str, value: Any) -> Any:
    """Validate one value against its key's type (and bounds); return it converted.

    Raises:
        ConfigError: an unknown or retired key, or a bad value; names the source and key.
    """
    if key in RETIRED_KEYS:
        raise ConfigError(f"{source.describe(key)}: no longer a setting: {RETIRED_KEYS[key]}")
    if key not in KEYS:
        raise ConfigError(f"{source.describe(key)}: unknown setting")
    section, field = key.split(".")
    try:
        checked = msgspec.convert({field: value}, section_type(section), strict=not source.textual)
    except msgspec.ValidationError as exc:
        message = str(exc).split(" - at `", 1)[0]
        raise ConfigError(f"{source.describe(key)}: bad value {one_line(repr(value))}: {message}") from None
    converted = getattr(checked, field)
    if key == "gate.url" and (problem := gate_url_problem(converted or "")) is not None:
        # Its password masked by hand: a URL this broken may not parse.
        shown = re.sub(r"(//[^/@]*?:)[^/@]*@", r"\1***@", str(value))
        raise ConfigError(f"{source.describe(key)}: bad value {one_line(repr(shown))}: {problem}")
    return converted
