"""The environment variables a backend names (an API key, a command's ``env``): checked
before the first tick by ``manor run`` and ``manor play``, marked by ``manor config``."""

from __future__ import annotations

import base64  # noqa: F401 - the spellings below are eval-ed here
import json
import os
import re
import subprocess
import sys
import urllib.parse  # noqa: F401 - the spellings below are eval-ed here
from pathlib import Path

import pytest
from scenes_fixture import fixed_latency_scene

from manor.cli import main
from manor.config import standard_sources
from manor.config.backends import (
    AgnoBackend,
    CommandBackend,
    OpenAIBackend,
    SimBackend,
    unset_variables,
)
from manor.errors import ConfigError
from manor.run.engine import build_engine, configure

# No manor.toml from the working directory, no MANOR_* from the environment.
pytestmark = pytest.mark.usefixtures("isolated")

SECRET = "sk-do-not-print-me"
GPT = '[backends.gpt]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "TESTVAR_KEY"\n'
TOOL = '[backends.tool]\nkind = "command"\nargv = ["cat"]\nenv = ["TESTVAR_HOME", "TESTVAR_TOKEN"]\n'
REMOTE = '[backends.remote]\nkind = "agno"\nbase_url = "http://127.0.0.1:9"\nagent_id = "a"\napi_key_env = "TESTVAR_AGNO"\n'


