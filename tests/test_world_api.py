"""The world API and structured answers: a world defined here and one loaded from a
module by ``module:Class`` (the example of docs/worlds.md), run, saved and replayed; shaped
answers validated, repaired and degraded as ``invalid_output``; every backend asked for
the shape in its own way, against a real server or process."""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx
import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from manor.answers import (
    InvalidAnswer,
    decode_answer,
    draw_answer,
    prompt_with_schema,
    response_format,
    response_schema,
    schema_in_prompt,
)
from manor.calls import Done, Event, Request, Started, Usage
from manor.cli import main
from manor.content import Scene
from manor.errors import ContentError
from manor.providers import Provider
from manor.providers.agno import AgnoProvider, HttpAgentTransport
from manor.providers.command import CommandProvider
from manor.providers.openai import OpenAIProvider
from manor.records import CallRecord, StoryEntry
from manor.worlds import Caller, GameOver, chain_hash, create_world, load_scene, start_hash
from manor.worlds.manor import ManorKeys

from agent_servers import serving
from scenes_fixture import fixed_scene, make_engine, run_engine

WORLDS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "worlds.md"


class Bounded(msgspec.Struct):
    """Fields bounded every way a ``Meta`` can bound them."""

    guess: Annotated[int, msgspec.Meta(ge=20)]
    below: Annotated[int, msgspec.Meta(lt=-5)]
    between: Annotated[int, msgspec.Meta(gt=3, le=4)]
    share: Annotated[float, msgspec.Meta(gt=0.5, lt=0.502)]
    far: Annotated[float, msgspec.Meta(ge=100.0)]
    negative: Annotated[float, msgspec.Meta(le=-2.0)]
    name: Annotated[str, msgspec.Meta(min_length=30, max_length=40)]
    short: Annotated[str, msgspec.Meta(max_length=3)]


class Pick(msgspec.Struct, frozen=True):
    """A test shape: a colour from a fixed set and an optional note."""

    colour: Literal["red", "green", "blue"]
    note: str | None = None


class Palette:
    """A world of this module: every character picks a colour each tick; the game ends
    when all picked the same one."""

    name, version = "palette", "2"
    callers = {"pick": Caller(fallback="shrugs", player=True)}

    def __init__(self, players: list[str], start: int) -> None:
        self.players = players
        self.tick, self.hash = 0, start_hash([players, start])
        self.picks: list[dict[str, str]] = []

    @classmethod
    def from_scene(cls, scene: Scene, rng: random.Random) -> Palette:
        return cls(list(scene.characters), rng.randrange(1000))

    def plan(self) -> list[Request]:
        return [Request(caller="pick", agent=p, tick=self.tick + 1, prompt=f"{p}, pick a colour.", shape=Pick) for p in self.players]

    def apply(self, records: Sequence[CallRecord]) -> list[StoryEntry]:
        self.tick += 1
        picks = {r.agent: decode_answer(r.text, Pick).colour for r in records if r.ok}
        self.picks.append(picks)
        self.hash = chain_hash(self.hash, sorted(picks.items()))
        return [
            StoryEntry(tick=self.tick, caller="pick", agent=r.agent, speaker=r.agent, text=picks.get(r.agent, ""),
                       fallback="" if r.ok else "shrugs", reason=r.reason)  # fmt: skip
            for r in records
        ]

    @property
    def over(self) -> GameOver | None:
        last = self.picks[-1] if self.picks else {}
        if len(last) == len(self.players) and len(set(last.values())) == 1:
            return GameOver(summary=f"all pick {next(iter(last.values()))}", result={"tick": self.tick})
        return None


def palette_scene(players: int = 3) -> Scene:
    scene = fixed_scene((1.0,) * players)
    return msgspec.structs.replace(scene, spec=msgspec.structs.replace(scene.spec, world=f"{__name__}:Palette"))


class Answering(Provider):
    """Answers each request with the next of ``answers`` for its agent (the last one
    over and over), after ``latency`` seconds; keeps every request it was given."""

    def __init__(self, answers: dict[str, list[str]], latency: float = 1.0) -> None:
        self.answers = {agent: list(texts) for agent, texts in answers.items()}
        self.latency = latency
        self.requests: list[Request] = []

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        self.requests.append(request)
        yield Started()
        await trio.sleep(self.latency)
        texts = self.answers.get(request.agent, ["fine"])
        text = texts.pop(0) if len(texts) > 1 else texts[0]
        yield Done(text=text, usage=Usage(input_tokens=3, output_tokens=len(text.split())))


