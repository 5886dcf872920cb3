"""A run in which every call fails (a bad model, a wrong key, a server down) says so in
one line on stderr and exits 3 — ``manor run``, a replay and ``manor fleet`` alike; it
used to exit 0 with nothing on stderr."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from manor.cli import main
from manor.cli.exit_statuses import NO_CALL_SUCCEEDED

pytestmark = pytest.mark.usefixtures("isolated")

#: Every agent on a server nobody listens at (port 9, discard): every call fails at once.
DOWN = '[backends.gpt]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n[backend]\ndefault = "gpt"\n'
#: (On the real clock, which of the first tick's calls failed first is the machine's doing.)
LINE = re.compile(
    r"manor: no call succeeded: 28 circuit_open, 14 provider_error — first: [a-z_]+( [a-z_]+)? at tick 1, provider_error: "
    r"m at http://127\.0\.0\.1:9/v1: ConnectError: .*\n"
)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_says_so_and_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    Path("manor.toml").write_text(DOWN, encoding="utf-8")
    code, out, err = _run(capsys, "run", "--ticks", "3", "--json", "--save", "down.msav")
    assert code == NO_CALL_SUCCEEDED == 3
    summary = json.loads(out)
    assert (summary["calls"], summary["ok"]) == (42, 0)
    assert summary["first_error"]["reason"] == "provider_error" and summary["first_error"]["tick"] == 1
    [saved, line] = err.splitlines()
    assert saved == "manor: saved 3 ticks to down.msav" and LINE.fullmatch(line + "\n")
    # A replay of it under other settings fails every call again, and says so alike.
    code, _, err = _run(capsys, "replay", "down.msav", "--gate-size", "2")
    assert code == 3 and LINE.fullmatch(err)
    # Verifying it asks another question: does the recording reproduce? It does.
    assert _run(capsys, "replay", "down.msav", "--verify")[0] == 0


def test_fleet_says_so_and_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    Path("manor.toml").write_text(DOWN, encoding="utf-8")
    code, out, err = _run(capsys, "fleet", "--worlds", "2", "--ticks", "2", "--json")
    assert code == 3
    assert json.loads(out)["total"]["ok"] == 0
    assert err.startswith("manor: no call succeeded: ") and " at tick 1, provider_error: m at http://127.0.0.1:9/v1" in err and err.count("\n") == 1


def test_some_calls_ok_is_no_failure(capsys: pytest.CaptureFixture[str]) -> None:
    """The simulated backend fails some calls, never all: exit 0, nothing on stderr."""
    code, out, err = _run(capsys, "run", "--ticks", "3", "--json")
    assert code == 0 and err == ""
    summary = json.loads(out)
    assert 0 < summary["ok"] < summary["calls"] or summary["first_error"] is None


def test_no_calls_is_no_failure(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "run", "--ticks", "0", "--json")[::2] == (0, "")


def test_help_names_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "  3    run, replay or fleet made calls and not one succeeded" in capsys.readouterr().out
