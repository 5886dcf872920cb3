"""Whatever stops a command ends in one line: an error inside an exception group, a bug
in Manor (its traceback behind --debug or MANOR_DEBUG=1), a stdout nobody reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from manor.cli import config_cmd, main
from manor.errors import ConfigError


def _fail_in_a_nursery(*errors: Exception) -> object:
    """A command handler whose trio run fails with ``errors``, raised by tasks of a nursery."""

    def handler(args: object) -> int:
        async def fail(error: Exception) -> None:
            raise error

        async def run() -> None:
            async with trio.open_nursery() as nursery:
                for error in errors:
                    nursery.start_soon(fail, error)

        trio.run(run)
        return 0

    return handler


@pytest.fixture
def failing_config(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """``manor config``, its handler replaced (set per test with ``setattr``)."""
    monkeypatch.delenv("MANOR_DEBUG", raising=False)
    return monkeypatch


class TestExceptionGroups:
    def test_a_manor_error_in_a_group_is_its_own_line(self, failing_config: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        failing_config.setattr(config_cmd, "run", _fail_in_a_nursery(ConfigError("manor.toml: [backends.x] api_key_env: KEY is not set")))
        assert main(["config"]) == 1
        assert capsys.readouterr().err == "manor: error: manor.toml: [backends.x] api_key_env: KEY is not set\n"

    def test_many_errors_are_still_one_line(self, failing_config: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        errors = [ConfigError("first"), ConfigError("second"), ConfigError("third")]
        failing_config.setattr(config_cmd, "run", _fail_in_a_nursery(*errors))
        assert main(["config"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.endswith(" (and 2 more errors)\n") and err.startswith("manor: error: ")

    def test_a_bug_is_an_internal_error_in_one_line(self, failing_config: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        failing_config.setattr(config_cmd, "run", _fail_in_a_nursery(ValueError("boom\nand more")))
        assert main(["config"]) == 1
        assert capsys.readouterr().err == "manor: internal error: ValueError: boom\\nand more (run with --debug for the traceback)\n"

    def test_a_bug_outside_any_group_too(self, failing_config: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        def handler(args: object) -> int:
            return {}["missing"]  # type: ignore[no-any-return]

        failing_config.setattr(config_cmd, "run", handler)
        assert main(["config"]) == 1
        assert capsys.readouterr().err == "manor: internal error: KeyError: 'missing' (run with --debug for the traceback)\n"


class TestDebug:
    @pytest.mark.parametrize("how", ["flag", "environment"])
    def test_the_traceback_is_shown_with_debug(
        self, failing_config: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
    ) -> None:
        failing_config.setattr(config_cmd, "run", _fail_in_a_nursery(ValueError("boom")))
        if how == "environment":
            failing_config.setenv("MANOR_DEBUG", "1")
        assert main(["--debug", "config"] if how == "flag" else ["config"]) == 1
        err = capsys.readouterr().err
        assert "Traceback" in err and "raise error" in err
        assert err.splitlines()[-1] == "manor: internal error: ValueError: boom"

    def test_manor_debug_is_not_taken_for_a_setting(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("MANOR_DEBUG", "1")
        assert main(["config", "--json"]) == 0
        assert capsys.readouterr().err == ""


class TestClosedStdout:
    """``manor ... | head``: the reader has gone before the command writes; it ends
    quietly with exit 0, as ruff does."""

    @pytest.mark.parametrize(
        "argv",
        [
            pytest.param(["experiment", "bounded-wait", "--json"], id="print"),
            pytest.param(["config", "--json"], id="config-json"),
            pytest.param(["config"], id="rich-table"),
            pytest.param(["run", "--ticks", "1"], id="run"),
        ],
    )
    def test_a_closed_stdout_ends_quietly(self, tmp_path: Path, argv: list[str]) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "manor", *argv], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # as `head` does once it has read enough
        err = process.stderr.read()
        assert (process.wait(timeout=60), err) == (0, "")


class TestSaveToStandardOutput:
    """``--save -`` made a file named ``-`` in the working directory: a save is written as
    the run goes and its header rewritten at its end, which standard output cannot take."""

    @pytest.mark.parametrize("command", ["run", "play"])
    def test_is_refused_in_one_line_and_writes_nothing(
        self, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        with pytest.raises(SystemExit) as stopped:
            main([command, "--save", "-", "--ticks", "1"])
        assert stopped.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "a save cannot go to standard output" in err[0], err
        assert list(tmp_path.iterdir()) == []
