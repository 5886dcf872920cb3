"""``manor config``: every effective setting and the source it came from."""

from __future__ import annotations

import argparse
import json
import os

import msgspec
from rich.table import Table
from rich.text import Text

from ..config import BackendTable
from ..config.backends import describe_table, unset_variables, variables
from ..run.engine import configure
from . import output
from .options import sources_from_args

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    config, scene = configure(sources_from_args(args))
    agents = config.assign_backends({agent_id: agent.backend for agent_id, agent in scene.agents.items()}, scene.path)
    if args.json:
        rows = {key: {"value": value, "source": source} for key, value, source in config.rows()}
        for name, table in config.backends.tables.items():
            rows[f"backends.{name}"] = {
                "value": msgspec.to_builtins(table.value),
                "source": table.origin,
                # What 'manor run' would refuse: the names of variables it needs and lacks.
                "unset_variables": [variable for _, variable, _ in unset_variables(table.value, os.environ)],
            }
        # Every agent's effective backend (not only the [agent_backends] lines).
        for agent_id, chosen in agents.items():
            rows[f"agent_backends.{agent_id}"] = {"value": chosen.backend, "source": chosen.origin}
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(title="Manor settings", title_justify="left")
    table.add_column("key")
    table.add_column("value", justify="right")
    table.add_column("source")
    for key, value, source in config.rows():
        table.add_row(key, "unset" if value is None else str(value), source)
    console = output.console()
    console.print(table)
    if config.backends.tables:
        backends = Table(title="backends", title_justify="left")
        for column in ("name", "kind and target", "source", "environment"):
            backends.add_column(column)
        for name, named in config.backends.tables.items():
            backends.add_row(name, describe_table(named.value), named.origin, _environment(named.value))
        console.print(backends)
    assigned = Table(title="agents' backends", title_justify="left")
    for column in ("agent", "backend", "source"):
        assigned.add_column(column)
    for agent_id, chosen in agents.items():
        assigned.add_row(agent_id, chosen.backend, chosen.origin)
    console.print(assigned)
    return 0


def _environment(table: BackendTable) -> Text:
    """The variables a backend needs, each marked set or not (never its value)."""
    unset = {variable: wrong for _, variable, wrong in unset_variables(table, os.environ)}
    text = Text()
    for key, variable in variables(table):
        if text:
            text.append(", ")
        if variable in unset:
            text.append(f"{key} {variable} {unset[variable]}", style="bold red")
        else:
            text.append(f"{variable} set")
    return text or Text("—", style="dim")
