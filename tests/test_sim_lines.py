"""The simulator's words: every line template, filled in with every mood and every
scene's rooms, reads as English; ``{room}`` is one of the scene's rooms; a summary
gists what was observed, never its prompt's instruction."""

from __future__ import annotations

import re
import string
import threading
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manor.config.layering import built_in_source, flags_source, layer_defaults_source
from manor.content import content_dir
from manor.calls import Request
from manor.providers.sim import GENERIC_LINES, MOODS, NARRATOR_LINES, OBJECTS, PLACEHOLDERS, ROOMS, SimProfile, SimProvider, _by_place, _summary
from manor.run.engine import configure, scene_sim
from manor.worlds import load_scene, scene_keys, world_class

_ARTICLES = {"a", "an", "the"}
_LINKING = {"am", "is", "are", "was", "were", "be", "looks", "seems"}
_VOWEL = re.compile(r"[aeiou]", re.IGNORECASE)


def _agent_lines() -> dict[str, tuple[str, ...]]:
    """Every bundled agent file's line templates, by file."""
    lines = {}
    for path in sorted(content_dir("agents").glob("*.toml")):
        sim = tomllib.loads(path.read_text()).get("sim", {})
        lines[path.name] = tuple(sim.get("lines", ()))
    return lines


def _scene_rooms() -> tuple[str, ...]:
    """Every bundled scene's rooms (its world's places) and the simulator's own."""
    rooms = set(ROOMS)
    for path in content_dir("scenes").glob("*.toml"):
        scene = load_scene(str(path))
        rooms.update(scene.keys(scene_keys(world_class(scene.spec.world))).places())
    return tuple(sorted(rooms))


def _names() -> tuple[str, ...]:
    return tuple(tomllib.loads(path.read_text())["name"] for path in sorted(content_dir("agents").glob("*.toml")))


def _each(template: str, field: str, words: tuple[str, ...]) -> tuple[str, ...]:
    """The ``words`` worth trying for ``{field}`` in ``template``: all of them where it
    takes the field, else one (the line reads the same whichever)."""
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    return words if field in fields else words[:1]


def reading_problem(template: str, mood: str, room: str, obj: str, someone: str) -> str | None:
    """What does not read as English in ``template`` filled in, or ``None``: an article
    before the adverb ``{mood}`` ("a gloomily hush") or ``{mood}`` where an adjective
    belongs ("is gloomily.", "gloomily as anything"), "a" before a vowel or "an"
    before a consonant, a word doubled, a word missing (two spaces, a space before
    punctuation, a field left empty)."""
    line = template.format(mood=mood, room=room, object=obj, someone=someone)
    if "  " in line or re.search(r" [.,;:!?]", line) or line != line.strip():
        return f"a word missing: {line!r}"
    words = re.findall(r"[\w'-]+|[.,;:!?]", line)
    lowered = [word.lower() for word in words]
    for i, word in enumerate(lowered):
        after = lowered[i + 1] if i + 1 < len(lowered) else ""
        before = lowered[i - 1] if i else ""
        if word == after and word.isalpha():
            return f"{word!r} doubled: {line!r}"
        if word == mood:
            if before in _ARTICLES:
                return f"an article before the adverb {mood!r}: {line!r}"
            if after == "as" or (before in _LINKING and after in {"", ".", ",", "!", "?", ";"}):
                return f"the adverb {mood!r} where an adjective belongs: {line!r}"
        if word == "a" and _VOWEL.match(after) and after != mood:
            return f"'a' before a vowel: {line!r}"
        if word == "an" and after and not _VOWEL.match(after):
            return f"'an' before a consonant: {line!r}"
    return None


class TestTheLinesReadAsEnglish:
    @pytest.mark.parametrize(
        "template",
        ["It is a {mood} hush.", "Ooh, {mood} as anything.", "The {room} is {mood}.", "The the {object}.", "I saw {someone}  go.",
         "Fetch an {object}.", "The {object} , again."],
    )  # fmt: skip
    def test_the_check_refuses_what_does_not_read(self, template: str) -> None:
        assert reading_problem(template, "gloomily", "hall", "teapot", "Hobbes") is not None

    def test_every_template_with_every_word(self) -> None:
        templates = {"simulator": GENERIC_LINES + NARRATOR_LINES, **_agent_lines()}
        rooms, names = _scene_rooms(), _names()
        problems = {
            f"{where}: {problem}"
            for where, lines in templates.items()
            for template in lines
            # Every mood always (the check reads the mood even where the line has none);
            # the other words only where the template takes them: elsewhere each gives
            # the same line, so the same verdict, and the product was seconds of CPU.
            for mood in MOODS
            for room in _each(template, "room", rooms)
            for obj in _each(template, "object", OBJECTS)
            for someone in _each(template, "someone", names)
            if (problem := reading_problem(template, mood, room, obj, someone))
        }
        assert not problems, sorted(problems)[:10]


class TestRooms:
    def test_a_line_names_the_scenes_rooms(self) -> None:
        """``{room}`` is one of the scene's rooms (tea_party has two), not the
        simulator's own eight."""
        config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.scene": "tea_party"}, {})])
        sim = scene_sim(config, scene)
        assert sim.rooms == ("conservatory", "garden")

    def test_without_places_the_simulator_draws_its_own(self) -> None:
        assert SimProvider(default=SimProfile(lines=("{room}",))).rooms == ROOMS
        config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.scene": "werewolf_village"}, {})])
        assert scene_sim(config, scene).rooms == ROOMS


