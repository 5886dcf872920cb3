"""What ``--help`` and ``--version`` say: every setting flag's default, and choices that
the parser accepts as the help spells them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from manor.cli import COMMANDS, build_parser, main
from manor.cli.options import SETTING_FLAGS
from manor.config import standard_sources
from manor.experiment.bounded_wait import HANG_CHOICES
from manor.fleet.processes import PART_COMMAND
from manor.run.engine import configure
from manor.version import engine_version

# No manor.toml from the working directory, no MANOR_* from the environment.
pytestmark = pytest.mark.usefixtures("isolated")


def _help(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *command: str) -> str:
    """The help of ``command``, on one line per option (no wrapping)."""
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as exit:
        main([*command, "--help"])
    assert exit.value.code == 0
    return capsys.readouterr().out


def _option_help(text: str, flag: str) -> str:
    """The help of ``flag``, joined into one line (its own line and the indented ones after)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"\s+{re.escape(flag)}\b", line))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("   ") or line.lstrip().startswith("-"):
            break
        block.append(line)
    return " ".join(" ".join(block).split())


class TestVersion:
    def test_version_prints_manor_and_the_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exit:
            main(["--version"])
        assert exit.value.code == 0
        assert capsys.readouterr().out == f"manor {engine_version()}\n"
        assert engine_version() != "unknown"  # installed: the tests run an installed Manor

    def test_as_a_process(self) -> None:
        done = subprocess.run([sys.executable, "-m", "manor", "--version"], capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"manor {engine_version()}\n", "")


