"""Layered configuration: precedence across the five sources, ``manor config``, and one
clear line for every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import manor.config.layering
from manor import ConfigError
from manor.cli import main
from manor.config import Source, flags_source, resolve, standard_sources
from manor.config.layering import built_in_source, environment_source
from manor.config.schema import GateSettings


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from an empty directory, so that no stray ./manor.toml is picked up."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # rich: never wrap the table
    return tmp_path


# -- precedence -----------------------------------------------------------------------


def _sources(workdir: Path, *, toml: bool, env: bool, flags: bool) -> list[Source]:
    path = write(workdir / "user.toml", "[backend]\nsessions = 2\n") if toml else None
    environ = {"MANOR_BACKEND_SESSIONS": "3"} if env else {}
    flag = flags_source({"backend.sessions": 7}, {"backend.sessions": "--sessions"}) if flags else None
    return standard_sources(flags=flag, config_path=path, environ=environ)


@pytest.mark.parametrize(
    ("toml", "env", "flags", "value", "origin"),
    [
        (False, False, False, 0, "gate layer defaults"),
        (True, False, False, 2, "user.toml"),
        (True, True, False, 3, "environment"),
        (True, True, True, 7, "command line"),
        (False, False, True, 7, "command line"),
        (True, False, True, 7, "command line"),
        (False, True, False, 3, "environment"),
    ],
)
def test_the_highest_source_that_sets_a_key_wins(
    workdir: Path, toml: bool, env: bool, flags: bool, value: int, origin: str
) -> None:
    """backend.sessions: built-in 4 < gate layer 0 < manor.toml 2 < MANOR_* 3 < flag 7."""
    sources = _sources(workdir, toml=toml, env=env, flags=flags)
    config = resolve(sources)
    assert config.value("backend.sessions") == value
    assert Path(config.origins["backend.sessions"]).name == origin  # the file's source is its path
    # The order sources are listed in is irrelevant: ordinals decide.
    assert resolve(list(reversed(sources))).value("backend.sessions") == value


def test_built_in_defaults_hold_where_no_source_speaks(workdir: Path) -> None:
    """Built-in defaults (100) alone; under the gate layer's defaults (200) backend.sessions drops to 0."""
    alone = resolve([built_in_source()])
    assert (alone.value("backend.sessions"), alone.origins["backend.sessions"]) == (4, "built-in defaults")
    config = resolve(_sources(workdir, toml=True, env=True, flags=True))
    assert (config.value("gate.timeout_s"), config.origins["gate.timeout_s"]) == (30.0, "built-in defaults")
    assert (config.value("breaker.failures"), config.origins["breaker.failures"]) == (5, "built-in defaults")


def test_every_source_contributes_its_own_keys(workdir: Path) -> None:
    """Each source sets a different key; each shows as that key's origin."""
    path = write(workdir / "manor.toml", "[gate]\nrate = 2.5\n\n[breaker]\nfailures = 9\n")
    flags = flags_source({"gate.timeout_s": 12.0}, {"gate.timeout_s": "--gate-timeout"})
    config = resolve(standard_sources(flags=flags, config_path=path, environ={"MANOR_CALL_TIMEOUT_S": "45"}))
    assert [(key, value, source) for key, value, source in config.rows() if source != "built-in defaults"] == [
        ("gate.size", 5, "derived: platform.limit - 1"),
        ("gate.rate", 2.5, str(path)),
        ("gate.timeout_s", 12.0, "command line"),
        ("call.timeout_s", 45.0, "environment"),
        ("breaker.failures", 9, str(path)),
        ("backend.sessions", 0, "gate layer defaults"),
    ]


@pytest.mark.parametrize(
    ("environ", "size", "origin"),
    [
        ({}, 5, "derived: platform.limit - 1"),
        ({"MANOR_PLATFORM_LIMIT": "10"}, 9, "derived: platform.limit - 1"),
        ({"MANOR_PLATFORM_LIMIT": "1"}, 1, "derived: platform.limit - 1"),
        ({"MANOR_PLATFORM_LIMIT": "0"}, 8, "derived: platform unlimited"),
        ({"MANOR_PLATFORM_LIMIT": "10", "MANOR_GATE_SIZE": "4"}, 4, "environment"),
    ],
)
def test_the_gate_is_sized_one_below_the_platform_limit_unless_set(
    workdir: Path, environ: dict[str, str], size: int, origin: str
) -> None:
    """gate.size defaults to platform.limit - 1 (at least 1); an explicit size wins."""
    config = resolve(standard_sources(environ=environ))
    assert (config.value("gate.size"), config.origins["gate.size"]) == (size, origin)


