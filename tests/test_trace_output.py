"""``manor trace -o FILE``: where the trace goes, and one line for every file it cannot write."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest
from saves_fixture import SAVES

from manor.cli import main
from manor.output_file import write_output

SAVE = SAVES / "wacky_manor_pipeline.msav"


@pytest.fixture(autouse=True)
def _renames_only_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rename outside tmp_path fails the test instead of happening: run as root, the
    old temp-file-and-rename turned /dev/null into a regular file, and a regression must
    not do that to the machine running the tests."""
    real_replace, real_rename = os.replace, os.rename

    def guarded(real):  # type: ignore[no-untyped-def]
        def rename(source: str | os.PathLike[str], target: str | os.PathLike[str], **kwargs: object) -> None:
            for path in (source, target):
                if not os.path.abspath(path).startswith(str(tmp_path) + os.sep):
                    raise AssertionError(f"renamed outside tmp_path: {path}")
            real(source, target, **kwargs)

        return rename

    monkeypatch.setattr(os, "replace", guarded(real_replace))
    monkeypatch.setattr(os, "rename", guarded(real_rename))


def _trace(capsys: pytest.CaptureFixture[str], output: str, save: Path = SAVE) -> tuple[int, str, str]:
    try:
        code = main(["trace", str(save), "-o", output])
    except SystemExit as exit:  # argparse's refusal
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _is_trace(path: Path) -> bool:
    return "traceEvents" in json.loads(path.read_text(encoding="utf-8"))


class TestWhereItGoes:
    def test_a_symlink_is_written_through_and_stays_a_link(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """The file the link points to is replaced (in its own directory); the link stays."""
        (tmp_path / "elsewhere").mkdir()
        target = tmp_path / "elsewhere" / "trace.json"
        target.write_text("old", encoding="utf-8")
        link = tmp_path / "link.json"
        link.symlink_to(target)
        assert _trace(capsys, str(link))[0] == 0
        assert link.is_symlink() and os.readlink(link) == str(target)
        assert _is_trace(target)
        assert sorted(p.name for p in tmp_path.rglob("*")) == ["elsewhere", "link.json", "trace.json"]

    def test_a_dangling_symlink_creates_its_target(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        link = tmp_path / "link.json"
        link.symlink_to("new.json")
        assert _trace(capsys, str(link))[0] == 0
        assert link.is_symlink() and _is_trace(tmp_path / "new.json")

    def test_a_replaced_file_keeps_its_permissions(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        path = tmp_path / "trace.json"
        path.write_text("old", encoding="utf-8")
        path.chmod(0o640)
        assert _trace(capsys, str(path))[0] == 0
        assert _is_trace(path) and stat.S_IMODE(path.stat().st_mode) == 0o640
        assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]

    def test_dev_null_is_written_to_not_replaced(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A device is opened and written, never renamed over (as root that replaced it)."""
        before = os.stat("/dev/null")
        code, out, err = _trace(capsys, "/dev/null")
        assert (code, err) == (0, "")
        assert out.startswith("/dev/null: 928 trace events")
        after = os.stat("/dev/null")
        assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


class TestOneLine:
    def test_dev_full_is_one_line_and_stays_a_device(self, capsys: pytest.CaptureFixture[str]) -> None:
        before = os.stat("/dev/full")
        assert _trace(capsys, "/dev/full") == (1, "", "manor: error: /dev/full: cannot write the trace: No space left on device\n")
        after = os.stat("/dev/full")
        assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)

    def test_an_empty_name(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = _trace(capsys, "")
        assert (code, err) == (2, "manor trace: error: argument -o/--output: an empty file name (see 'manor trace --help')\n")

    def test_a_name_too_long(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        name = str(tmp_path / ("t" * 300))
        assert _trace(capsys, name) == (1, "", f"manor: error: {name}: cannot write the trace: File name too long\n")
        assert list(tmp_path.iterdir()) == []

    def test_a_name_as_long_as_allowed_leaves_no_room_for_a_suffix_and_needs_none(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        path = tmp_path / ("t" * 255)
        assert _trace(capsys, str(path))[0] == 0
        assert [p.name for p in tmp_path.iterdir()] == [path.name]

    def test_a_missing_directory(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        name = str(tmp_path / "nowhere" / "t.json")
        assert _trace(capsys, name) == (1, "", f"manor: error: {name}: cannot write the trace: no directory {tmp_path / 'nowhere'}\n")

    def test_a_directory(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        assert _trace(capsys, str(tmp_path)) == (1, "", f"manor: error: {tmp_path}: cannot write the trace: is a directory\n")

    def test_permission_denied_leaves_nothing_behind(self, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """(Simulated at the rename: the tests may run as root, for whom modes do not deny.)"""

        def refuse(source: object, target: object) -> None:
            raise PermissionError(errno.EACCES, "Permission denied")

        monkeypatch.setattr(os, "replace", refuse)
        name = str(tmp_path / "t.json")
        assert _trace(capsys, name) == (1, "", f"manor: error: {name}: cannot write the trace: Permission denied\n")
        assert list(tmp_path.iterdir()) == []

    def test_the_save_itself(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        copy = tmp_path / "s.msav"
        copy.write_bytes(SAVE.read_bytes())
        assert _trace(capsys, str(copy), save=copy) == (1, "", f"manor: error: {copy}: is the save being exported ({copy}); name another file\n")
        assert copy.read_bytes() == SAVE.read_bytes()


class TestWriteOutput:
    def test_a_read_only_file_is_refused_not_renamed_over(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Writing to it would fail, so replacing it does too (os.access: root may write anything)."""
        path = tmp_path / "t.json"
        path.write_text("old", encoding="utf-8")
        monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
        with pytest.raises(PermissionError):
            write_output(path, "new")
        assert path.read_text(encoding="utf-8") == "old"
