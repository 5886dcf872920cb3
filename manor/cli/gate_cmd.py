"""``manor gate``: look at, resize and reset a gate shared across processes through Redis."""

from __future__ import annotations

import argparse
import json
from typing import Any

import attrs
from rich.table import Table

from ..config import resolve
from ..errors import ConfigError, redacted_url
from ..run import interrupts
from ..run.engine import configure
from . import output
from .options import sources_from_args

__all__ = ["reset_gate", "resize_gate", "show_status"]


def _gate(args: argparse.Namespace) -> tuple[str, str]:
    """The gate's url and name from the settings.

    Raises:
        ConfigError: no url is set.
    """
    gate = resolve(sources_from_args(args)).settings.gate
    if not gate.url:
        raise ConfigError("no shared gate: give its Redis server with --gate-url, MANOR_GATE_URL or [gate] url in manor.toml")
    return gate.url, gate.name


def show_status(args: argparse.Namespace) -> int:
    from ..admission.redis_gate import gate_status

    url, name = _gate(args)
    status = interrupts.run(gate_status, url, name)
    if status is None:
        raise ConfigError(_unused(url, name))
    if args.json:
        print(json.dumps(attrs.asdict(status)))
        return 0
    console = output.console()
    figures = status.statistics
    table = Table(title=f"gate {status.name} at {status.url}", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    tokens = "off" if figures.tokens_available is None else f"{figures.tokens_available:.2f}"
    rows: list[tuple[str, Any]] = [
        ("size", figures.size),
        ("in flight", figures.in_flight),
        ("waiting", figures.waiting),
        ("peak in flight", figures.peak_in_flight),
        ("admitted", figures.admitted),
        ("timeouts", figures.timeouts),
        ("cancelled", figures.cancelled),
        ("rate / burst", f"{status.rate:g}/s, burst {status.burst}" if status.rate else "none"),
        ("token bucket", tokens),
        ("tokens refunded", figures.refunds),
        ("mean / max wait (s)", f"{figures.total_wait / max(1, figures.admitted):.3f} / {figures.max_wait:.3f}"),
        ("lease (s)", f"{status.lease_s:g}"),
    ]
    for figure, value in rows:
        table.add_row(figure, str(value))
    console.print(table)
    holders = Table(title="processes", title_justify="left")
    for column in ("host", "pid", "world", "holding", "waiting"):
        holders.add_column(column, justify="right" if column in ("pid", "holding", "waiting") else "left")
    for holder in status.holders:
        holders.add_row(holder.host, holder.pid, holder.world, str(holder.holding), str(holder.waiting))
    console.print(holders if status.holders else "no process is using the gate")
    if status.tenants:
        tenants = Table(title="tenants", title_justify="left")
        for column in ("tenant", "weight", "cap", "holding", "waiting", "share, last minute"):
            tenants.add_column(column, justify="left" if column == "tenant" else "right")
        for tenant in status.tenants:
            share = "-" if tenant.share_last_minute is None else f"{tenant.share_last_minute:.1%} ({tenant.session_s_last_minute:.1f} session-s)"
            cap = "-" if tenant.max_sessions is None else str(tenant.max_sessions)
            tenants.add_row(tenant.name, f"{tenant.weight:g}", cap, str(tenant.holding), str(tenant.waiting), share)
        console.print(tenants)
    return 0


def resize_gate(args: argparse.Namespace) -> int:
    from ..admission.redis_gate import resize_shared_gate

    url, name = _gate(args)
    if not args.force:
        _check_below_the_platform(args)
    resized = interrupts.run(resize_shared_gate, url, name, args.size)
    if resized is None:
        raise ConfigError(_unused(url, name))
    before, after = resized
    print(f"gate {name} at {after.url}: size {before.statistics.size} -> {after.statistics.size}")
    return 0


def reset_gate(args: argparse.Namespace) -> int:
    from ..admission.redis_gate import reset_shared_gate

    url, name = _gate(args)
    before = interrupts.run(reset_shared_gate, url, name)
    if before is None:
        raise ConfigError(_unused(url, name))
    figures = before.statistics
    bucket = f"rate {before.rate:g}/s, burst {before.burst}" if before.rate else "no rate"
    print(
        f"gate {name} at {before.url}: reset (it had size {figures.size}, {bucket}, lease {before.lease_s:g} s); "
        "the next process to use it makes it with its own settings"
    )
    return 0


def _check_below_the_platform(args: argparse.Namespace) -> None:
    """A shared gate stays as sized after every process has left: a size above the
    platform's limit less one would have the platform refuse calls of every later run.

    Raises:
        ConfigError: ``args.size`` is above the platform limit less one.
    """
    config, _ = configure(sources_from_args(args))
    limit = config.settings.platform.limit
    if limit and args.size > limit - 1:
        raise ConfigError(
            f"gate size {args.size} is above the platform limit {limit} less one ({config.origins['platform.limit']}): "
            f"the platform would refuse calls past {limit} in flight; --force sets it anyway, --platform-limit names another platform"
        )


def _unused(url: str, name: str) -> str:
    return f"gate {name} at {redacted_url(url)}: no process has used it (or the server lost it)"
