"""``manor fleet``: its JSON and tables, one save per world that replays on its own, bad
input in one line, and a signal that stops every world cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from rich.console import Console
from saves_fixture import frames_of, rewrite_payloads
from scenes_fixture import fixed_latency_scene

from manor.cli import main
from manor.cli.fleet_cmd import print_summary
from manor.saves import read_save
from manor.wording import counted

pytestmark = pytest.mark.usefixtures("isolated")

RUN_KEYS = {
    "scene", "policy", "order", "ticks", "seed", "platform_limit", "gate_size", "calls", "ok", "degraded", "degradations",
    "platform_rejections", "repairs", "errors", "first_error", "peak_platform_sessions", "tick_seconds", "tokens", "cost", "world_hash", "world",
}  # fmt: skip
#: What a fleet world adds of its tenant and its share of the gate.
SHARE_KEYS = {
    "tenant", "weight", "max_sessions", "admissions", "admissions_share", "gate_wait_s",
    "backlogged_share", "share_per_weight", "session_s_backlogged",
}  # fmt: skip
TOTAL_KEYS = {
    "worlds", "gate_size", "platform_limit", "calls", "ok", "degraded", "degradations", "platform_rejections", "repairs",
    "peak_platform_sessions", "tick_seconds",
}  # fmt: skip


def manor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``manor ARGV``; its exit code, stdout and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def flat(text: str) -> str:
    """``text`` with its white space folded: what a console wraps depends on its width and
    on the length of the paths it prints (a temporary folder's differs between machines)."""
    return " ".join(text.split())


def fleet_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = manor(capsys, "fleet", "--json", *argv)
    assert code == 0
    assert all(line.startswith(("manor: warning: ", "manor: saved ")) for line in err.splitlines()), err
    assert out.count("\n") == 1, "exactly one JSON object on one line"
    return json.loads(out)


def verify(capsys: pytest.CaptureFixture[str], save: Path) -> dict[str, Any]:
    code, out, err = manor(capsys, "replay", str(save), "--verify", "--json")
    report = json.loads(out)
    assert (code == 0) == report["verified"]
    return report


class TestReport:
    def test_json_worlds_total_and_fairness(self, capsys: pytest.CaptureFixture[str]) -> None:
        summary = fleet_json(capsys, "--worlds", "3", "--ticks", "4", "--seed", "10")
        assert set(summary) == {"worlds", "total", "fairness"}
        worlds = summary["worlds"]
        assert [(world["index"], world["seed"]) for world in worlds] == [(0, 10), (1, 11), (2, 12)]
        for world in worlds:
            assert set(world) == RUN_KEYS | {"index", "elapsed_s", "calls_per_s"} | SHARE_KEYS
        assert set(summary["total"]) == TOTAL_KEYS
        assert summary["total"]["calls"] == 3 * 4 * 14
        assert set(summary["fairness"]) == {"jain_share_per_weight", "makespan_min_max"}

    def test_run_twice_the_same_json(self, capsys: pytest.CaptureFixture[str]) -> None:
        argv = ("--worlds", "4", "--ticks", "5", "--policy", "batch", "--gate-timeout", "15")
        assert fleet_json(capsys, *argv) == fleet_json(capsys, *argv)

    def test_a_world_is_what_manor_run_says_of_it_alone(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A fleet of one prints, for its world, what ``manor run --json`` prints (its
        peak sessions being its own)."""
        (world,) = fleet_json(capsys, "--worlds", "1", "--ticks", "6")["worlds"]
        code, out, _ = manor(capsys, "run", "--json", "--ticks", "6")
        alone = json.loads(out)
        assert code == 0
        assert {key: world[key] for key in RUN_KEYS} == alone

    def test_the_tables(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, err = manor(capsys, "fleet", "--worlds", "2", "--ticks", "3", "--gate-timeout", "5")
        assert code == 0 and err.startswith("manor: warning: a tick of each of the 2 worlds")
        words = " ".join(out.split())  # titles wrap at the table's width
        assert words.startswith("fleet — 2 worlds of The Wacky Manor, 3 ticks, one gate of 5 / platform 6, policy pipeline")
        for text in ("Jain's index of session-time", "degradations, all worlds", "what failed, all worlds", "no gate slot within 5s"):
            assert text in words
        assert max(len(line) for line in out.splitlines()) <= 80

    def test_worlds_stopped_at_different_ticks_say_both(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A fleet stopped by a signal reports worlds that got to different ticks: the
        title gives the range, not the first world's."""
        summary = fleet_json(capsys, "--worlds", "2", "--ticks", "3")
        summary["worlds"][1]["ticks"] = 2
        console = Console(width=80, record=True)
        print_summary(console, summary)
        assert " ".join(console.export_text().split()).startswith("fleet — 2 worlds of The Wacky Manor, 2-3 ticks, one gate")

    def test_a_gate_too_small_for_the_fleet_is_a_warning(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = manor(capsys, "fleet", "--json", "--worlds", "16", "--ticks", "1")
        assert code == 0
        assert err.startswith("manor: warning: a tick of each of the 16 worlds, 224 calls, needs about ") and err.count("\n") == 1


class TestSaveDir:
    def test_every_world_saves_and_verifies_on_its_own(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Worlds whose calls time out behind the other worlds' at the shared gate: each
        save replays alone to the recorded hash and to every recorded admission."""
        saves = tmp_path / "fleet"
        summary = fleet_json(capsys, "--worlds", "6", "--ticks", "4", "--gate-timeout", "12", "--save-dir", str(saves))
        assert summary["total"]["degradations"]["character"]["gate_timeout"] > 0
        files = sorted(saves.iterdir())
        assert [path.name for path in files] == [f"world-{index}-wacky_manor.msav" for index in range(6)]
        for index, path in enumerate(files):
            save = read_save(path)
            assert (save.header.fleet.world, save.header.fleet.worlds) == (index, 6)
            report = verify(capsys, path)
            assert report == {
                "ticks": 4, "verified": True, "first_mismatch": None, "world_hash": summary["worlds"][index]["world_hash"],
                "fleet": {"world": index, "worlds": 6},
            }  # fmt: skip

    def test_the_verify_line_says_what_was_checked(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        fleet_json(capsys, "--worlds", "2", "--ticks", "2", "--save-dir", str(tmp_path))
        code, out, _ = manor(capsys, "replay", str(tmp_path / "world-1-wacky_manor.msav"), "--verify")
        assert code == 0
        assert ": world 1 of a fleet of 2: 2 ticks replayed with the shared gate's recorded admissions; the world hash, and when " in flat(out)

    def test_a_what_if_replays_the_world_alone(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Through a gate of its own, no call waits behind other worlds: the timeouts go."""
        fleet_json(capsys, "--worlds", "6", "--ticks", "3", "--gate-timeout", "12", "--save-dir", str(tmp_path))
        code, out, _ = manor(capsys, "replay", str(tmp_path / "world-5-wacky_manor.msav"), "--gate-size", "5", "--json")
        replayed = json.loads(out)
        assert code == 0
        assert replayed["recorded"]["degraded"] > 0 and replayed["degraded"] == 0
        code, out, _ = manor(capsys, "replay", str(tmp_path / "world-5-wacky_manor.msav"), "--gate-size", "5")
        assert "(world 5 of a fleet of 6, replayed alone, through a gate of its own)" in flat(out)

    def test_admissions_no_gate_could_make_fail_verification(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A save edited to let a waiting call through at the tick's start, beside the
        five its gate already let through: the hash still matches, the time does not."""
        fleet_json(capsys, "--worlds", "3", "--ticks", "2", "--save-dir", str(tmp_path))
        path = tmp_path / "world-2-wacky_manor.msav"

        def let_through_early(index: int, frame: Any) -> Any:
            if index == 1:
                waited = next(call for call in frame["record"]["calls"] if call["admitted_at"] > call["queued_at"])
                waited["admitted_at"] = waited["queued_at"]
            return frame

        path.write_bytes(rewrite_payloads(path.read_bytes(), let_through_early))
        assert verify(capsys, path)["first_mismatch"] == 1
        code, out, _ = manor(capsys, "replay", str(path), "--verify")
        assert code == 1
        assert "in the recording" in flat(out) and "the recorded admissions are not ones this world's gate could make" in flat(out)

    def test_existing_saves_are_kept_unless_forced(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        fleet_json(capsys, "--worlds", "2", "--ticks", "1", "--save-dir", str(tmp_path))
        code, out, err = manor(capsys, "fleet", "--worlds", "2", "--ticks", "1", "--save-dir", str(tmp_path))
        assert (code, out) == (1, "")
        assert err == f"manor: error: {tmp_path / 'world-0-wacky_manor.msav'}: already exists (and 1 more); pass --force to overwrite\n"
        assert fleet_json(capsys, "--worlds", "2", "--ticks", "2", "--save-dir", str(tmp_path), "--force")["worlds"][0]["ticks"] == 2

    def test_the_saved_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = manor(capsys, "fleet", "--worlds", "2", "--ticks", "2", "--json", "--save-dir", str(tmp_path / "new"))
        assert (code, err) == (0, f"manor: saved 2 ticks of 2 worlds to {tmp_path / 'new'}\n")

    def test_a_single_runs_save_has_no_fleet_seat(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert manor(capsys, "run", "--ticks", "1", "--json", "--save", str(tmp_path / "s.msav"))[0] == 0
        header = msgspec.msgpack.decode(frames_of((tmp_path / "s.msav").read_bytes())[0])
        assert header["fleet"] is None
        assert read_save(tmp_path / "s.msav").header.fleet is None


class TestBadInput:
    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["--worlds", "0"], "manor fleet: error: argument --worlds: 0 is not between 1 and 1,000 (see 'manor fleet --help')"),
            (["--worlds", "many"], "manor fleet: error: argument --worlds: 'many' is not a whole number (see 'manor fleet --help')"),
            (["--scenes", "wacky_manor,,tea_party"], "manor fleet: error: argument --scenes: 'wacky_manor,,tea_party' has an empty scene name (see 'manor fleet --help')"),
        ],
    )  # fmt: skip
    def test_bad_flags(self, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
        code, out, err = manor(capsys, "fleet", *argv)
        assert (code, out, err) == (2, "", message + "\n")

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["--scenes", "wacky_manor,nowhere"], "unknown scene 'nowhere' (bundled scenes: reading_of_the_will, tea_party, wacky_manor, werewolf_village; or give a path to a .toml file)"),
            (["--scenes", "tea_party", "--scene", "wacky_manor"], "command line: --scene and --scenes both name the worlds' scenes; give one of them"),
            (["--policy", "legacy"], "command line: run.policy = legacy: a fleet's worlds share one gate, and legacy has none"),
            (["--scenes", "wacky_manor,tea_party"], "the worlds of a fleet share one platform and one gate, but their platform.limit differs"),
            (["--seed", str(2**63 - 1), "--worlds", "2"], "manor fleet, world 1: run.seed: bad value 9223372036854775808"),
        ],
    )  # fmt: skip
    def test_bad_settings(self, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
        code, out, err = manor(capsys, "fleet", "--ticks", "1", *argv)
        assert (code, out) == (1, "")
        assert err.startswith(f"manor: error: {message}") and err.count("\n") == 1

    def test_a_save_dir_that_is_a_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "f").write_text("")
        code, out, err = manor(capsys, "fleet", "--ticks", "1", "--save-dir", str(tmp_path / "f"))
        assert (code, out, err) == (1, "", f"manor: error: {tmp_path / 'f'}: not a directory\n")


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals")
class TestSignals:
    @pytest.mark.parametrize(("signum", "status", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
    @pytest.mark.slow(3)
    def test_a_signal_stops_every_world_and_closes_every_save(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: int, status: int, word: str
    ) -> None:
        """Real clock, ticks of 0.6 s: signalled once every world has saved two ticks,
        the fleet ends in one line; each save is closed and verifies."""
        scene = fixed_latency_scene(tmp_path, 0.2, "slow")
        saves = tmp_path / "saves"
        env = {name: value for name, value in os.environ.items() if not name.startswith("MANOR_")}
        argv = ["fleet", "--worlds", "2", "--scene", str(scene), "--clock", "real", "--ticks", "100000", "--save-dir", str(saves), "--json"]
        process = subprocess.Popen([sys.executable, "-m", "manor", *argv], cwd=tmp_path, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not all(_ticks(saves / f"world-{index}-slow.msav") >= 2 for index in range(2)):
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "the fleet never got under way"
                time.sleep(0.05)
            process.send_signal(signum)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        ticks = sorted({len(read_save(path).ticks) for path in saves.iterdir()})
        done = counted(ticks[0] if len(ticks) == 1 else f"{ticks[0]}-{ticks[-1]}", "tick")
        assert process.returncode == status
        assert err == f"manor: {word} after {done} of 2 worlds; 2 saves in {saves}\n"
        for path in saves.iterdir():
            assert read_save(path).finished
            assert verify(capsys, path)["verified"]
        # The finished ticks' figures, as a whole fleet's, saying it was stopped.
        figures = json.loads(out)
        assert figures["interrupted"] == signal.Signals(signum).name
        saved = [read_save(saves / f"world-{index}-slow.msav").ticks for index in range(2)]
        assert [(world["ticks"], world["calls"]) for world in figures["worlds"]] == [(len(t), sum(len(tick.record.calls) for tick in t)) for t in saved]


def _ticks(path: Path) -> int:
    try:
        return len(read_save(path).ticks)
    except Exception:  # noqa: BLE001 - not there yet, or caught inside its header
        return 0
