"""Save files: framing, writing, reading, and every kind of bad file ending in one line."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import msgspec
import pytest
from saves_fixture import EXAMPLES, FORMAT_1, frames_of, record, reframe, rewrite_payloads

import manor.saves as saves
from manor.cli import main
from manor.errors import SaveError
from manor.replay import recorded_summary
from manor.saves import (
    FORMAT_VERSION,
    EndFrame,
    SaveWriter,
    TickFrame,
    decode_save,
    read_save,
)
from manor.saves.format import HeaderV4, probe_version
from manor.saves.framing import (
    HEAD_SIZE,
    SIGNATURE,
    CorruptFrame,
    FrameReader,
    encode_frame,
    write_frame,
)
from manor.worlds.manor import CALLERS as MANOR_CALLERS
from manor.worlds.manor import ManorWorld as World


@pytest.fixture(scope="module")
def legacy_save(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A legacy run on a platform of 3: character calls rejected, retried, some idle."""
    path = tmp_path_factory.mktemp("saves") / "legacy.msav"
    summary, _ = record(path, run__policy="legacy", platform__limit=3, run__batch_size=4, run__ticks=12)
    return path, summary


def as_format_3(header: dict) -> dict:
    """A format-4 header (plain data) as format 3 wrote it: the world's keys among the
    scene's own, the agents they name as (id, agent) pairs."""
    scene = header["scene"]
    spec = dict(scene["spec"])
    keys = spec.pop("world_keys")
    others = scene["others"]
    old_scene = {
        "spec": {**spec, **keys},
        "path": scene["path"],
        "characters": scene["characters"],
        "narrator": [keys["narrator"], others[keys["narrator"]]],
        "summariser": [keys["summariser"], others[keys["summariser"]]],
    }
    return {**header, "format": 3, "scene": old_scene}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class TestFraming:
    """Length + checksums per frame: torn tails are told apart from corruption."""

    def test_frames_round_trip(self) -> None:
        """Every payload comes back, in order, and nothing is torn."""
        payloads = [b"", b"a", b"hello" * 100]
        reader = FrameReader(reframe(payloads))
        assert list(reader) == payloads
        assert reader.torn is None

    def test_write_frame_writes_one_frame_and_flushes(self) -> None:
        """The size returned is the head plus the payload; the bytes are those of encode_frame."""
        file = io.BytesIO()
        assert write_frame(file, b"xyz") == HEAD_SIZE + 3
        assert file.getvalue() == encode_frame(b"xyz")

    @pytest.mark.parametrize("cut", [1, HEAD_SIZE - 1, HEAD_SIZE, HEAD_SIZE + 4])
    def test_a_file_ending_inside_the_last_frame_is_torn(self, cut: int) -> None:
        """Cut anywhere inside the last frame: the whole frames before it are kept."""
        data = reframe([b"first", b"second", b"third-frame"])
        last = len(encode_frame(b"third-frame"))
        reader = FrameReader(data[: len(data) - last + cut])
        assert list(reader) == [b"first", b"second"]
        assert reader.torn is not None and reader.torn.index == 2

    def test_a_damaged_length_is_corruption_not_a_torn_tail(self) -> None:
        """The head checks itself: a flipped length bit is caught, not read as a tail."""
        data = bytearray(reframe([b"first", b"second"]))
        data[len(SIGNATURE) + 1] ^= 0x40  # the first frame's length
        with pytest.raises(CorruptFrame, match="frame 0 .* head"):
            list(FrameReader(bytes(data)))

    def test_a_damaged_payload_is_corruption(self) -> None:
        data = bytearray(reframe([b"first", b"second"]))
        data[-1] ^= 0x01
        with pytest.raises(CorruptFrame, match="frame 1 .* payload"):
            list(FrameReader(bytes(data)))