class TestSomeone:
    def test_a_character_never_names_itself_and_the_other_draws_stay(self) -> None:
        """``{someone}`` is never the speaker ("Polly: Don't tell Polly, but ..."): drawn
        as the next name instead, so the draws after it are those of before."""
        names = {"polly": "Polly", "hobbes": "Hobbes", "vera": "Countess Vera"}
        sim = SimProvider({agent: SimProfile(lines=("{someone}|{object}",)) for agent in names}, seed=3, names=names)
        said = {agent: {sim._text(Request(caller="character", agent=agent, tick=tick, prompt=""), sim.profiles[agent], sim._rng) for tick in range(200)} for agent in names}
        for agent, lines in said.items():
            someone = {line.split("|")[0] for line in lines}
            assert names[agent] not in someone
            assert someone == set(names.values()) - {names[agent]}
        # The draw after ``{someone}`` is the one an unchecked draw would give.
        rng = sim._rng
        rng.seed("x")
        _ = (rng.choice(("{someone}",)), rng.choice(OBJECTS), rng.choice(sim.rooms), rng.choice(MOODS), rng.choice(tuple(names.values())))
        unchecked = (None, rng.random())
        rng.seed("x")
        sim._line(("{someone}",), sim._rng, "polly")
        assert sim._rng.random() == unchecked[1]

    def test_a_cast_of_one_names_itself_rather_than_nobody(self) -> None:
        sim = SimProvider({"solo": SimProfile(lines=("{someone}",))}, names={"solo": "Solo"})
        assert sim._line(("{someone}",), sim._rng, "solo") == "Solo"


class TestGenerator:
    def test_simulators_of_a_thread_share_one_generator_and_never_see_each_others_draws(self) -> None:
        """Every simulator of a thread draws from one generator (a fleet's 256 would
        otherwise keep 256 generators' state hot), seeded again for every draw: what one
        draws is the same whatever the others draw in between."""
        profiles = {"hobbes": SimProfile(latency_s=1.0, jitter=0.4), "vera": SimProfile(latency_s=2.0, jitter=0.2)}
        first, second = SimProvider(profiles, seed=1), SimProvider(profiles, seed=2)
        assert first._rng is second._rng
        requests = [Request(caller="character", agent=agent, tick=tick, prompt="") for tick in range(6) for agent in profiles]
        alone = [first._draw(request) for request in requests]
        between = []
        for request in requests:
            between.append(first._draw(request))
            second._draw(request)
        assert between == alone
        assert alone != [second._draw(request) for request in requests]

    def test_each_thread_has_its_own_generator(self) -> None:
        sim = SimProvider({"hobbes": SimProfile()})
        other: list[object] = []
        thread = threading.Thread(target=lambda: other.append(sim._rng))
        thread.start()
        thread.join()
        assert other[0] is not sim._rng


class TestSummary:
    def test_nothing_observed_yet(self) -> None:
        """The first tick's summariser has seen nothing: it says so, not its instruction."""
        assert _summary("Summarise what was observed:\n") == "So far: nothing of note has happened."

    def test_the_gist_of_the_observations(self) -> None:
        prompt = "Summarise what was observed:\nHobbes: The teapot is in the hall.\nPolly: I dusted the attic."
        assert _summary(prompt) == "So far: Hobbes: The teapot is in the hall; Polly: I dusted the attic."

    def test_after_the_last_heading(self) -> None:
        """Werewolf's summariser: the record so far, then a heading, then what happened."""
        prompt = "Keep the public record. The record so far: (empty)\nWhat happened since:\nBram: Vote with me."
        assert _summary(prompt) == "So far: Bram: Vote with me."


# A template's pieces: text (braces doubled, as a literal brace is written), a field with
# or without a format spec or conversion, and what a template must not name.
_FIELD = st.builds(
    lambda name, conversion, spec: "{" + name + conversion + spec + "}",
    st.sampled_from(PLACEHOLDERS),
    st.sampled_from(["", "!r", "!s", "!a"]),
    st.sampled_from(["", ":>12", ":^9", ":.3", ":*<7", ":"]),
)
_TEXT = st.text(st.sampled_from("ab .{}"), max_size=6).map(lambda text: text.replace("{", "{{").replace("}", "}}"))
_UNKNOWN = st.sampled_from(["{}", "{0}", "{butler}", "{object.upper}", "{mood[0]}", "{room:{mood}}", "{", "}"])


class TestFilledInByPlace:
    @given(pieces=st.lists(st.one_of(_FIELD, _TEXT), max_size=8), words=st.tuples(*[st.text(max_size=5)] * 4))
    def test_the_same_line_as_by_name(self, pieces: list[str], words: tuple[str, str, str, str]) -> None:
        """``_line`` fills a template in by its fields' places: the same line, every
        field's spec and conversion kept, every literal brace."""
        template = "".join(pieces)
        by_place = _by_place(template)
        assert by_place is not None
        assert by_place.format(*words) == template.format(**dict(zip(PLACEHOLDERS, words)))

    @given(before=_TEXT, unknown=_UNKNOWN, after=st.lists(st.one_of(_FIELD, _TEXT), max_size=3))
    def test_a_template_line_problem_refuses_is_filled_in_by_name(self, before: str, unknown: str, after: list[str]) -> None:
        """A template nobody checked (a ``SimProfile`` made in code) is filled in by name, as
        before: it fails, or not, as it always did."""
        assert _by_place(before + unknown + "".join(after)) is None
