"""Backends chosen in manor.toml: the [backends.NAME] tables, who uses which, the
router under the one gate, and ``manor config`` showing them."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing
from scenes_fixture import TickRecorder

from manor.cli import main
from manor.config import Source, resolve, standard_sources
from manor.config.backends import AgnoBackend, CommandBackend, OpenAIBackend, SimBackend
from manor.config.layering import (
    built_in_source,
    file_source,
    flags_source,
    layer_defaults_source,
)
from manor.errors import ConfigError
from manor.providers import SimProvider
from manor.providers.routing import RoutingProvider
from manor.run.engine import build_engine, configure
from manor.tick.statistics import RunStatistics
from manor.worlds import load_scene

LOCAL = '[backends.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "manor"\n'
FLAKY = '[backends.flaky]\nkind = "sim"\nerror_rate = 1.0\n'
QUIET = '[backends.quiet]\nkind = "sim"\n'


# No manor.toml from the working directory, no MANOR_* from the environment.
pytestmark = pytest.mark.usefixtures("isolated")


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "manor.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _configure(tmp_path: Path, text: str, flags: dict | None = None, environ: dict | None = None):
    """(config, scene) of the default scene with ``text`` as manor.toml."""
    flag_source = flags_source(flags or {}, {"backend.default": "--backend"})
    return configure(standard_sources(flags=flag_source, config_path=_file(tmp_path, text), environ=environ or {}))


def _backends(config, scene) -> dict[str, str]:
    agents = {agent_id: agent.backend for agent_id, agent in scene.agents.items()}
    return {agent: chosen.backend for agent, chosen in config.assign_backends(agents, scene.path).items()}


class TestTables:
    def test_every_kind_decodes_from_its_table(self, tmp_path: Path) -> None:
        """Each kind becomes its own struct, with the file as its source."""
        text = (
            LOCAL
            + '[backends.big]\nkind = "command"\nargv = ["ollama", "run", "{model}"]\nenv = ["OLLAMA_HOST"]\n'
            + '[backends.remote]\nkind = "agno"\nbase_url = "http://127.0.0.1:7777"\nagent_id = "butler"\n'
            + "workers = 3\ntimeout_s = 2.5\ncancel_remote = true\n"
            + FLAKY
        )
        path = _file(tmp_path, text)
        backends = resolve([built_in_source(), file_source(path)]).backends
        assert {name: named.value for name, named in backends.tables.items()} == {
            "local": OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="manor"),
            "big": CommandBackend(argv=("ollama", "run", "{model}"), env=("OLLAMA_HOST",)),
            "remote": AgnoBackend(base_url="http://127.0.0.1:7777", agent_id="butler", workers=3, timeout_s=2.5, cancel_remote=True),
            "flaky": SimBackend(error_rate=1.0),
        }
        assert {named.origin for named in backends.tables.values()} == {str(path)}

    @pytest.mark.parametrize(
        ("table", "message"),
        [
            ('kind = "opnai"', "backends.local.kind: Invalid value 'opnai' (kinds: sim, openai, command, agno, anthropic, claude-code)"),
            ('kind = "openai"\nbase_url = "http://x/v1"\nbase_ur = "y"', "backends.local: Object contains unknown field `base_ur`"),
            ('kind = "openai"', "backends.local: Object missing required field `base_url`"),
            ('base_url = "http://x/v1"', "backends.local: Object missing required field `kind`"),
            ('kind = "command"\nargv = []', "backends.local.argv: Expected `array` of length >= 1"),
            ('kind = "agno"\nbase_url = "http://x"\nagent_id = "a"\nworkers = 0', "backends.local.workers: Expected `int` >= 1"),
            (
                'kind = "agno"\nbase_url = "http://x"\nagent_id = "a"\nsession_id = "manor-{runid}"',
                "backends.local.session_id: unknown placeholder {runid} (known: {run}, {agent})",
            ),
            (
                'kind = "agno"\nbase_url = "http://x"\nagent_id = "a"\nsession_id = "s-{agent:>99999999}"',
                "backends.local.session_id: {agent} takes no format spec or conversion (known placeholders: {run}, {agent})",
            ),
            (
                'kind = "agno"\nbase_url = "http://x"\nagent_id = "a"\nsession_id = "{0}"',
                "backends.local.session_id: unknown placeholder {0} (known: {run}, {agent})",
            ),
            (
                'kind = "agno"\nbase_url = "http://x"\nagent_id = "a"\nsession_id = "a{b"',
                "backends.local.session_id: not a valid template (expected '}' before end of string): 'a{b'; "
                "write {{ and }} for a literal brace",
            ),
        ],
    )
    def test_a_typo_names_the_file_and_the_key(self, tmp_path: Path, table: str, message: str) -> None:
        path = _file(tmp_path, f"[backends.local]\n{table}\n")
        with pytest.raises(ConfigError) as info:
            resolve([built_in_source(), file_source(path)])
        assert str(info.value) == f"{path}: {message}"

    def test_sim_is_reserved_and_a_backend_must_be_a_table(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="'sim' is the built-in simulated backend"):
            resolve([built_in_source(), file_source(_file(tmp_path, '[backends.sim]\nkind = "sim"\n'))])
        with pytest.raises(ConfigError, match=r"backends.local: expected a table \[backends.local\] with a kind"):
            resolve([built_in_source(), file_source(_file(tmp_path, '[backends]\nlocal = "openai"\n'))])

    def test_a_higher_source_replaces_a_table_whole(self, tmp_path: Path) -> None:
        """A table is not merged field by field: its kind, and so its fields, may differ."""
        lower = file_source(_file(tmp_path, LOCAL))
        higher = Source("override", 300, {"backends.local": {"kind": "sim", "hang_rate": 0.5}})
        named = resolve([built_in_source(), lower, higher]).backends.tables["local"]
        assert (named.value, named.origin) == (SimBackend(hang_rate=0.5), "override")

    def test_the_retired_backend_kind_says_what_replaced_it(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match=r"backend.kind: no longer a setting: name a backend with backend.default"):
            resolve([built_in_source(), file_source(_file(tmp_path, '[backend]\nkind = "sim"\n'))])


class TestAssignment:
    def test_nothing_configured_keeps_every_agent_on_the_simulator(self, tmp_path: Path) -> None:
        config, scene = _configure(tmp_path, "")
        assert set(_backends(config, scene).values()) == {"sim"}
        assert config.settings.run.clock is None  # still virtual

    def test_default_for_everyone_and_a_line_for_the_narrator(self, tmp_path: Path) -> None:
        """In one source, the agent's own line beats backend.default."""
        config, scene = _configure(tmp_path, LOCAL + QUIET + '[backend]\ndefault = "local"\n[agent_backends]\nnarrator = "quiet"\n')
        backends = _backends(config, scene)
        assert backends.pop("narrator") == "quiet"
        assert set(backends.values()) == {"local"} and len(backends) == 11

    def test_the_backend_flag_puts_every_agent_on_one_backend(self, tmp_path: Path) -> None:
        """--backend (400) outranks manor.toml's line for the narrator (250)."""
        text = LOCAL + QUIET + '[backend]\ndefault = "local"\n[agent_backends]\nnarrator = "quiet"\n'
        config, scene = _configure(tmp_path, text, flags={"backend.default": "sim"})
        assert set(_backends(config, scene).values()) == {"sim"}
        origins = {chosen.origin for chosen in config.assign_backends({"narrator": "sim"}, "s").values()}
        assert origins == {"command line: --backend"}

    def test_the_environment_outranks_the_file(self, tmp_path: Path) -> None:
        config, scene = _configure(tmp_path, LOCAL + '[agent_backends]\nnarrator = "local"\n', environ={"MANOR_BACKEND_DEFAULT": "sim"})
        assert set(_backends(config, scene).values()) == {"sim"}

    def test_an_agent_files_own_backend_counts_at_the_scenes_ordinal(self, tmp_path: Path) -> None:
        """The agent file (150) beats the built-in default, loses to manor.toml's default (250)."""
        config, _ = _configure(tmp_path, QUIET)
        chosen = config.assign_backends({"ghost": "quiet", "cook": "sim"}, "s")
        assert (chosen["ghost"].backend, chosen["ghost"].origin) == ("quiet", "agent file of ghost: backend")
        assert chosen["cook"].backend == "sim"
        config, _ = _configure(tmp_path, QUIET + '[backend]\ndefault = "sim"\n')
        assert config.assign_backends({"ghost": "quiet"}, "s")["ghost"].backend == "sim"

    def test_an_agent_file_naming_no_table_fails_when_it_is_used(self, tmp_path: Path) -> None:
        config, _ = _configure(tmp_path, "")
        with pytest.raises(ConfigError, match=r"agent file of ghost: backend: no backend named 'big' \(defined: sim"):
            config.assign_backends({"ghost": "big"}, "s")
        config, _ = _configure(tmp_path, '[backend]\ndefault = "sim"\n')
        assert config.assign_backends({"ghost": "big"}, "s")["ghost"].backend == "sim"

    def test_a_line_for_an_agent_the_scene_lacks_is_one_error(self, tmp_path: Path) -> None:
        path = tmp_path / "manor.toml"
        with pytest.raises(ConfigError) as info:
            _configure(tmp_path, '[agent_backends]\nnarator = "sim"\n')
        assert str(info.value).startswith(f"{path}: agent_backends.narator: no agent 'narator' in ")

    def test_an_undefined_backend_is_one_error(self, tmp_path: Path) -> None:
        path = tmp_path / "manor.toml"
        with pytest.raises(ConfigError) as info:
            _configure(tmp_path, LOCAL + '[agent_backends]\nnarrator = "big"\n')
        assert str(info.value) == f"{path}: agent_backends.narrator: no backend named 'big' (defined: sim, local; add a [backends.big] table)"
        with pytest.raises(ConfigError, match=r"command line: --backend: no backend named 'bigg'"):
            _configure(tmp_path, LOCAL, flags={"backend.default": "bigg"})

    def test_a_real_backend_makes_the_clock_real(self, tmp_path: Path) -> None:
        """Unset, the clock is derived; virtual, asked for, is refused; a sim table keeps it virtual."""
        config, _ = _configure(tmp_path, LOCAL + '[agent_backends]\nnarrator = "local"\n')
        assert config.settings.run.clock == "real"
        assert config.origins["run.clock"] == "derived: narrator is on the openai backend 'local'"
        with pytest.raises(ConfigError, match=r"run.clock = virtual cannot time a real backend \(narrator is on 'local', kind openai\)"):
            _configure(tmp_path, LOCAL + '[agent_backends]\nnarrator = "local"\n[run]\nclock = "virtual"\n')
        config, _ = _configure(tmp_path, QUIET + '[backend]\ndefault = "quiet"\n')
        assert config.settings.run.clock is None


