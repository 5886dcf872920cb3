"""Crafted saves: good checksums, bad values. A save is input like any other: every value
is checked when it is read, and a bad one is one line naming the file, tick and key."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from manor.cli import main
from manor.errors import SaveError
from manor.saves import decode_save
from deadline import wall_deadline
from saves_fixture import change_edit, record, rewrite_payloads, scene_edit, setting_edit


@pytest.fixture(scope="module")
def good_save(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """Three ticks of the tea party, finished (it ends with an end frame)."""
    path = tmp_path_factory.mktemp("values") / "good.msav"
    record(path, run__scene="tea_party", run__ticks=3)
    return path.read_bytes()


def refused(data: bytes) -> str:
    """The one-line message a crafted save is refused with."""
    with pytest.raises(SaveError) as exc:
        decode_save(data, "x.msav")
    message = str(exc.value)
    assert "\n" not in message and message.startswith("x.msav: ")
    return message


def with_change(data: bytes, tick: int, change: list[Any]) -> bytes:
    """``data`` with a live change recorded in tick ``tick``'s frame."""
    return rewrite_payloads(data, change_edit(tick, change))


def with_setting(data: bytes, key: str, value: Any) -> bytes:
    """``data`` with the recorded setting ``key`` set to ``value``."""
    return rewrite_payloads(data, setting_edit(key, value))


class TestTrailingBytes:
    """Bytes after the end frame are an error named as such, not a 'torn last frame'."""

    @pytest.mark.parametrize("extra", [1, 5, 11, 12, 13, 40])
    def test_bytes_appended_to_a_finished_save_are_refused(self, good_save: bytes, extra: int) -> None:
        message = refused(good_save + b"\x00" * extra)
        assert message == (
            f"x.msav: corrupt: {extra} bytes follow the end frame (from byte {len(good_save)}); a finished save ends with it"
        )

    def test_a_whole_frame_after_the_end_frame_is_refused_too(self, good_save: bytes) -> None:
        frames = rewrite_payloads(good_save, lambda i, f: f)
        assert "bytes follow the end frame" in refused(frames + frames[len(frames) // 2 :])

    def test_replay_verify_exits_1_with_one_line(
        self, good_save: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """It used to pass --verify with exit 0 and a warning about a killed run."""
        path = tmp_path / "appended.msav"
        path.write_bytes(good_save + b"junk")
        assert main(["replay", str(path), "--verify"]) == 1
        err = capsys.readouterr().err
        assert err.splitlines() == [f"manor: error: {path}: corrupt: 4 bytes follow the end frame (from byte {len(good_save)}); a finished save ends with it"]


class TestLiveChanges:
    """Each recorded live change through the schema of its key; its time finite."""

    @pytest.mark.parametrize(
        ("change", "says"),
        [
            (["gate.size", 0, None], "x.msav: tick 2: live change gate.size: bad value 0: Expected `int` >= 1"),
            (["gate.size", None, None], "x.msav: tick 2: live change gate.size: bad value None"),
            (["gate.size", 10**9, None], "x.msav: tick 2: live change gate.size: bad value 1000000000: Expected `int` <= 100000"),
            (["run.policy", "bogus", None], "x.msav: tick 2: live change run.policy: bad value 'bogus': Invalid enum value 'bogus'"),
            (["run.batch_size", "3", None], "x.msav: tick 2: live change run.batch_size: bad value '3': Expected `int`, got `str`"),
            (["gate.size", 3, math.nan], "x.msav: tick 2: live change gate.size: its time nan is not finite"),
            (["gate.size", 3, math.inf], "x.msav: tick 2: live change gate.size: its time inf is not finite"),
            (["gate.rate", 3.0, None], "x.msav: tick 2: live change of 'gate.rate', which is no setting that changes live"),
        ],
    )
    def test_a_bad_live_change_is_named_with_its_tick_and_key(self, good_save: bytes, change: list[Any], says: str) -> None:
        assert refused(with_change(good_save, 2, change)).startswith(says)

    def test_a_good_live_change_is_read(self, good_save: bytes) -> None:
        save = decode_save(with_change(good_save, 2, ["gate.size", 3, None]), "x.msav")
        assert save.ticks[1].changes[0].value == 3

    def test_replay_verify_refuses_instead_of_dropping_the_change(
        self, good_save: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A gate.size 0 change used to print a traceback, be dropped, and --verify said 'matches'."""
        path = tmp_path / "crafted.msav"
        path.write_bytes(with_change(good_save, 2, ["gate.size", 0, None]))
        assert main(["replay", str(path), "--verify"]) == 1
        captured = capsys.readouterr()
        assert captured.err.splitlines() == [f"manor: error: {path}: tick 2: live change gate.size: bad value 0: Expected `int` >= 1"]
        assert "Traceback" not in captured.out + captured.err


class TestRecordedValues:
    """The recorded settings through the settings schema, the scene through the content schema."""

    @pytest.mark.parametrize(
        ("key", "value", "says"),
        [
            ("gate.rate", math.inf, "x.msav: recorded setting gate.rate: bad value inf: Expected `float` <= 1000000.0"),
            ("run.tick_interval_s", math.inf, "x.msav: recorded setting run.tick_interval_s: bad value inf"),
            ("run.ticks", -1, "x.msav: recorded setting run.ticks: bad value -1: Expected `int` >= 0"),
            ("run.policy", "bogus", "x.msav: recorded setting run.policy: bad value 'bogus'"),
            ("gate.size", 0, "x.msav: recorded setting gate.size: bad value 0"),
        ],
    )
    def test_a_recorded_setting_out_of_bounds_is_refused(self, good_save: bytes, key: str, value: Any, says: str) -> None:
        """A recorded rate or interval of inf used to hang the replay."""
        assert refused(with_setting(good_save, key, value)).startswith(says)

    @pytest.mark.parametrize(
        ("path", "value", "says"),
        [
            (("spec", "world_keys", "beats", "prompts"), [], "the saved scene: its world's keys: Expected `array` of length >= 1 - at `$.beats.prompts`"),
            (("spec", "world_keys", "beats", "per_tick"), 10**6, "its world's keys: Expected `int` <= 1000 - at `$.beats.per_tick`"),
            (("spec", "world_keys", "rooms"), "hall", "its world's keys: Expected `array`, got `str` - at `$.rooms`"),
            (("spec", "world_keys", "narrator"), "nobody", "the narrator 'nobody' it names is not in the saved scene"),
            (("spec", "world"), "werewolf", "its world's keys: Object contains unknown field `beats`"),
            (("characters", "hobbes", "sim", "latency_s"), math.nan, "$.scene.characters[...].sim.latency_s"),
            (("characters", "hobbes", "sim", "lines"), ["{butler}"], "unknown placeholder {butler}"),
            (("spec", "world_keys", "beats", "speakers"), ["nobody"], "beat speaker 'nobody' is not in the cast"),
        ],
    )
    def test_a_bad_scene_value_is_refused(self, good_save: bytes, path: tuple[str, ...], value: Any, says: str) -> None:
        message = refused(rewrite_payloads(good_save, scene_edit(path, value)))
        assert says in message

    def test_a_recorded_hang_never_reaches_the_replay(self, good_save: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "hang.msav"
        path.write_bytes(with_setting(good_save, "run.tick_interval_s", math.inf))
        with wall_deadline(20):
            assert main(["replay", str(path), "--verify"]) == 1
        assert capsys.readouterr().err.count("\n") == 1
