"""Command-line flags that set configuration keys (ordinal 400), shared by commands."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..config import Source, flags_source, standard_sources
from ..config.layering import user_file_path
from ..config.schema import defaults as built_in_defaults

__all__ = ["SETTING_FLAGS", "add_setting_flags", "files_read", "flags_from_args", "sources_from_args"]


@attrs.frozen
class SettingFlag:
    flag: str
    key: str
    type: Callable[[str], Any]
    help: str
    choices: tuple[str, ...] | None = None
    #: How the default is decided, for a key whose built-in default is not the value
    #: used (None: the built-in default, shown as it is).
    derived: str | None = None

    def default_help(self) -> str:
        """``(default: ...)``: the built-in default, or how it is derived."""
        return f"(default: {self.derived or built_in_defaults()[self.key]})"


def _seconds(text: str) -> float:
    return float(text)


def _size_or_auto(text: str) -> int | str:
    """A gate size, or "auto": learned from the platform's refusals."""
    return text if text == "auto" else int(text)


_size_or_auto.__name__ = "size"  # argparse's "invalid size value: 'x'"


SETTING_FLAGS: dict[str, SettingFlag] = {
    flag.key: flag
    for flag in (
        SettingFlag("--scene", "run.scene", str, "scene name in scenes/, or a path to a scene file"),
        SettingFlag("--ticks", "run.ticks", int, "number of ticks to run"),
        SettingFlag("--policy", "run.policy", str, "how a tick's calls are fired", ("pipeline", "batch", "legacy")),
        SettingFlag("--batch-size", "run.batch_size", int, "characters per barrier (batch, legacy)"),
        SettingFlag("--order", "run.order", str, "order tickets are handed out in", ("fifo", "longest-first")),
        SettingFlag("--seed", "run.seed", int, "override the scene's seed", derived="the scene's seed"),
        SettingFlag(
            "--clock", "run.clock", str, "virtual (simulated time) or real", ("virtual", "real"),
            derived="virtual; real when an agent is on a real backend or the gate is shared",
        ),
        SettingFlag("--agents", "run.agents", int, "replace the cast with N generated characters", derived="the scene's cast"),
        SettingFlag("--tick-interval", "run.tick_interval_s", _seconds, "seconds between tick starts (0 = free-running)"),
        SettingFlag("--tick-deadline", "run.tick_deadline_s", _seconds, "cancel a tick's calls after S seconds (0 = never)"),
        SettingFlag(
            "--gate-size", "gate.size", _size_or_auto, "calls in flight at the shared gate, or 'auto': learned from the platform's refusals",
            derived="platform limit - 1, at least 1; 8 when the platform is unlimited",
        ),
        SettingFlag(
            "--gate-max", "gate.max", int, "with --gate-size auto: the size it starts at and never grows past",
            derived="platform limit - 1, at least 1; 16 when the platform is unlimited",
        ),
        SettingFlag("--gate-min", "gate.min", int, "with --gate-size auto: the size it never shrinks below"),
        SettingFlag("--gate-rate", "gate.rate", float, "token bucket: calls per second (0 = no bucket)"),
        SettingFlag("--gate-timeout", "gate.timeout_s", _seconds, "longest wait at the gate, seconds"),
        SettingFlag(
            "--gate-url", "gate.url", str, "share the gate with every process using this Redis server and gate name "
            "(redis://host:port/db)", derived="none: the gate is this process's own",
        ),
        SettingFlag("--gate-name", "gate.name", str, "the shared gate's name at the Redis server"),
        SettingFlag(
            "--gate-unavailable-wait", "gate.unavailable_wait_s", _seconds, "after a tick every call of which found the shared gate "
            "lost, wait up to WAIT seconds for it before the next tick, then stop (0: stop at once)",
        ),
        SettingFlag(
            "--tenant", "gate.tenant", str, "whom this process's calls count for at a shared gate (empty: this host and "
            "process id); processes with the same tenant share its share",
        ),
        SettingFlag("--call-timeout", "call.timeout_s", _seconds, "longest a call may take, seconds"),
        SettingFlag(
            "--platform-limit", "platform.limit", int, "the provider platform's session limit (0 = unlimited)",
            derived=f"the scene's platform_limit, else {built_in_defaults()['platform.limit']}",
        ),
        SettingFlag("--backend", "backend.default", str, "put every agent on this backend: sim, or a [backends.NAME] of manor.toml"),
    )
}  # fmt: skip


def add_setting_flags(
    parser: argparse.ArgumentParser,
    keys: Iterable[str] = SETTING_FLAGS,
    *,
    config_file: bool = True,
    title: str = "settings (override manor.toml and MANOR_* variables; defaults are the built-in ones)",
    defaults: Mapping[str, str] | None = None,
) -> None:
    """Add the flags for ``keys``, plus ``--config`` unless ``config_file`` is false (a
    command that ignores manor.toml), in a help group called ``title``. Left out, a
    flag sets nothing; its help says what is used then.

    Args:
        defaults: key -> what the command uses when the flag is left out, where that is
            not the setting's own default (``manor play`` runs until quit).
    """
    group = parser.add_argument_group(title)
    for key in keys:
        flag = SETTING_FLAGS[key]
        default = f"(default: {defaults[key]})" if defaults and key in defaults else flag.default_help()
        group.add_argument(
            flag.flag,
            dest=_dest(key),
            type=flag.type,
            choices=flag.choices,
            default=None,
            metavar=None if flag.choices else flag.flag.lstrip("-").split("-")[-1].upper(),
            help=f"{flag.help} {default}".replace("%", "%%"),  # argparse formats help with %
        )
    if config_file:
        group.add_argument("--config", type=Path, default=None, metavar="PATH", help="config file (default: $MANOR_CONFIG, else ./manor.toml if there is one)")


def sources_from_args(args: argparse.Namespace) -> list[Source]:
    """Every configuration source, with the flags given on this command line on top.

    Raises:
        ConfigError: a bad manor.toml or MANOR_* variable.
    """
    return standard_sources(flags=flags_from_args(args), config_path=args.config)


def files_read(args: argparse.Namespace, scene_path: str | Path) -> dict[str, str | Path]:
    """The files a run reads that a user names, for ``manor.output_file.check_not_read``:
    the config file (``--config``, ``$MANOR_CONFIG`` or ./manor.toml) and the scene file."""
    files: dict[str, str | Path] = {"the scene file": scene_path}
    if (config := user_file_path(args.config, os.environ)) is not None:
        files["the config file"] = config
    return files


def flags_from_args(args: argparse.Namespace) -> Source:
    """Just the settings given as flags on this command line (ordinal 400)."""
    values = {key: getattr(args, _dest(key)) for key in SETTING_FLAGS if getattr(args, _dest(key), None) is not None}
    spelling = {key: SETTING_FLAGS[key].flag for key in values}
    return flags_source(values, spelling)


def _dest(key: str) -> str:
    return "setting_" + key.replace(".", "_")