@pytest.fixture(autouse=True)
def _variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the variables a test sets itself are there."""
    for name in ("TESTVAR_KEY", "TESTVAR_HOME", "TESTVAR_TOKEN", "TESTVAR_AGNO"):
        monkeypatch.delenv(name, raising=False)


def _file(text: str) -> Path:
    path = Path("manor.toml")
    path.write_text(text, encoding="utf-8")
    return path


class TestUnsetVariables:
    def test_each_kind_names_its_variables(self) -> None:
        """The key naming each variable, and whether it is missing or empty; a sim table needs none."""
        environ = {"TESTVAR_HOME": "/home/x", "TESTVAR_TOKEN": ""}
        assert unset_variables(OpenAIBackend(base_url="u", api_key_env="TESTVAR_KEY"), environ) == [("api_key_env", "TESTVAR_KEY", "is not set")]
        assert unset_variables(AgnoBackend(base_url="u", agent_id="a", api_key_env="TESTVAR_AGNO"), environ) == [("api_key_env", "TESTVAR_AGNO", "is not set")]
        assert unset_variables(CommandBackend(argv=("cat",), env=("TESTVAR_HOME", "TESTVAR_TOKEN")), environ) == [("env", "TESTVAR_TOKEN", "is empty")]
        assert unset_variables(OpenAIBackend(base_url="u"), environ) == []
        assert unset_variables(SimBackend(), environ) == []


class TestBeforeTheFirstTick:
    def test_build_engine_refuses_naming_file_key_and_variable(self) -> None:
        path = _file(GPT + '[backend]\ndefault = "gpt"\n')
        config, scene = configure(standard_sources(config_path=path, environ={}))
        with pytest.raises(ConfigError) as caught:
            build_engine(config, scene)
        assert str(caught.value) == "manor.toml: backends.gpt.api_key_env: environment variable TESTVAR_KEY is not set"

    def test_every_missing_variable_of_the_backends_in_use_in_one_line(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """Only backends some agent is on are checked; an unused table may lack its key."""
        monkeypatch.setenv("TESTVAR_HOME", "/home/x")
        _file(GPT + TOOL + REMOTE + '[backend]\ndefault = "gpt"\n[agent_backends]\nnarrator = "tool"\n')
        assert main(["run", "--ticks", "1"]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            "manor: error: manor.toml: backends.gpt.api_key_env: environment variable TESTVAR_KEY is not set; "
            "manor.toml: backends.tool.env: environment variable TESTVAR_TOKEN is not set\n"
        )

    def test_with_the_variables_set_the_engine_is_built(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TESTVAR_KEY", SECRET)
        monkeypatch.setenv("TESTVAR_HOME", "/home/x")
        monkeypatch.setenv("TESTVAR_TOKEN", "t")
        path = _file(GPT + TOOL + '[backend]\ndefault = "gpt"\n[agent_backends]\nnarrator = "tool"\n')
        config, scene = configure(standard_sources(config_path=path, environ={}))
        assert build_engine(config, scene).loop is not None

    def test_play_refuses_before_the_screen_and_saves_nothing(self, capsys: pytest.CaptureFixture[str]) -> None:
        _file(REMOTE + '[agent_backends]\nnarrator = "remote"\n')
        assert main(["play", "--ticks", "1"]) == 1
        assert capsys.readouterr().err == "manor: error: manor.toml: backends.remote.api_key_env: environment variable TESTVAR_AGNO is not set\n"
        assert not Path("saves").exists() or not any(Path("saves").iterdir())

    def test_an_empty_variable_is_refused_too(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TESTVAR_KEY", "")
        _file(GPT + '[backend]\ndefault = "gpt"\n')
        assert main(["run"]) == 1
        assert capsys.readouterr().err.endswith("backends.gpt.api_key_env: environment variable TESTVAR_KEY is empty\n")

    def test_as_a_process_one_line_exit_1(self, tmp_path: Path) -> None:
        """The real entry point: one line on stderr, no traceback, no ExceptionGroup."""
        _file(TOOL + '[backend]\ndefault = "tool"\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("MANOR_")}
        done = subprocess.run([sys.executable, "-m", "manor", "run", "--ticks", "2"], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
        assert done.returncode == 1
        assert done.stderr == (
            "manor: error: manor.toml: backends.tool.env: environment variable TESTVAR_HOME is not set; "
            "manor.toml: backends.tool.env: environment variable TESTVAR_TOKEN is not set\n"
        )


class TestConfigMarksIt:
    def test_json_lists_the_unset_variables_of_each_table(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TESTVAR_HOME", SECRET)
        _file(GPT + TOOL + '[backend]\ndefault = "gpt"\n')
        assert main(["config", "--json"]) == 0
        out = capsys.readouterr().out
        rows = json.loads(out)
        assert rows["backends.gpt"]["unset_variables"] == ["TESTVAR_KEY"]
        assert rows["backends.tool"]["unset_variables"] == ["TESTVAR_TOKEN"]
        assert SECRET not in out

    def test_the_table_marks_each_variable(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TESTVAR_HOME", SECRET)
        monkeypatch.setenv("COLUMNS", "250")
        _file(GPT + TOOL + '[backend]\ndefault = "gpt"\n')
        assert main(["config"]) == 0
        out = capsys.readouterr().out
        assert "api_key_env TESTVAR_KEY is not set" in out
        assert "TESTVAR_HOME set, env TESTVAR_TOKEN is not set" in out
        assert SECRET not in out


def test_a_secret_a_backend_quotes_back_is_masked_in_records(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A command that prints its API key in its error: the record, the summary and the
    save keep the message with the key masked."""
    monkeypatch.setenv("TESTVAR_TOKEN", SECRET)
    leak = "import os, sys; sys.stderr.write('bad key ' + os.environ['TESTVAR_TOKEN']); sys.exit(3)"
    path = _file(f'[backends.leaky]\nkind = "command"\nargv = {json.dumps([sys.executable, "-c", leak])}\nenv = ["TESTVAR_TOKEN"]\n'
                 '[agent_backends]\nnarrator = "leaky"\n')  # fmt: skip
    save = tmp_path / "leak.msav"
    scene = fixed_latency_scene(tmp_path, 0.01, "quick")  # the real clock's ticks take 0.02 s, not seconds
    assert main(["run", "--config", str(path), "--scene", str(scene), "--ticks", "2", "--json", "--save", str(save)]) == 0
    out, err = capsys.readouterr()
    [row] = json.loads(out)["errors"]
    assert (row["reason"], row["caller"], row["count"]) == ("provider_error", "narrator", 2)
    assert "bad key ***" in row["message"] and SECRET not in row["message"]
    assert SECRET not in out + err and SECRET.encode() not in save.read_bytes()