def test_resolved_settings_always_hold_a_gate_size() -> None:
    """The resolved settings' type has no unset gate size: resolve derives it even from
    sources without built-in defaults, and the type refuses one left unset."""
    config = resolve([Source("scene", 150, {"platform.limit": 4})])
    assert (config.settings.gate.size, config.origins["gate.size"]) == (3, "derived: platform.limit - 1")
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"size": None}, GateSettings)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({}, GateSettings)


def test_manor_config_environment_variable_names_the_file(workdir: Path) -> None:
    """$MANOR_CONFIG points at the user's file when --config is not given."""
    path = write(workdir / "elsewhere.toml", "[gate]\nburst = 4\n")
    config = resolve(standard_sources(environ={"MANOR_CONFIG": str(path)}))
    assert (config.value("gate.burst"), config.origins["gate.burst"]) == (4, str(path))


def test_a_manor_toml_in_the_working_directory_is_read(workdir: Path) -> None:
    """Without --config or $MANOR_CONFIG, ./manor.toml is the user's file."""
    write(workdir / "manor.toml", "[gate]\nburst = 6\n")
    config = resolve(standard_sources(environ={}))
    assert (config.value("gate.burst"), config.origins["gate.burst"]) == (6, "manor.toml")


# -- manor config ----------------------------------------------------------------------