class TestWriting:
    """SaveWriter: a header, a frame per tick, an end frame; never overwrites unasked."""

    def test_a_save_holds_the_run(self, legacy_save: tuple[Path, dict]) -> None:
        """Header, every tick in order with the world hash after it, and the end frame."""
        path, summary = legacy_save
        save = read_save(path)
        header = save.header
        assert isinstance(header, HeaderV4)
        assert (header.world_name, header.world_version, header.world_callers) == ("manor", "1", tuple(MANOR_CALLERS))
        assert header.scene.spec.name == "The Wacky Manor"
        assert header.seed == 1789
        assert header.world.hash == World.from_scene(header.scene, random.Random(0)).hash
        settings = {row.key: (row.value, row.origin) for row in header.settings}
        assert settings["run.policy"] == ("legacy", "command line")
        assert settings["gate.size"] == (2, "derived: platform.limit - 1")
        assert [frame.record.tick for frame in save.ticks] == list(range(1, 13))
        assert save.finished and not save.warnings
        assert save.ticks[-1].record.world_hash == summary["world_hash"]

    def test_calls_keep_their_text_tokens_and_times(self, legacy_save: tuple[Path, dict]) -> None:
        """An ok call keeps its response text and tokens; every call its times."""
        save = read_save(legacy_save[0])
        calls = [call for frame in save.ticks for call in frame.record.calls]
        ok = [call for call in calls if call.ok]
        assert ok and all(call.text and call.output_tokens > 0 and call.input_tokens > 0 for call in ok)
        assert all(call.queued_at <= call.finished_at for call in calls)

    def test_retried_attempts_are_kept_as_superseded(self, legacy_save: tuple[Path, dict]) -> None:
        """The legacy policy's rejected tries are in the save, so its rejections add up."""
        path, summary = legacy_save
        save = read_save(path)
        superseded = [call for frame in save.ticks for call in frame.superseded]
        assert superseded, "this run is meant to retry rejected character calls"
        assert all(call.reason == "platform_rejected" and call.caller == "character" for call in superseded)
        retried = {(c.tick, c.agent) for c in superseded}
        finals = {(c.tick, c.agent): c.attempts for f in save.ticks for c in f.record.calls if c.caller == "character"}
        assert all(finals[key] >= 2 for key in retried)

    def test_the_recorded_figures_are_the_run_figures(self, legacy_save: tuple[Path, dict]) -> None:
        """Figures computed from the save alone equal what the run itself reported."""
        path, summary = legacy_save
        rejections = summary["platform_rejections"]
        assert rejections["total"] == summary["degraded"] > 0 and rejections["retried"] > 0  # retries were rejected too
        assert recorded_summary(read_save(path)) == summary

    def test_an_existing_file_is_not_overwritten(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --force the run refuses before it starts; with it, the file is replaced."""
        path = tmp_path / "run.msav"
        path.write_bytes(b"precious")
        code, out, err = cli(capsys, "run", "--ticks", "2", "--json", "--save", str(path))
        assert code == 1 and out == ""
        assert err == f"manor: error: {path}: already exists; pass --force to overwrite it\n"
        assert path.read_bytes() == b"precious"
        code, out, err = cli(capsys, "run", "--ticks", "2", "--json", "--save", str(path), "--force")
        assert code == 0
        assert len(read_save(path).ticks) == 2 == json.loads(out)["ticks"]

    def test_a_save_in_a_missing_folder_is_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "nowhere" / "run.msav"
        code, out, err = cli(capsys, "run", "--ticks", "2", "--save", str(path))
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and str(path) in err and "cannot create" in err

    def test_a_failed_write_is_reported_after_the_run(self, tmp_path: Path) -> None:
        """A write error does not crash the run; check() names the file and the tick count."""
        path = tmp_path / "run.msav"
        _, engine = record(path, run__ticks=1)

        class Full(io.BytesIO):
            def write(self, data: bytes) -> int:  # type: ignore[override]
                raise OSError(28, "No space left on device")

        writer = SaveWriter(path, Full())
        writer.tick_finished(read_save(path).ticks[0].record, ())
        with pytest.raises(SaveError, match=r"run.msav: writing failed after 0 ticks: No space left on device"):
            writer.check()
        assert writer.ticks == 0


class TestVersions:
    """The header is a tagged union on its format version."""

    def test_the_header_says_its_version(self, legacy_save: tuple[Path, dict]) -> None:
        header = frames_of(legacy_save[0].read_bytes())[0]
        assert probe_version(header) == FORMAT_VERSION == 4
        assert msgspec.msgpack.decode(header)["format"] == 4

    def test_frames_are_tagged_by_kind(self, legacy_save: tuple[Path, dict]) -> None:
        frames = frames_of(legacy_save[0].read_bytes())
        assert [msgspec.msgpack.decode(f)["kind"] for f in frames[1:]] == ["tick"] * 12 + ["end"]

    def test_a_newer_version_is_refused_by_name(self, legacy_save: tuple[Path, dict]) -> None:
        newer = rewrite_payloads(legacy_save[0].read_bytes(), lambda i, d: {**d, "format": 5} if i == 0 else d)
        with pytest.raises(SaveError, match=r"^x.msav: save format 5 is newer than this Manor .* reads \(format 4 and older\); upgrade Manor"):
            decode_save(newer, "x.msav")

    def test_an_unknown_older_version_is_refused(self, legacy_save: tuple[Path, dict]) -> None:
        older = rewrite_payloads(legacy_save[0].read_bytes(), lambda i, d: {**d, "format": 0} if i == 0 else d)
        with pytest.raises(SaveError, match=r"^x.msav: corrupt: unknown save format 0$"):
            decode_save(older, "x.msav")

    def test_the_header_keeps_the_runs_id(self, tmp_path: Path) -> None:
        """The id the run sent its servers (an Agno session is per run) is in the save;
        two runs of one scene and seed have two ids, and the same world."""
        (first, engine), (second, _) = (record(tmp_path / f"{i}.msav", run__ticks=2) for i in range(2))
        ids = [read_save(tmp_path / f"{i}.msav").header.run_id for i in range(2)]
        assert ids[0] == engine.run_id and ids[0] != ids[1] and all(len(i) == 32 for i in ids)
        assert first["world_hash"] == second["world_hash"]

    def test_a_format_1_save_is_upgraded_its_refusals_the_limiters(self) -> None:
        """The examples as first shipped are format 1: read as the current format, every refusal
        is the limiter's (format 1 could not tell a server's 429 apart), no message is
        known, and the world is the manor's (the only one format 1 could play)."""
        example = FORMAT_1 / "wacky_manor_legacy.msav"
        assert probe_version(frames_of(example.read_bytes())[0]) == 1
        save = read_save(example)
        assert isinstance(save.header, HeaderV4) and save.header.run_id == ""
        assert (save.header.world_name, save.header.world_version, save.header.world_callers) == ("manor", "1", tuple(MANOR_CALLERS))
        refused = [call for frame in save.ticks for call in frame.record.calls if call.reason == "platform_rejected"]
        assert len(refused) == 20 and {call.refused_by for call in refused} == {"limiter"}
        assert {call.error for frame in save.ticks for call in frame.record.calls} == {""}

    @pytest.mark.parametrize("name", EXAMPLES)
    def test_a_save_of_the_old_simulators_words_still_verifies(self, name: str) -> None:
        """The examples as first shipped hold the words of a simulator since reworded
        (a summary that echoed its instruction, rooms not the scene's): a replay answers
        from the record, so they still replay and verify."""
        assert main(["replay", str(FORMAT_1 / name), "--verify"]) == 0

    @pytest.mark.parametrize("scene", ["tea_party", "werewolf_village"])
    def test_a_format_3_save_is_upgraded_its_scene_the_same(self, tmp_path: Path, scene: str) -> None:
        """A format-3 header held the scene of its time: the manor's rooms, narrator,
        summariser and beats among every scene's keys, the narrator and summariser apart.
        Read now, it is the scene this Manor loads from the same file — the world's keys
        in ``world_keys`` (Werewolf's without beats, which it never played) — and the run
        replays and verifies."""
        path = tmp_path / "new.msav"
        record(path, run__scene=scene, run__ticks=3)
        old = tmp_path / "old.msav"
        old.write_bytes(rewrite_payloads(path.read_bytes(), lambda i, d: as_format_3(d) if i == 0 else d))
        assert probe_version(frames_of(old.read_bytes())[0]) == 3
        upgraded, current = read_save(old), read_save(path)
        assert isinstance(upgraded.header, HeaderV4)
        assert upgraded.header.scene == current.header.scene
        assert main(["replay", str(old), "--verify"]) == 0

    def test_the_package_exports_what_it_claims(self) -> None:
        assert all(hasattr(saves, name) for name in saves.__all__)
        assert {EndFrame, TickFrame} <= {getattr(saves, name) for name in saves.__all__}


