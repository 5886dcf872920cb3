"""``manor run``: the JSON it prints, the flags it takes, and bad input in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scenes_fixture import write_scene

from manor.cli import main
from manor.errors import REASONS
from manor.worlds.manor import CALLERS as MANOR_CALLERS

KEYS = {
    "scene", "policy", "ticks", "seed", "platform_limit", "gate_size", "calls", "ok", "degraded", "degradations",
    "platform_rejections", "errors", "peak_platform_sessions", "tick_seconds", "world_hash",
}  # fmt: skip

SCENE = """\
name = "Small"
seed = 3
platform_limit = 3
rooms = ["hall", "cellar"]
cast = ["hobbes", "alice"]
"""

ALICE = 'name = "Alice"\n[sim]\nlatency_s = 0.5\n'


# No manor.toml from the working directory, no MANOR_* from the environment.
pytestmark = pytest.mark.usefixtures("isolated")


def manor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``manor ARGV``; its exit code, stdout and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code, out, err = manor(capsys, "run", "--json", *argv)
    assert (code, err) == (0, "")
    assert out.endswith("}\n") and out.count("\n") == 1, "exactly one JSON object on one line"
    return json.loads(out)


class TestJson:
    def test_tokens_and_cost_add_up_over_the_calls(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """Tokens are summed over every call; cost prices them at cost.price_per_1k_tokens."""
        monkeypatch.setenv("MANOR_COST_PRICE_PER_1K_TOKENS", "2.5")
        summary = run_json(capsys, "--ticks", "3")
        tokens = summary["tokens"]
        assert tokens["input"] > 0 and tokens["output"] > 0
        assert summary["cost"] == pytest.approx((tokens["input"] + tokens["output"]) / 1000 * 2.5, abs=1e-5)

    def test_one_object_with_every_key(self, capsys: pytest.CaptureFixture[str]) -> None:
        summary = run_json(capsys, "--ticks", "5")
        assert KEYS <= set(summary)
        assert (summary["scene"], summary["policy"], summary["ticks"], summary["seed"]) == ("The Wacky Manor", "pipeline", 5, 1789)
        assert (summary["platform_limit"], summary["gate_size"]) == (6, 5)
        assert summary["calls"] == summary["ok"] == 5 * 14
        assert summary["degraded"] == summary["platform_rejections"]["total"] == 0 and summary["errors"] == []
        assert summary["degradations"] == {kind: dict.fromkeys(REASONS, 0) for kind in MANOR_CALLERS}
        assert list(summary["degradations"]) == ["character", "narrator", "summariser", "scene_beat"]
        assert list(summary["degradations"]["character"]) == [
            "gate_timeout", "platform_rejected", "call_timeout", "provider_error", "circuit_open", "cancelled",
            "invalid_output", "gate_unavailable",
        ]  # fmt: skip
        seconds = summary["tick_seconds"]
        assert set(seconds) == {"mean", "p50", "p95", "max"}
        assert 0 < seconds["p50"] <= seconds["p95"] <= seconds["max"]
        assert len(summary["world_hash"]) == 32 and int(summary["world_hash"], 16) >= 0
        assert summary["peak_platform_sessions"] == 5

    def test_legacy_counts_its_rejections_and_degradations(self, capsys: pytest.CaptureFixture[str]) -> None:
        summary = run_json(capsys, "--ticks", "10", "--policy", "legacy")
        assert summary["policy"] == "legacy"
        assert summary["degraded"] > 0
        total = sum(n for reasons in summary["degradations"].values() for n in reasons.values())
        assert total == summary["degraded"] == summary["calls"] - summary["ok"]
        # One definition of platform rejections: the calls degraded platform_rejected.
        rejected = sum(reasons["platform_rejected"] for reasons in summary["degradations"].values())
        assert summary["platform_rejections"]["total"] == summary["platform_rejections"]["by_limiter"] == rejected > 0
        # Every degraded call's message is summed up: here the limiter's "platform full".
        assert summary["errors"] == [
            {"reason": "platform_rejected", "caller": "scene_beat", "message": "platform full: 6 of 6 sessions in use", "count": rejected}
        ]

    def test_the_same_seed_gives_the_same_hash_and_another_seed_another(self, capsys: pytest.CaptureFixture[str]) -> None:
        first = run_json(capsys, "--ticks", "8")
        again = run_json(capsys, "--ticks", "8")
        other = run_json(capsys, "--ticks", "8", "--seed", "1790")
        assert first == again
        assert other["seed"] == 1790
        assert other["world_hash"] != first["world_hash"]

    def test_zero_ticks_reports_the_starting_world(self, capsys: pytest.CaptureFixture[str]) -> None:
        summary = run_json(capsys, "--ticks", "0")
        assert (summary["ticks"], summary["calls"]) == (0, 0)
        assert len(summary["world_hash"]) == 32

    def test_flags_reach_the_run(self, capsys: pytest.CaptureFixture[str]) -> None:
        summary = run_json(capsys, "--ticks", "3", "--policy", "batch", "--batch-size", "2", "--gate-size", "3", "--platform-limit", "4")
        assert (summary["policy"], summary["gate_size"], summary["platform_limit"]) == ("batch", 3, 4)
        assert summary["peak_platform_sessions"] == 3
        assert summary["degraded"] == 0

    def test_a_tick_deadline_cancels_and_counts(self, capsys: pytest.CaptureFixture[str]) -> None:
        summary = run_json(capsys, "--ticks", "3", "--tick-deadline", "3")
        assert summary["tick_seconds"]["max"] == pytest.approx(3.0, abs=1e-6)
        cancelled = sum(reasons["cancelled"] for reasons in summary["degradations"].values())
        assert cancelled == summary["degraded"] > 0

    def test_agents_generates_a_cast_and_runs(self, capsys: pytest.CaptureFixture[str]) -> None:
        summary = run_json(capsys, "--ticks", "2", "--agents", "30")
        # 30 characters, the narrator, the summariser and the scene's two beats.
        assert summary["calls"] == summary["ok"] == 2 * (30 + 4)

    def test_a_scene_file_with_its_own_agents(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        path = write_scene(tmp_path, SCENE, agents={"alice": ALICE})
        summary = run_json(capsys, "--ticks", "4", "--scene", str(path))
        assert (summary["scene"], summary["seed"], summary["platform_limit"], summary["gate_size"]) == ("Small", 3, 3, 2)
        assert summary["calls"] == 4 * 4


class TestReadable:
    def test_a_table_not_json(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, err = manor(capsys, "run", "--ticks", "2", "--policy", "legacy")
        assert code == 0
        assert "The Wacky Manor" in out and "platform rejections" in out and "degradations" in out
        for reason in REASONS:
            assert reason in out
        assert not out.lstrip().startswith("{")
        assert "Traceback" not in err


def _bad_scene(tmp_path: Path, kind: str) -> tuple[list[str], str]:
    """A scene file broken in one way, and a fragment of the error it must give."""
    scenes = tmp_path / "scenes"
    if kind == "malformed":
        path = write_scene(tmp_path, 'name = "x"\nrooms = = ["hall"]\n')
        return ["--scene", str(path)], f"{path}: malformed TOML: Invalid value (at line 2, column 9)"
    if kind == "unknown scene key":
        path = write_scene(tmp_path, SCENE + "colour = 'red'\n", agents={"alice": ALICE})
        return ["--scene", str(path)], f"{path}: Object contains unknown field `colour`"
    if kind == "unknown agent key":
        path = write_scene(tmp_path, SCENE, agents={"alice": ALICE + "hat = 1\n"})
        return ["--scene", str(path)], f"{tmp_path / 'agents' / 'alice.toml'}: Object contains unknown field `hat`"
    if kind == "no agent file":
        path = write_scene(tmp_path, SCENE)
        return ["--scene", str(path)], f"{path}: cast member 'alice' has no agent file"
    if kind == "missing file":
        return ["--scene", str(scenes / "gone.toml")], f"{scenes / 'gone.toml'}: no such scene file"
    raise AssertionError(kind)


class TestBadInput:
    """One clear line on stderr, a non-zero exit, never a traceback."""

    def _check(self, code: int, out: str, err: str, expected_code: int, fragment: str) -> None:
        assert code == expected_code
        assert out == ""
        assert err.count("\n") == 1 and err.endswith("\n"), err
        assert fragment in err
        assert "Traceback" not in err

    @pytest.mark.parametrize("kind", ["malformed", "unknown scene key", "unknown agent key", "no agent file", "missing file"])
    def test_a_bad_scene(self, capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str) -> None:
        argv, fragment = _bad_scene(tmp_path, kind)
        self._check(*manor(capsys, "run", *argv), 1, fragment)

    @pytest.mark.parametrize(
        ("argv", "code", "fragment"),
        [
            (["--scene", "nope"], 1, "manor: error: unknown scene 'nope' (bundled scenes:"),
            (["--ticks", "-1"], 1, "manor: error: command line: --ticks: bad value -1: Expected `int` >= 0"),
            (["--agents", "0"], 1, "--agents: bad value 0"),
            (["--tick-deadline", "-2"], 1, "--tick-deadline: bad value -2.0"),
            (["--batch-size", "0"], 1, "--batch-size: bad value 0"),
            (["--frobnicate"], 2, "unrecognized arguments: --frobnicate"),
            (["--ticks", "many"], 2, "argument --ticks: invalid int value: 'many'"),
            (["--policy", "fastest"], 2, "argument --policy: invalid choice: 'fastest'"),
        ],
    )
    def test_bad_flags(self, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, fragment: str) -> None:
        self._check(*manor(capsys, "run", *argv), code, fragment)

    def test_a_bad_environment_variable(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("MANOR_RUN_TICKS", "-3")
        self._check(*manor(capsys, "run"), 1, "environment: MANOR_RUN_TICKS: bad value '-3'")

    @pytest.mark.parametrize(("kind", "code"), [("malformed", 1), ("flag", 2)])
    def test_as_a_process(self, tmp_path: Path, kind: str, code: int) -> None:
        """The real entry point, ``python -m manor``."""
        if kind == "flag":
            argv, fragment = ["--frobnicate"], "unrecognized arguments: --frobnicate"
        else:
            argv, fragment = _bad_scene(tmp_path, kind)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MANOR_")}
        done = subprocess.run([sys.executable, "-m", "manor", "run", *argv], capture_output=True, text=True, env=env, timeout=60)
        self._check(done.returncode, done.stdout, done.stderr, code, fragment)