def test_manor_config_prints_every_setting_with_its_source(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table has a row per key: key, value, and where the value came from."""
    write(workdir / "manor.toml", "[gate]\nrate = 2.5\n")
    assert main(["config", "--gate-timeout", "12"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:4]] for line in out.splitlines() if line.count("│") == 4}
    assert rows["gate.rate"] == ["2.5", "manor.toml"]
    assert rows["gate.timeout_s"] == ["12.0", "command line"]
    assert rows["gate.size"] == ["5", "derived: platform.limit - 1"]
    assert rows["platform.limit"] == ["6", "scene wacky_manor.toml"]
    assert rows["backend.sessions"] == ["0", "gate layer defaults"]
    assert rows["call.timeout_s"] == ["60.0", "built-in defaults"]


def test_manor_config_json_gives_value_and_source_per_key(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--json: one object, key -> {value, source}, covering all five kinds of source."""
    write(workdir / "manor.toml", "[gate]\nrate = 2.5\n")
    monkeypatch.setenv("MANOR_CALL_TIMEOUT_S", "45")
    assert main(["config", "--json", "--gate-timeout", "12"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gate.rate"] == {"value": 2.5, "source": "manor.toml"}
    assert data["gate.timeout_s"] == {"value": 12.0, "source": "command line"}
    assert data["call.timeout_s"] == {"value": 45.0, "source": "environment"}
    assert data["backend.sessions"] == {"value": 0, "source": "gate layer defaults"}
    assert data["breaker.cooldown_s"] == {"value": 30.0, "source": "built-in defaults"}
    assert data["gate.size"] == {"value": 5, "source": "derived: platform.limit - 1"}


def test_flags_beat_the_environment_in_manor_config(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same key from manor.toml, MANOR_* and a flag: the flag wins, and says so."""
    write(workdir / "manor.toml", "[platform]\nlimit = 3\n")
    monkeypatch.setenv("MANOR_PLATFORM_LIMIT", "8")
    assert main(["config", "--json", "--platform-limit", "11"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["platform.limit"] == {"value": 11, "source": "command line"}
    assert data["gate.size"] == {"value": 10, "source": "derived: platform.limit - 1"}


# -- bad input: one clear line, non-zero exit, no traceback -------------------------------


BAD_INPUTS = {
    "unknown key in manor.toml": (
        {"manor.toml": "[gate]\nsiez = 3\n"},
        {},
        [],
        "manor: error: manor.toml: gate.siez: unknown setting",
    ),
    "unknown section in manor.toml": (
        {"manor.toml": "[gait]\nsize = 3\n"},
        {},
        [],
        "manor: error: manor.toml: gait.size: unknown setting",
    ),
    "a bare key in manor.toml": (
        {"manor.toml": "size = 3\n"},
        {},
        [],
        "manor: error: manor.toml: 'size' is not a settings table (expected [size])",
    ),
    "gate size 0 in manor.toml": (
        {"manor.toml": "[gate]\nsize = 0\n"},
        {},
        [],
        "manor: error: manor.toml: gate.size: bad value 0: Expected `int` >= 1",
    ),
    "gate size 0 in the environment": (
        {},
        {"MANOR_GATE_SIZE": "0"},
        [],
        "manor: error: environment: MANOR_GATE_SIZE: bad value '0': Expected `int` >= 1",
    ),
    "gate size 0 as a flag": (
        {},
        {},
        ["--gate-size", "0"],
        "manor: error: command line: --gate-size: bad value 0: Expected `int` >= 1",
    ),
    "negative rate in manor.toml": (
        {"manor.toml": "[gate]\nrate = -1.0\n"},
        {},
        [],
        "manor: error: manor.toml: gate.rate: bad value -1.0: Expected `float` >= 0.0",
    ),
    "negative rate as a flag": (
        {},
        {},
        ["--gate-rate", "-1"],
        "manor: error: command line: --gate-rate: bad value -1.0: Expected `float` >= 0.0",
    ),
    "a value of the wrong type": (
        {"manor.toml": '[gate]\nburst = "lots"\n'},
        {},
        [],
        "manor: error: manor.toml: gate.burst: bad value 'lots': Expected `int`, got `str`",
    ),
    "malformed manor.toml": (
        {"manor.toml": "[gate\nsize = 3\n"},
        {},
        [],
        "manor: error: manor.toml: not valid TOML: Expected ']' at the end of a table declaration (at line 1, column 6)",
    ),
    "missing --config file": (
        {},
        {},
        ["--config", "nowhere.toml"],
        "manor: error: nowhere.toml: no such config file",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_a_bad_input_is_one_clear_line_and_a_non_zero_exit(
    case: str, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each mistake a user can make ends in one line naming the source and key, exit 1, no traceback."""
    files, environ, flags, message = BAD_INPUTS[case]
    for name, text in files.items():
        write(workdir / name, text)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert main(["config", *flags]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [message]
    assert "Traceback" not in captured.err + captured.out
    assert captured.out == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["config", "--bogus"], "manor: error: unrecognized arguments: --bogus (see 'manor --help')"),
        (
            ["config", "--gate-size", "five"],
            "manor config: error: argument --gate-size: invalid size value: 'five' (see 'manor config --help')",
        ),
        (["nonsense"], "manor: error: unknown command 'nonsense'"),
    ],
)
def test_a_command_line_mistake_exits_2_with_one_line(
    argv: list[str], message: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse's mistakes: exit code 2 and a single line, not a usage dump."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith(message)


def test_resolve_names_the_source_and_key_of_a_bad_value() -> None:
    """The library raises ConfigError with the source's own spelling of the key."""
    flags = flags_source({"gate.burst": 0}, {"gate.burst": "--burst"})
    with pytest.raises(ConfigError, match=r"^command line: --burst: bad value 0"):
        resolve([built_in_source(), flags])
    with pytest.raises(ConfigError, match=r"^environment: MANOR_SIM_ERROR_RATE: bad value '2'"):
        resolve(standard_sources(environ={"MANOR_SIM_ERROR_RATE": "2"}))


class TestUnknownVariables:
    """A ``MANOR_*`` variable no setting has is warned of — once, with the setting
    nearest its name — and ignored: other tools share the prefix in a user's shell.
    (It stopped every command.)"""

    @pytest.fixture(autouse=True)
    def _fresh(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(manor.config.layering, "_WARNED", set())

    def test_warned_with_the_nearest_setting_and_ignored(self, capsys: pytest.CaptureFixture[str], isolated: None, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("MANOR_GATE_SIZ", "3")
        monkeypatch.setenv("MANOR_ZZZ", "1")
        assert main(["run", "--ticks", "1", "--json"]) == 0
        out, err = capsys.readouterr()
        assert sorted(err.splitlines()) == [
            "manor: warning: environment: MANOR_GATE_SIZ is not a Manor setting; ignored (did you mean MANOR_GATE_SIZE?)",
            "manor: warning: environment: MANOR_ZZZ is not a Manor setting; ignored ('manor config' lists the settings)",
        ]
        assert json.loads(out)["gate_size"] == 5  # the default: the variable changed nothing

    def test_once_however_often_the_environment_is_read(self, capsys: pytest.CaptureFixture[str]) -> None:
        for _ in range(3):
            environment_source({"MANOR_TICKS": "3", "MANOR_RUN_TICKS": "2"})
        assert capsys.readouterr().err == "manor: warning: environment: MANOR_TICKS is not a Manor setting; ignored (did you mean MANOR_RUN_TICKS?)\n"