class TestRouting:
    def test_without_backend_settings_the_simulator_is_the_backend(self, tmp_path: Path) -> None:
        config, scene = _configure(tmp_path, "")
        assert type(build_engine(config, scene).loop.gated.backend) is SimProvider

    def test_a_router_over_sim_tables_changes_nothing_in_the_story(self, tmp_path: Path) -> None:
        """Every agent on a fault-free sim table: same draws, same world hash, all calls routed."""
        plain = _run(*_configure(tmp_path, ""), ticks=5)
        routed_config, scene = _configure(tmp_path, QUIET + '[backend]\ndefault = "quiet"\n')
        engine = build_engine(routed_config, scene)
        routed = _run(routed_config, scene, ticks=5, engine=engine)
        assert routed[0].world_hash == plain[0].world_hash
        router = engine.loop.gated.backend
        assert isinstance(router, RoutingProvider)
        assert router.statistics().calls == {"quiet": 5 * 14}

    def test_the_run_id_changes_nothing_in_the_story(self, tmp_path: Path) -> None:
        """Two engines, two run ids (fresh or given): the same tick records, hash and all."""
        config, scene = _configure(tmp_path, QUIET + '[backend]\ndefault = "quiet"\n')
        engines = [build_engine(config, scene), build_engine(config, scene), build_engine(config, scene, run_id="given")]
        assert len({engine.run_id for engine in engines}) == 3 and engines[2].run_id == "given"
        first, *others = [_run(config, scene, ticks=3, engine=engine) for engine in engines]
        assert all(other == first for other in others)

    def test_a_mixed_cast_degrades_only_the_narrator_on_a_failing_backend(self, tmp_path: Path) -> None:
        """Narrator on a sim table failing every call; the rest on the built-in simulator."""
        config, scene = _configure(tmp_path, FLAKY + '[agent_backends]\nnarrator = "flaky"\n')
        stats = RunStatistics()
        engine = build_engine(config, scene, instruments=[stats])
        _run(config, scene, ticks=4, engine=engine)
        summary = stats.summary(engine)
        assert summary["degradations"]["narrator"]["provider_error"] == 4
        assert summary["degraded"] == 4 and summary["ok"] == 4 * 13
        assert engine.loop.gated.backend.statistics().calls == {"flaky": 4, "sim": 4 * 13}