class TestDecoding:
    def test_valid_json_of_the_shape_decodes_fenced_or_not(self) -> None:
        assert decode_answer('{"colour": "red"}', Pick) == Pick("red")
        assert decode_answer('```json\n{"colour": "blue", "note": "hm"}\n```', Pick) == Pick("blue", "hm")

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ('{"colour": "pink"}', "Invalid enum value 'pink' - at `$.colour`"),
            ('{"note": "x"}', "missing required field `colour`"),
            ('{"colour": "red"', "truncated"),
            ("I'd say red.", "malformed"),
            ('["red"]', "Expected `object`"),
        ],
    )
    def test_anything_else_is_invalid_with_msgspec_s_reason(self, text: str, problem: str) -> None:
        with pytest.raises(InvalidAnswer, match=re.escape(problem)):
            decode_answer(text, Pick)

    @given(st.integers(min_value=0, max_value=2**32))
    def test_a_drawn_answer_always_fits_its_shape(self, seed: int) -> None:
        text = draw_answer(Pick, random.Random(seed), ["a line"])
        assert decode_answer(text, Pick).colour in {"red", "green", "blue"}

    @given(st.integers(min_value=0, max_value=2**32))
    def test_a_drawn_answer_keeps_to_the_bounds_of_its_fields(self, seed: int) -> None:
        """Numbers and lengths bounded as a world's shapes bound them, from one side or
        both, inclusive or not: every draw decodes (none degrades as invalid_output)."""
        text = draw_answer(Bounded, random.Random(seed), ["a", "longer line"])
        assert isinstance(decode_answer(text, Bounded), Bounded)

    def test_a_schema_in_a_prompt_is_found_again(self) -> None:
        prompt = prompt_with_schema("pick one", Pick)
        assert prompt.startswith("pick one\n\n") and schema_in_prompt(prompt) == response_schema(Pick)
        assert schema_in_prompt(" ".join(prompt.split())) == response_schema(Pick)
        assert schema_in_prompt("pick one") is None
        assert prompt_with_schema("pick one", None) == "pick one"
        assert response_format(Pick) == {"type": "json_schema", "json_schema": {"name": "Pick", "schema": response_schema(Pick)}}


class TestRepairs:
    """An answer not of its shape: kept, counted as invalid_output, re-asked once."""

    def run(self, answers: dict[str, list[str]], ticks: int = 1, **settings: Any) -> tuple[list[Any], Answering]:
        backend = Answering(answers)
        engine = make_engine(palette_scene(2), backend=backend, **settings)
        return run_engine(engine, ticks), backend

    def test_a_bad_answer_is_repaired_by_a_second_call_through_the_gate(self) -> None:
        (record,), backend = self.run({"c0": ["I like red", '{"colour": "red"}'], "c1": ['{"colour": "red"}']})
        c0 = record.calls[0]
        assert (c0.ok, c0.text, c0.attempts, c0.repairs) == (True, '{"colour": "red"}', 2, 1)
        repair = backend.requests[-1]
        assert repair.agent == "c0" and repair.attempt == 1 and repair.ticket is not None
        assert "It was: I like red" in repair.prompt and "malformed" in repair.prompt
        assert c0.admitted_at == 1.0 and c0.finished_at == 2.0  # after the tick's calls ended
        assert record.makespan == 2.0

    def test_no_repairs_leave_it_degraded_with_its_text_and_reason(self) -> None:
        (record,), backend = self.run({"c0": ['{"colour": "pink"}'], "c1": ['{"colour": "red"}']}, call_repair_attempts=0)
        c0 = record.calls[0]
        assert (c0.outcome, c0.reason, c0.text, c0.repairs, c0.output_tokens) == ("degraded", "invalid_output", '{"colour": "pink"}', 0, 2)
        assert "$.colour" in c0.error
        assert len(backend.requests) == 2

    def test_repairs_stop_at_their_number(self) -> None:
        (record,), backend = self.run({"c0": ["no"], "c1": ['{"colour": "red"}']}, call_repair_attempts=3)
        c0 = record.calls[0]
        assert (c0.reason, c0.attempts, c0.repairs) == ("invalid_output", 4, 3)
        assert len(backend.requests) == 5

    def test_a_free_text_request_is_never_validated(self) -> None:
        backend = Answering({"c0": ["not json at all"]})
        engine = make_engine(fixed_scene((1.0,)), backend=backend)
        (record,) = run_engine(engine, 1)
        assert all(call.ok for call in record.calls)


