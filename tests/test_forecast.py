"""Warnings before the first tick: a gate too small for the tick it must carry."""

from __future__ import annotations

from typing import Any

import pytest
from test_play import drive, play_app, until

from manor.cli import main
from manor.config import flags_source, standard_sources
from manor.run.engine import build_engine, configure
from manor.run.forecast import gate_overload

# No manor.toml from the working directory, no MANOR_* from the environment.
pytestmark = pytest.mark.usefixtures("isolated")


def _engine(**values: Any):  # type: ignore[no-untyped-def]
    config, scene = configure(standard_sources(flags=flags_source({k.replace("__", "."): v for k, v in values.items()}, {}), environ={}))
    return build_engine(config, scene)


def test_the_default_scene_fits_its_gate() -> None:
    assert gate_overload(_engine()) is None


def test_a_thousand_guests_through_a_gate_of_five_are_named_with_the_fix() -> None:
    warning = gate_overload(_engine(run__agents=1000))
    assert warning is not None
    assert warning.startswith("a tick's 1004 calls need about ") and "a call waits at most 30 s (gate.timeout_s)" in warning
    assert "raise --gate-timeout to " in warning and "--platform-limit " in warning


def test_the_suggested_settings_silence_it() -> None:
    """Each fix the line suggests is enough on its own."""
    warning = gate_overload(_engine(run__agents=1000))
    assert warning is not None
    timeout = int(warning.split("raise --gate-timeout to ")[1].split(",")[0])
    limit = int(warning.split("--platform-limit ")[1].split()[0])
    assert gate_overload(_engine(run__agents=1000, gate__timeout_s=timeout)) is None
    assert gate_overload(_engine(run__agents=1000, platform__limit=limit)) is None
    assert gate_overload(_engine(run__agents=1000, platform__limit=limit - 2)) is not None


def test_legacy_has_no_gate_to_warn_about() -> None:
    assert gate_overload(_engine(run__agents=1000, run__policy="legacy")) is None


def test_run_prints_it_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--agents", "200", "--ticks", "1", "--json", "--gate-timeout", "5"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("manor: warning: a tick's 204 calls need about ") and err.count("\n") == 1


def test_play_shows_it_as_a_notification() -> None:
    app = play_app(values={"run.agents": 200, "gate.timeout_s": 5})

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        await until(pilot, lambda: len(app.notices) > 0, "the warning")

    drive(app, scenario)
    assert any(n.title == "the gate is too small for a tick" for n in app.notices)