@pytest.mark.parametrize(
    "spelling",
    [
        "urllib.parse.quote(key, safe='').replace('-', '%2D')",
        "json.dumps(key)",
        "base64.b64encode(b'user:' + key.encode()).decode()",
    ],
    ids=["url-encoded", "json-escaped", "base64"],
)
def test_a_secret_quoted_back_in_another_spelling_is_masked_everywhere(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spelling: str
) -> None:
    """A server quoting the key back URL-encoded (``sk%2Ddo…``), JSON-escaped or in base64:
    neither the key nor that spelling of it reaches --json, the save, the story or the trace."""

    key = SECRET
    spelled = eval(spelling)
    monkeypatch.setenv("TESTVAR_TOKEN", key)
    leak = f"import base64, json, os, sys, urllib.parse; key = os.environ['TESTVAR_TOKEN']; sys.stderr.write('bad key ' + {spelling}); sys.exit(3)"
    path = _file(f'[backends.leaky]\nkind = "command"\nargv = {json.dumps([sys.executable, "-c", leak])}\nenv = ["TESTVAR_TOKEN"]\n'
                 '[agent_backends]\nnarrator = "leaky"\n')  # fmt: skip
    save = tmp_path / "leak.msav"
    scene = fixed_latency_scene(tmp_path, 0.01, "quick")  # the real clock's ticks take 0.02 s, not seconds
    assert main(["run", "--config", str(path), "--scene", str(scene), "--ticks", "2", "--json", "--save", str(save)]) == 0
    assert main(["story", str(save), "--format", "jsonl"]) == 0
    trace = tmp_path / "leak.json"
    assert main(["trace", str(save), "-o", str(trace)]) == 0
    shown = "".join(capsys.readouterr()) + trace.read_text(encoding="utf-8")
    assert re.search(r"bad key \S*\*\*\*", shown)
    for secret in (key, spelled):
        assert secret not in shown and secret.encode() not in save.read_bytes()


class TestNonAsciiKey:
    """An API key with a character an HTTP header cannot carry (a typographic dash
    pasted from a web page): one line naming the variable, before the first tick."""

    @pytest.mark.parametrize(("table", "variable"), [(GPT, "TESTVAR_KEY"), (REMOTE, "TESTVAR_AGNO")], ids=["openai", "agno"])
    def test_run_refuses_naming_the_variable(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, table: str, variable: str) -> None:
        monkeypatch.setenv(variable, "sk\u2013abc-" + SECRET)
        name = table.split("]")[0].split(".")[1]
        path = _file(table + f'[backend]\ndefault = "{name}"\n')
        assert main(["run", "--config", str(path), "--ticks", "1"]) == 1
        out, err = capsys.readouterr()
        assert err == f"manor: error: manor.toml: backends.{name}.api_key_env: environment variable {variable} holds a non-ASCII character, which an HTTP header cannot carry (a key copied with a typographic dash or quote?)\n"
        assert SECRET not in out + err

    def test_the_header_is_refused_too(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Whatever reaches the backends without the check before the first tick."""
        from manor.providers.http import auth_headers

        monkeypatch.setenv("TESTVAR_KEY", "clé-" + SECRET)
        with pytest.raises(ConfigError, match=r"^environment variable TESTVAR_KEY \(the API key\) holds a non-ASCII character") as caught:
            auth_headers("TESTVAR_KEY")
        assert SECRET not in str(caught.value)

    def test_a_commands_variable_may_be_anything(self) -> None:
        """A command backend's env passes no header: a non-ASCII value is fine there."""
        assert unset_variables(CommandBackend(argv=("cat",), env=("TESTVAR_HOME",)), {"TESTVAR_HOME": "/home/zoë"}) == []