class TestSimulator:
    def test_answers_shapes_validly_and_the_same_every_time(self) -> None:
        first = make_engine(palette_scene())
        second = make_engine(palette_scene())
        texts = [[c.text for r in run_engine(e, 5) for c in r.calls] for e in (first, second)]
        assert texts[0] == texts[1]
        assert all(decode_answer(text, Pick) for text in texts[0])

    def test_invalid_rate_exercises_the_repairs(self) -> None:
        engine = make_engine(palette_scene(6), sim_invalid_rate=0.5)
        records = run_engine(engine, 10)
        calls = [c for r in records for c in r.calls]
        assert any(c.repairs and c.ok for c in calls)
        assert any(c.reason == "invalid_output" for c in calls)
        assert all(decode_answer(c.text, Pick) for c in calls if c.ok)

    def test_a_request_without_a_shape_draws_the_same_answers_at_any_invalid_rate(self) -> None:
        texts = []
        for rate in (0.0, 0.9):
            texts.append([c.text for r in run_engine(make_engine(fixed_scene((1.0, 2.0)), sim_invalid_rate=rate), 3) for c in r.calls])
        assert texts[0] == texts[1]


def documented_example(tmp_path: Path) -> Path:
    """The ``guessing.py`` and ``guessing.toml`` of docs/worlds.md written to
    ``tmp_path``; the scene's path."""
    page = WORLDS_PAGE.read_text(encoding="utf-8")
    code = re.search(r"```python file=guessing\.py\n(.*?)```", page, re.S)
    scene = re.search(r"```toml file=guessing\.toml\n(.*?)```", page, re.S)
    assert code and scene, "docs/worlds.md lost its example"
    (tmp_path / "guessing.py").write_text(code.group(1), encoding="utf-8")
    (tmp_path / "guessing.toml").write_text(scene.group(1), encoding="utf-8")
    return tmp_path / "guessing.toml"