class TestDefaultsInHelp:
    @pytest.mark.parametrize("command", ["run", "play", "config"])
    def test_every_setting_flag_shows_its_default(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str) -> None:
        text = _help(capsys, monkeypatch, command)
        for flag in SETTING_FLAGS.values():
            assert "(default: " in _option_help(text, flag.flag), flag.flag
        assert "(default: $MANOR_CONFIG, else ./manor.toml if there is one)" in _option_help(text, "--config")

    def test_run_shows_the_built_in_values(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        text = _help(capsys, monkeypatch, "run")
        assert _option_help(text, "--ticks") == "--ticks TICKS number of ticks to run (default: 20)"
        assert _option_help(text, "--gate-timeout") == "--gate-timeout TIMEOUT longest wait at the gate, seconds (default: 30.0)"
        assert _option_help(text, "--policy").endswith("(default: pipeline)")
        assert _option_help(text, "--gate-size").endswith("(default: platform limit - 1, at least 1; 8 when the platform is unlimited)")

    def test_the_shown_defaults_are_the_ones_a_run_uses(self) -> None:
        """A built-in default shown is the value used with nothing set; a key whose value
        comes from elsewhere (the scene, a derivation) or is unset says how instead."""
        config, _ = configure(standard_sources(environ={}))
        for key, flag in SETTING_FLAGS.items():
            if config.origins[key] == "built-in defaults" and config.value(key) is not None:
                assert flag.derived is None and flag.default_help() == f"(default: {config.value(key)})", key
            else:
                assert flag.derived is not None, f"{key} is {config.value(key)!r} from {config.origins[key]}; its help must say how"

    def test_play_runs_until_quit_and_replay_as_recorded(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        assert _option_help(_help(capsys, monkeypatch, "play"), "--ticks").endswith("(default: until you quit)")
        text = _help(capsys, monkeypatch, "replay")
        assert _option_help(text, "--policy").endswith("(default: as recorded)")
        assert "derived again from --platform-limit" in _option_help(text, "--gate-size")


class TestFileArguments:
    """The commands that read a save and write a file (``manor.cli.file_names``) say so alike."""

    @pytest.mark.parametrize("command", ["replay", "story", "trace"])
    def test_save_names_the_commands_that_write_one(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str) -> None:
        assert _option_help(_help(capsys, monkeypatch, command), "SAVE") == "SAVE the save file (from 'manor run --save' or 'manor play')"

    @pytest.mark.parametrize(("command", "what"), [("story", "write here instead of stdout"), ("trace", "the trace file to write")])
    def test_output_says_how_the_file_is_written(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str, what: str) -> None:
        text = _option_help(_help(capsys, monkeypatch, command), "-o")
        assert text == f"-o FILE, --output FILE {what} (replaced if it exists; a symbolic link is written through; - for stdout)"

    def test_only_the_trace_must_name_its_file(self) -> None:
        assert build_parser(["story"]).parse_args(["story", "x.msav"]).output is None
        with pytest.raises(SystemExit) as exit:
            build_parser(["trace"]).parse_args(["trace", "x.msav"])
        assert exit.value.code == 2


class TestHangs:
    def test_the_help_lists_each_spelling_once_and_the_parser_takes_each(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        text = _help(capsys, monkeypatch, "experiment", "bounded-wait")
        assert "--hangs 4,8|4|none" in text and "{4,8,4,none}" not in text
        parser = build_parser(["experiment"])
        for spelling, hangs in HANG_CHOICES.items():
            assert HANG_CHOICES[parser.parse_args(["experiment", "bounded-wait", "--hangs", spelling]).hangs] == hangs

    def test_a_set_the_design_does_not_have_is_refused_naming_the_ones_it_does(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exit:
            main(["experiment", "bounded-wait", "--hangs", "8"])
        assert exit.value.code == 2
        assert "invalid choice: '8' (choose from '4,8', '4', 'none')" in capsys.readouterr().err


def _modules_after(argv: list[str]) -> list[str]:
    """The modules a fresh ``manor ARGV`` has imported when its command ends, listed on
    stderr by the process itself (its stdout is the command's)."""
    script = (
        "import json, sys\n"
        "from manor.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.splitlines()[-1])


def _of(modules: list[str], *packages: str) -> list[str]:
    return [name for name in modules if name.split(".")[0] in packages or name.startswith(tuple(f"{p}." for p in packages))]


class TestStartUp:
    """A command imports what it uses: the others' modules, and the engine for a help
    screen, stay unloaded (what makes ``manor --help`` quick)."""

    def test_the_command_list_imports_no_command_and_no_engine(self) -> None:
        modules = _modules_after(["--help"])
        assert _of(modules, "trio", "rich", "textual", "coredis", "httpx", "manor.run.engine") == []
        assert [name for name in modules if name.endswith("_cmd")] == []

    def test_the_version_loads_no_engine(self) -> None:
        """``manor --version`` reads the installed version: no engine, no save code."""
        modules = _modules_after(["--version"])
        assert "manor.version" in modules
        assert _of(modules, "trio", "rich", "manor.saves", "manor.tick", "manor.run.engine") == []

    def test_a_run_loads_no_dashboard_no_redis_client_and_no_bench(self) -> None:
        modules = _modules_after(["run", "--ticks", "1", "--json"])
        assert "manor.tick.loop" in modules  # it did run
        assert _of(modules, "textual", "coredis", "manor.bench", "manor.play") == []
        assert [name for name in modules if name.endswith("_cmd")] == ["manor.cli.run_cmd"]
        # Nor, on the simulator, the HTTP client, nor pytest (trio.testing imports it
        # where it is installed: some 85 ms of every start).
        assert _of(modules, "httpx", "pytest", "_pytest", "trio.testing") == []
        # Nor, without --save and off a terminal (a script's run, a test's), the save
        # code or Rich's progress bar: some 7 % of a run's start-up instructions.
        assert _of(modules, "manor.saves", "rich.progress") == []

    def test_a_fleet_without_saves_loads_no_save_code_and_no_progress_bar(self) -> None:
        modules = _modules_after(["fleet", "--worlds", "2", "--ticks", "1", "--json"])
        assert "manor.fleet.in_process" in modules  # it did run
        assert _of(modules, "manor.saves", "rich.progress", "textual", "manor.bench") == []

    @pytest.mark.parametrize("command", [command.name for command in COMMANDS])
    def test_a_command_s_help_loads_no_engine(self, command: str) -> None:
        """Its parser builds from ``manor.cli.parsers`` alone: not its ``_cmd`` module,
        not the tick loop, the engine, trio, Rich, Textual, Redis or a suite."""
        modules = _modules_after([command, "--help"])
        assert f"manor.cli.{[c for c in COMMANDS if c.name == command][0].parser}" in modules
        heavy = _of(modules, "trio", "rich", "textual", "coredis", "httpx", "manor.tick", "manor.run.engine", "manor.saves", "manor.worlds")
        assert heavy == []
        assert [name for name in modules if name.endswith("_cmd")] == []
        assert [name for name in modules if name.startswith("manor.bench.") and name != "manor.bench.catalogue"] == []

    def test_the_bench_catalogue_names_each_suite_as_it_names_itself(self) -> None:
        from manor.bench.catalogue import DEFAULT_SUITES
        from manor.bench.runner import SUITES

        assert [suite.name for suite in SUITES.values()] == list(SUITES)
        assert set(DEFAULT_SUITES) <= set(SUITES)

    def test_every_command_is_listed_but_the_part_of_a_fleet(self) -> None:
        assert [command.name for command in COMMANDS if command.help is None] == [PART_COMMAND]
        assert len({command.name for command in COMMANDS}) == len(COMMANDS)


def test_an_unknown_command_names_the_listed_commands_and_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    """Not the hidden ``fleet-part`` a fleet's processes run."""
    with pytest.raises(SystemExit) as caught:
        main(["flet"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("manor: error: unknown command 'flet' (did you mean fleet?); the commands: run, play, fleet, replay, ")
    assert "fleet-part" not in err and err.count("\n") == 1