class TestTornSaves:
    """A run killed mid-write: whole ticks kept, the torn one dropped with a warning."""

    def test_a_torn_last_frame_is_dropped_with_a_warning(self, legacy_save: tuple[Path, dict]) -> None:
        data = legacy_save[0].read_bytes()
        end = len(encode_frame(frames_of(data)[-1]))
        last_tick = len(encode_frame(frames_of(data)[-2]))
        torn = data[: len(data) - end - last_tick // 2]
        save = decode_save(torn, "x.msav")
        assert len(save.ticks) == 11 and not save.finished
        [warning] = save.warnings
        assert warning.startswith("x.msav: the last frame (from byte ") and "keeping the 11 whole ticks" in warning

    def test_a_run_without_an_end_frame_is_not_finished(self, legacy_save: tuple[Path, dict]) -> None:
        """Killed between two frames: nothing torn, nothing to warn about, not finished."""
        data = legacy_save[0].read_bytes()
        save = decode_save(data[: len(data) - len(encode_frame(frames_of(data)[-1]))], "x.msav")
        assert len(save.ticks) == 12 and not save.finished and not save.warnings


BAD_FILES = {
    "empty": (lambda data: b"", "empty file, not a Manor save"),
    "not a save": (lambda data: b"[run]\nticks = 3\n", "not a Manor save file (it does not start with the save signature)"),
    "cut in the signature": (lambda data: data[:4], "truncated: the file ends inside the save signature"),
    "cut in the header": (lambda data: data[: len(SIGNATURE) + 200], "truncated: the file ends inside its header"),
    "only the signature": (lambda data: SIGNATURE, "truncated: the file holds no header"),
    "flipped byte": (lambda data: data[:5000] + bytes([data[5000] ^ 0xFF]) + data[5001:], "corrupt: frame"),
    "newer version": (
        lambda data: rewrite_payloads(data, lambda i, d: {**d, "format": 7} if i == 0 else d),
        "save format 7 is newer than this Manor",
    ),
    "a header that is not one": (lambda data: reframe([msgspec.msgpack.encode([1, 2, 3])]), "not a Manor save: its first frame is not a save header"),
    "ticks out of order": (
        lambda data: reframe([frames_of(data)[0], frames_of(data)[2]]),
        "corrupt: frame 1 holds tick 2, expected tick 1",
    ),
}


class TestBadInput:
    """Each kind of bad file: one line naming the file, exit 1, no traceback, nothing written."""

    @pytest.mark.parametrize("command", ["replay", "verify", "trace"])
    @pytest.mark.parametrize("kind", sorted(BAD_FILES))
    def test_bad_files(self, kind: str, command: str, legacy_save: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        make, message = BAD_FILES[kind]
        path = tmp_path / "bad.msav"
        path.write_bytes(make(legacy_save[0].read_bytes()))
        trace = tmp_path / "out.json"
        argv = {"replay": ["replay", str(path)], "verify": ["replay", str(path), "--verify", "--json"], "trace": ["trace", str(path), "-o", str(trace)]}
        code, out, err = cli(capsys, *argv[command])
        assert code == 1
        assert out == ""
        assert err.startswith(f"manor: error: {path}: ") and message in err
        assert err.count("\n") == 1, err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.msav"]

    @pytest.mark.parametrize("command", [["replay", "--verify"], ["trace", "-o", "out.json"]])
    def test_a_missing_file(self, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        code, out, err = cli(capsys, command[0], "gone.msav", *command[1:])
        assert (code, out, err) == (1, "", "manor: error: gone.msav: no such save file\n")
        assert list(tmp_path.iterdir()) == []

    def test_a_directory(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, err = cli(capsys, "replay", str(tmp_path))
        assert (code, out, err) == (1, "", f"manor: error: {tmp_path}: is a directory, not a save file\n")

    def test_a_save_without_a_whole_tick(self, legacy_save: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Killed during its first tick: readable, but there is nothing to replay."""
        path = tmp_path / "early.msav"
        path.write_bytes(reframe(frames_of(legacy_save[0].read_bytes())[:1]))
        code, out, err = cli(capsys, "replay", str(path), "--verify")
        assert (code, out) == (1, "")
        assert err == f"manor: error: {path}: holds no whole tick (the run ended during its first tick)\n"