class TestUserWorld:
    """A world imported by ``module:Class``: the example of docs/worlds.md, as a user runs it."""

    @pytest.fixture(autouse=True)
    def fresh_import(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.chdir(tmp_path)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delitem(sys.modules, "guessing", raising=False)

    def test_runs_to_its_end_saves_and_replays(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        scene = documented_example(tmp_path)
        save = tmp_path / "g.msav"
        assert main(["run", "--scene", str(scene), "--ticks", "50", "--save", str(save), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["world"]["over"] and summary["world"]["name"] == "guessing"
        assert summary["ticks"] < 50 and summary["degraded"] == 0
        assert list(summary["degradations"]) == ["guess"]
        assert main(["replay", str(save), "--verify", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["verified"] is True

    def test_repaired_answers_are_counted_saved_and_replayed(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        scene = documented_example(tmp_path)
        save = tmp_path / "g.msav"
        monkeypatch.setenv("MANOR_SIM_INVALID_RATE", "0.5")
        assert main(["run", "--scene", str(scene), "--ticks", "50", "--save", str(save), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["repairs"]["asked"] > 0
        assert summary["repairs"]["asked"] >= summary["repairs"]["repaired"] > 0
        assert summary["degradations"]["guess"]["invalid_output"] == summary["degraded"] > 0
        assert main(["replay", str(save), "--verify", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["verified"] is True
        assert main(["replay", str(save), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["repairs"] == summary["repairs"]

    def test_a_world_and_scene_from_before_scene_keys_still_run(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The example as it was written before worlds had keys of their own: no
        ``scene_keys``, and a scene naming its rooms (every scene had to). It takes the
        manor's keys, loads its narrator and summariser as before, runs and replays."""
        scene = documented_example(tmp_path)
        module = tmp_path / "guessing.py"
        module.write_text(module.read_text().replace("    scene_keys = SceneKeys  # no keys of its own: the cast is all it needs\n", ""))
        scene.write_text(scene.read_text().replace("seed = 7\n", 'seed = 7\nrooms = ["parlour"]\n'))
        assert "scene_keys" not in module.read_text() and "rooms" in scene.read_text()
        loaded = load_scene(str(scene))
        assert loaded.keys(ManorKeys).rooms == ("parlour",) and list(loaded.others) == ["narrator", "summariser"]
        save = tmp_path / "g.msav"
        assert main(["run", "--scene", str(scene), "--ticks", "50", "--save", str(save), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["world"]["over"]
        assert main(["replay", str(save), "--verify"]) == 0

    def test_the_example_needs_no_rooms(self, tmp_path: Path) -> None:
        """It declares ``scene_keys = SceneKeys``: no key of its own, so a key of the
        manor's is refused by name."""
        scene = documented_example(tmp_path)
        assert load_scene(str(scene)).spec.world_keys == {} and "rooms" not in scene.read_text()
        scene.write_text(scene.read_text() + 'rooms = ["parlour"]\n')
        with pytest.raises(ContentError, match="unknown field `rooms`"):
            load_scene(str(scene))

    def test_a_world_that_cannot_be_found_is_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        scene = documented_example(tmp_path)
        scene.write_text(scene.read_text().replace("guessing:Guessing", "guessing:Nope"))
        assert main(["run", "--scene", str(scene)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "guessing has no class Nope" in err

    def test_a_save_of_another_version_of_the_world_is_refused(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        scene = documented_example(tmp_path)
        save = tmp_path / "g.msav"
        assert main(["run", "--scene", str(scene), "--save", str(save)]) == 0
        module = tmp_path / "guessing.py"
        module.write_text(module.read_text().replace('"guessing", "1"', '"guessing", "2"'))
        del sys.modules["guessing"]
        capsys.readouterr()
        assert main(["replay", str(save), "--verify"]) != 0
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "version" in err and "guessing" in err


def test_a_world_of_a_test_module_runs_through_the_engine() -> None:
    world = create_world(palette_scene(), seed=1)
    assert isinstance(world, Palette)
    records = run_engine(make_engine(palette_scene()), 40)
    assert all(c.caller == "pick" for r in records for c in r.calls)


def test_a_world_that_refuses_its_scene_is_a_content_error() -> None:
    scene = palette_scene()
    scene = msgspec.structs.replace(scene, spec=msgspec.structs.replace(scene.spec, world="no_such_module_here:World"))
    with pytest.raises(ContentError, match="cannot import no_such_module_here"):
        create_world(scene, seed=0)


class TestBackendsAskForTheShape:
    """Each real backend asks for JSON of the shape its own way; a real server or
    process answers it, and the answer validates."""

    REQUEST = Request(caller="pick", agent="agent", prompt="pick a colour", shape=Pick)

    @staticmethod
    async def text_of(provider: Provider) -> str:
        events = [event async for event in provider.invoke(TestBackendsAskForTheShape.REQUEST)]
        assert isinstance(events[-1], Done)
        return events[-1].text

    @pytest.mark.trio
    async def test_openai_sends_response_format(self) -> None:
        bodies: list[dict[str, Any]] = []

        async def keep(request: httpx.Request) -> None:
            bodies.append(json.loads(request.content))

        async with serving() as (url, _), httpx.AsyncClient(event_hooks={"request": [keep]}) as client:
            text = await self.text_of(OpenAIProvider(f"{url}/v1", model="agent", client=client))
        (body,) = bodies
        assert body["response_format"] == response_format(Pick)
        assert body["messages"][-1]["content"] == "pick a colour"  # the schema is not in the prompt
        assert decode_answer(text, Pick)

    @pytest.mark.trio
    async def test_agno_puts_the_schema_in_the_message(self) -> None:
        async with serving() as (url, _):
            text = await self.text_of(AgnoProvider(HttpAgentTransport(url), "agent"))
        assert decode_answer(text, Pick)

    @pytest.mark.trio
    async def test_command_puts_the_schema_on_stdin(self) -> None:
        model = (
            "import random, sys\n"
            "from manor.answers import draw_from_schema, schema_in_prompt\n"
            "print(draw_from_schema(schema_in_prompt(sys.stdin.read()), random.Random(0), ['x']))\n"
        )
        text = await self.text_of(CommandProvider([sys.executable, "-c", model]))
        assert decode_answer(text, Pick)

    @pytest.mark.trio
    async def test_openai_without_a_shape_sends_no_response_format(self) -> None:
        async with serving() as (url, _):
            provider = OpenAIProvider(f"{url}/v1", model="agent")
            events = [e async for e in provider.invoke(Request(caller="pick", agent="agent", prompt="hello"))]
        assert isinstance(events[-1], Done) and events[-1].text == "agent heard: hello"
