"""Limits: values that used to pass validation and then crash or hang a run are refused
at load, in one line naming the flag, variable or file and the key."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trio
import trio.testing
from deadline import wall_deadline
from in_process import manor_here
from scenes_fixture import fixed_scene, make_engine, write_agent, write_scene

from manor.admission.gate import Gate
from manor.cli import main
from manor.config import flags_source, resolve, standard_sources
from manor.config.layering import built_in_source
from manor.errors import ConfigError, ContentError
from manor.limits import MAX_AGENTS, MAX_BEATS_PER_TICK, MAX_RATE, MAX_SECONDS
from manor.tick.driver import TickDriver
from manor.worlds import load_scene

SCENE = """\
name = "Small"
seed = 3
platform_limit = 2
rooms = ["hall", "cellar"]
cast = ["alice"]
"""


def one_line(exc: pytest.ExceptionInfo[Exception]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


class TestSettings:
    """Every number finite and bounded, every integer fits a save: from any source."""

    @pytest.mark.parametrize(
        ("key", "flag", "value", "says"),
        [
            ("gate.rate", "--gate-rate", math.inf, f"<= {MAX_RATE}"),
            ("gate.rate", "--gate-rate", 1e17, f"<= {MAX_RATE}"),
            ("gate.rate", "--gate-rate", math.nan, ">= 0"),
            ("run.tick_interval_s", "--tick-interval", math.inf, f"<= {MAX_SECONDS}"),
            ("gate.timeout_s", "--gate-timeout", 1e308, f"<= {MAX_SECONDS}"),
            ("run.seed", "--seed", 2**64, "<= 9223372036854775807"),
            ("gate.size", "--gate-size", 2**64, "<= 100000"),
            ("run.ticks", "--ticks", 2**64, "<= 1000000000"),
            ("run.agents", "--agents", 100_000_000, f"<= {MAX_AGENTS}"),
            ("platform.limit", "--platform-limit", 2**70, "<= 100000"),
        ],
    )
    def test_a_flag_out_of_bounds_is_named_by_its_spelling(self, key: str, flag: str, value: float, says: str) -> None:
        with pytest.raises(ConfigError) as exc:
            resolve([built_in_source(), flags_source({key: value}, {key: flag})])
        assert one_line(exc).startswith(f"command line: {flag}: bad value ")
        assert says in str(exc.value)

    @pytest.mark.parametrize("text", ["inf", "1e17", "nan", "-1"])
    def test_the_environment_and_manor_toml_are_bounded_alike(self, text: str, tmp_path: Path) -> None:
        with pytest.raises(ConfigError) as exc:
            resolve(standard_sources(environ={"MANOR_GATE_RATE": text}))
        assert one_line(exc).startswith("environment: MANOR_GATE_RATE: bad value ")
        toml = tmp_path / "manor.toml"
        toml.write_text(f"[gate]\nrate = {text}\n")
        with pytest.raises(ConfigError) as exc:
            resolve(standard_sources(config_path=toml, environ={}))
        assert one_line(exc).startswith(f"{toml}: gate.rate: bad value ")

    def test_the_largest_values_are_accepted(self) -> None:
        values = {"gate.rate": MAX_RATE, "run.agents": MAX_AGENTS, "run.tick_interval_s": MAX_SECONDS, "run.seed": 2**63 - 1}
        settings = resolve([built_in_source(), flags_source(values, {})]).settings
        assert (settings.gate.rate, settings.run.agents, settings.run.seed) == (MAX_RATE, MAX_AGENTS, 2**63 - 1)


class TestContent:
    """Scene and agent files: templates, latencies, beats, ids."""

    @pytest.mark.parametrize(
        ("line", "says"),
        [
            ("{butler}", "unknown placeholder {butler}"),
            ("a lone { brace", "not a valid template"),
            ("{0} again", "unknown placeholder {0}"),
            ("{mood:d}", "{mood:d} cannot be filled in"),
            ("{someone:>100000000}", "{someone} is wider than 200 characters"),
            ("{mood:{room}}", "{mood} has a format"),
        ],
    )
    def test_a_line_template_is_checked_against_its_placeholders(self, tmp_path: Path, line: str, says: str) -> None:
        path = write_scene(tmp_path, SCENE)
        agent = write_agent(tmp_path / "agents", "alice", f'name = "Alice"\n[sim]\nlines = ["fine {{someone}}", {line!r}]\n'.replace("'", '"'))
        with pytest.raises(ContentError) as exc:
            load_scene(str(path))
        assert one_line(exc).startswith(f"{agent}: agent 'Alice': sim.lines[1] ")
        assert says in str(exc.value)

    def test_a_good_template_with_a_format_is_accepted(self, tmp_path: Path) -> None:
        write_agent(tmp_path / "agents", "alice", 'name = "Alice"\n[sim]\nlines = ["{someone:>12}, {mood!r} {{literally}}"]\n')
        assert load_scene(str(write_scene(tmp_path, SCENE))).characters["alice"].sim.lines

    @pytest.mark.parametrize(
        ("sim", "where"),
        [("latency_s = -1.4", "$.sim.latency_s"), ("latency_s = nan", "$.sim.latency_s"), ("jitter = nan", "$.sim.jitter"),
         ("latency_s = inf", "$.sim.latency_s"), ("jitter = 1e300", "$.sim.jitter")],
    )
    def test_a_latency_is_finite_and_not_negative(self, tmp_path: Path, sim: str, where: str) -> None:
        agent = write_agent(tmp_path / "agents", "alice", f'name = "Alice"\n[sim]\n{sim}\n')
        with pytest.raises(ContentError) as exc:
            load_scene(str(write_scene(tmp_path, SCENE)))
        assert one_line(exc).startswith(f"{agent}: ") and where in str(exc.value)

    @pytest.mark.parametrize(
        ("extra", "where"),
        [
            ("[beats]\nper_tick = 1\nspeakers = [\"alice\"]\nprompts = []\n", "$.beats.prompts"),
            (f"[beats]\nper_tick = {MAX_BEATS_PER_TICK + 1}\nspeakers = [\"alice\"]\n", "$.beats.per_tick"),
        ],
    )
    def test_beats_need_a_prompt_and_have_a_maximum(self, tmp_path: Path, extra: str, where: str) -> None:
        write_agent(tmp_path / "agents", "alice", 'name = "Alice"\n')
        path = write_scene(tmp_path, SCENE + extra)
        with pytest.raises(ContentError) as exc:
            load_scene(str(path))
        assert one_line(exc).startswith(f"{path}: ") and where in str(exc.value)

    def test_a_seed_must_fit_a_save(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SCENE.replace("seed = 3", f"seed = {2**64}"))
        with pytest.raises(ContentError, match=r"\$\.seed"):
            load_scene(str(path))

    def test_an_agent_id_is_a_short_file_name(self, tmp_path: Path) -> None:
        """300 characters used to end in 'File name too long' mid-load; '../x' escaped agents/."""
        for bad in ("a" * 300, "../etc/passwd"):
            path = write_scene(tmp_path, SCENE.replace('cast = ["alice"]', f'cast = ["{bad}"]'))
            with pytest.raises(ContentError) as exc:
                load_scene(str(path))
            assert one_line(exc).startswith(f"{path}: ") and "$.cast[0]" in str(exc.value)

    def test_a_scene_name_too_long_for_the_system_is_one_line(self, tmp_path: Path) -> None:
        for name in ("s" * 300, str(tmp_path / ("s" * 300)) + ".toml"):
            with pytest.raises(ContentError) as exc:
                load_scene(name)
            assert "Traceback" not in one_line(exc)


class TestGate:
    """A rate the clock cannot resolve must not livelock the gate."""

    def test_a_rate_above_the_clock_resolution_still_admits(self) -> None:
        """At t = 1e6 s, 1/1e12 s is below the float resolution of the clock: the token
        head used to wake, refill nothing and sleep again forever, time standing still."""
        admitted: list[float] = []

        async def main() -> None:
            gate = Gate(size=2, rate=1e12, burst=1)
            await trio.sleep(1e6)
            with trio.fail_after(1):
                for _ in range(5):
                    permit = await gate.acquire()
                    admitted.append(trio.current_time())
                    permit.release()

        with wall_deadline(5):
            trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        assert len(admitted) == 5 and admitted[-1] - 1e6 < 1e-6

    @pytest.mark.parametrize("rate", [math.inf, math.nan, -1.0])
    def test_a_rate_it_cannot_serve_is_refused(self, rate: float) -> None:
        with pytest.raises(ValueError):
            Gate(size=1, rate=rate)


class TestTickInterval:
    """The interval spaces ticks; it neither trails the last one nor can be infinite."""

    def test_the_run_ends_with_its_last_tick(self) -> None:
        """--ticks 1 --tick-interval 12 used to wait out the 12 s after a 1.5 s tick."""
        engine = make_engine(fixed_scene((1.5,)))

        async def main() -> float:
            await engine.loop.run(2, 12.0)
            return trio.current_time()

        ended = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        assert ended == 12.0 + 1.5

    def test_the_driver_does_not_wait_after_its_last_tick(self) -> None:
        engine = make_engine(fixed_scene((1.5,)))

        async def main() -> float:
            await TickDriver(engine.loop, interval=12.0).run(ticks=2)
            return trio.current_time()

        assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == 12.0 + 1.5

    @pytest.mark.parametrize("interval", [math.inf, math.nan, -1.0])
    def test_an_interval_that_never_ends_is_refused(self, interval: float) -> None:
        engine = make_engine(fixed_scene((1.5,)))
        with wall_deadline(5), pytest.raises(ValueError):
            trio.run(engine.loop.run, 1, interval, clock=trio.testing.MockClock(autojump_threshold=0))
        with pytest.raises(ValueError):
            TickDriver(engine.loop, interval=interval)


class TestCommandLine:
    """The reported commands, end to end: one line, no traceback, no hang."""

    @pytest.mark.parametrize(
        ("argv", "says"),
        [
            (["run", "--ticks", "2", "--gate-rate", "inf"], "--gate-rate: bad value inf"),
            (["run", "--tick-interval", "inf"], "--tick-interval: bad value inf"),
            (["run", "--seed", str(2**64), "--save", "x.msav"], "--seed: bad value"),
            (["config", "--agents", "100000000"], "--agents: bad value 100000000"),
        ],
    )
    def test_a_value_out_of_bounds_exits_1_with_one_line(
        self, argv: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.chdir(tmp_path)
        with wall_deadline(20):
            assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("manor: error: command line: ") and says in err
        assert not (tmp_path / "x.msav").exists()

    def test_the_experiment_refuses_a_timeout_it_cannot_count(self) -> None:
        """--timeout 1e308 used to end in OverflowError (milliseconds overflow a float)."""
        done = manor_here("experiment", "bounded-wait", "--timeout", "1e308")
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--timeout: 1e308 is more than" in done.stderr