def _run(config, scene, *, ticks: int, engine=None):
    engine = engine or build_engine(config, scene)
    recorder = TickRecorder()
    engine.loop.add_instrument(recorder)
    trio.run(engine.loop.run, ticks, 0.0, clock=trio.testing.MockClock(autojump_threshold=0))
    return recorder.ticks[-1:]


class TestConfigCommand:
    def test_json_shows_tables_and_every_agents_backend_with_its_source(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _file(tmp_path, LOCAL + '[backend]\ndefault = "local"\n[agent_backends]\nnarrator = "sim"\n')
        assert main(["config", "--json", "--config", str(path)]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert rows["backends.local"] == {
            "value": msgspec.to_builtins(OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="manor")),
            "source": str(path),
            "unset_variables": [],
        }
        assert rows["backend.default"] == {"value": "local", "source": str(path)}
        assert rows["agent_backends.narrator"] == {"value": "sim", "source": f"{path}: agent_backends.narrator"}
        assert rows["agent_backends.hobbes"] == {"value": "local", "source": f"{path}: backend.default"}
        assert rows["run.clock"]["value"] == "real"

    def test_a_bad_table_is_one_line_and_exit_1(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _file(tmp_path, '[backends.local]\nkind = "opnai"\n')
        assert main(["run", "--config", str(path)]) == 1
        err = capsys.readouterr().err
        assert err == f"manor: error: {path}: backends.local.kind: Invalid value 'opnai' (kinds: sim, openai, command, agno, anthropic, claude-code)\n"

    def test_layer_defaults_and_scene_still_resolve_without_a_file(self) -> None:
        """The flat keys are untouched: backend.default is one more of them."""
        config = resolve([built_in_source(), layer_defaults_source()])
        assert dict((key, value) for key, value, _ in config.rows())["backend.default"] == "sim"
        assert config.table_rows() == []
        assert load_scene("wacky_manor").others["narrator"].backend == "sim"
