"""Hostile input through every loader: scene and agent files, manor.toml, ``MANOR_*``
variables, flags, and crafted saves with good checksums.

The property: whatever the input, the outcome is a clean result or ONE ``ManorError``
whose message is a single line — never another exception, never a hang. What loads is
also run (or replayed) for two ticks under the virtual clock, bounded in virtual time
(``trio.fail_after``) and in real time (``wall_deadline``: a livelock stops virtual time).
"""

from __future__ import annotations

import contextlib
import io
import math
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from deadline import wall_deadline
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st
from saves_fixture import (
    Edit,
    change_edit,
    record,
    rewrite_payloads,
    scene_edit,
    setting_edit,
)
from strategies import (
    hostile_scalars,
    hostile_values,
    mutated_documents,
    plausible_values,
    to_toml,
)

from manor.cli import main
from manor.cli.options import SETTING_FLAGS
from manor.config import KEYS, flags_source, resolve, standard_sources
from manor.config.layering import built_in_source, layer_defaults_source
from manor.config.schema import defaults
from manor.content import content_dir
from manor.errors import ManorError
from manor.replay import replay
from manor.run.engine import Engine, build_engine, configure, scene_sim
from manor.saves import decode_save
from manor.saves.format import LIVE_KEYS
from manor.worlds import load_scene

_SETTINGS = settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: Virtual seconds two ticks may take: every call is bounded by the call and gate
#: timeouts, the interval by a week.
_VIRTUAL_BOUND = 3 * 7 * 24 * 3600.0
#: Beyond this many characters a run is valid but slow: the tests load it, not run it.
_RUN_AT_MOST = 100

_SCENE = "tea_party"


def outcome(step: str, load: Callable[[], Any]) -> Any:
    """``load()``, or ``None`` if it raised one ``ManorError`` of a single line; ``step``
    names it in Hypothesis's statistics."""
    try:
        result = load()
    except ManorError as exc:
        message = str(exc)
        assert message and "\n" not in message and "\r" not in message, message
        event(f"{step}: refused ({type(exc).__name__})")
        return None
    event(f"{step}: accepted")
    return result


def run_two_ticks(engine: Engine) -> None:
    """Two ticks under the virtual clock; the interval as configured."""

    async def main() -> None:
        with trio.fail_after(_VIRTUAL_BOUND):
            await engine.loop.run(2, engine.config.settings.run.tick_interval_s)

    with wall_deadline(20):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- scene and agent files --------------------------------------------------------------


def _real(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


_SCENE_DOC = _real(content_dir("scenes") / f"{_SCENE}.toml")
_AGENT_IDS = (*_SCENE_DOC["cast"], _SCENE_DOC["narrator"], _SCENE_DOC["summariser"])
_AGENT_DOCS = {agent_id: _real(content_dir("agents") / f"{agent_id}.toml") for agent_id in _AGENT_IDS}


@st.composite
def content_trees(draw: st.DrawFn) -> dict[str, str]:
    """A scene and its agent files (relative path -> TOML text): the real tea party with
    hostile edits in the scene, in some agent files, or both."""
    scene = draw(st.one_of(st.just(_SCENE_DOC), mutated_documents(_SCENE_DOC, max_mutations=2)))
    altered = draw(st.sets(st.sampled_from(_AGENT_IDS), max_size=2, min_size=0 if scene is not _SCENE_DOC else 1))
    files = {"scenes/scene.toml": to_toml(scene)}
    for agent_id, doc in _AGENT_DOCS.items():
        files[f"agents/{agent_id}.toml"] = to_toml(draw(mutated_documents(doc, max_mutations=2)) if agent_id in altered else doc)
    return files


@_SETTINGS
@given(files=content_trees())
def test_hostile_scene_and_agent_files(files: dict[str, str]) -> None:
    """A scene that loads also runs two ticks; one that does not says why in one line."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, text in files.items():
            (root / name).parent.mkdir(exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        scene = outcome("load_scene", lambda: load_scene(str(root / "scenes/scene.toml")))
    if scene is None:
        return
    config = resolve([built_in_source(), layer_defaults_source()])
    run_two_ticks(build_engine(config, scene, backend=scene_sim(config, scene)))


# -- manor.toml, MANOR_*, flags ----------------------------------------------------------


def _config_doc() -> dict[str, Any]:
    """A manor.toml that sets every key to its default (TOML has no null: unset ones left out)."""
    doc: dict[str, dict[str, Any]] = {}
    for key, value in defaults().items():
        if value is not None:
            section, field = key.split(".")
            doc.setdefault(section, {})[field] = value
    doc["run"]["scene"] = _SCENE
    return doc


_CONFIG_DOC = _config_doc()
_FLAG_VALUES: dict[type, st.SearchStrategy[Any]] = {
    int: st.one_of(st.integers(0, 12), st.integers(-(2**70), 2**70), st.sampled_from([0, 1, 2**64, 100_001, 10**9 + 1])),
    float: st.one_of(st.floats(0, 10), st.floats(), st.sampled_from([math.inf, 1e17, -1.4, 1e308])),
}


@st.composite
def flag_values(draw: st.DrawFn) -> dict[str, Any]:
    """Flags as argparse hands them over: the flag's own type, any value of it."""
    keys = draw(st.lists(st.sampled_from(sorted(SETTING_FLAGS)), max_size=2, unique=True))
    values = {}
    for key in keys:
        flag = SETTING_FLAGS[key]
        kind = flag.type if flag.type in (int, str) else float
        values[key] = draw(st.sampled_from(flag.choices) if flag.choices else _FLAG_VALUES.get(kind, st.text(max_size=20)))
    values.pop("run.scene", None)  # a scene path from a flag is the content test's business
    values.pop("backend.default", None)
    return values


@st.composite
def environments(draw: st.DrawFn) -> dict[str, str]:
    """A few ``MANOR_*`` variables, each holding a hostile value's text."""
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    return {"MANOR_" + key.replace(".", "_").upper(): str(draw(hostile_scalars | plausible_values)) for key in keys}


@_SETTINGS
@given(doc=mutated_documents(_CONFIG_DOC, max_mutations=2), environ=environments(), flags=flag_values())
def test_hostile_config_from_every_source(doc: dict[str, Any], environ: dict[str, str], flags: dict[str, Any]) -> None:
    """What resolves also builds an engine that runs two ticks (on the simulated backend:
    a hostile backend table must not send the test to the network)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "manor.toml"
        path.write_text(to_toml(doc), encoding="utf-8")
        sources = outcome("sources", lambda: standard_sources(flags=flags_source(flags, {}), config_path=path, environ=environ))
    if sources is None:
        return
    settled = outcome("resolve", lambda: resolve(sources))
    if settled is None or (settled.settings.run.agents or 0) > _RUN_AT_MOST:
        return
    loaded = outcome("configure", lambda: configure(sources))
    if loaded is None:
        return
    config, scene = loaded
    run_two_ticks(build_engine(config, scene, backend=scene_sim(config, scene)))


_FLAG_TEXTS = st.one_of(
    st.sampled_from(["inf", "-inf", "nan", "1e400", "1e308", "-1", "0", "18446744073709551616", "1e17", "0x10", "", "{"]),
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12),
)


@_SETTINGS
@given(flag=st.sampled_from(sorted(flag.flag for flag in SETTING_FLAGS.values())), text=_FLAG_TEXTS)
def test_hostile_flag_text_through_the_command_line(flag: str, text: str) -> None:
    """``manor config FLAG=TEXT`` as a shell hands it over: exit 0, or 1 (a refused
    value) or 2 (argparse) with one line on stderr and no traceback."""
    out, err = io.StringIO(), io.StringIO()
    with wall_deadline(20), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["config", "--json", f"{flag}={text}"])
        except SystemExit as exit_:
            code = exit_.code
    event(f"manor config: exit {code}")
    assert code in (0, 1, 2)
    if code:
        assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue(), err.getvalue()


# -- crafted saves -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_save(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """Three ticks of the tea party, finished."""
    path = tmp_path_factory.mktemp("crafted") / "small.msav"
    record(path, run__scene=_SCENE, run__ticks=3)
    return path.read_bytes()


@st.composite
def crafted_edits(draw: st.DrawFn) -> Edit:
    """One edit of a save's decoded frames: a recorded setting, a live change, or a
    value in the saved scene, set to a hostile value (or a good key's good value)."""
    value = draw(st.one_of(hostile_values, plausible_values, st.none()))
    what = draw(st.sampled_from(["setting", "change", "scene"]))
    if what == "setting":
        return setting_edit(draw(st.sampled_from(KEYS)), value)
    if what == "change":
        change = [
            draw(st.one_of(st.sampled_from(LIVE_KEYS), st.sampled_from(KEYS))),
            draw(st.one_of(st.just(value), st.integers(1, 6), st.sampled_from(["pipeline", "batch", "legacy"]))),
            draw(st.one_of(st.none(), st.floats(), st.floats(0, 30))),
        ]
        return change_edit(draw(st.integers(1, 3)), change)
    return scene_edit(draw(st.sampled_from(_scene_places())), value)


def _scene_places() -> list[tuple[Any, ...]]:
    """Paths to the values of a saved scene that a crafted save might change."""
    spec = ["seed", "platform_limit", "cast"]
    keys = ["rooms", "narrator", "summariser"]
    beats = ["per_tick", "speakers", "prompts"]
    sim = ["latency_s", "jitter", "lines"]
    return [
        *(("spec", key) for key in spec),
        *(("spec", "world_keys", key) for key in keys),
        *(("spec", "world_keys", "beats", key) for key in beats),
        *(("characters", "hobbes", "sim", key) for key in sim),
        *(("others", "narrator", "sim", key) for key in sim),
        ("characters", "hobbes", "name"),
    ]


@_SETTINGS
@given(edits=st.lists(crafted_edits(), min_size=1, max_size=2))
def test_crafted_save_values_are_refused_or_replay(small_save: bytes, edits: list[Edit]) -> None:
    """A crafted save that is read also replays, ending (matching or not) within bounds."""

    def edit_all(index: int, frame: Any) -> Any:
        for edit in edits:
            frame = edit(index, frame)
        return frame

    try:
        data = rewrite_payloads(small_save, edit_all)
    except OverflowError:
        reject()  # an integer past 64 bits: no save can hold it (the settings tests cover it)
    save = outcome("decode_save", lambda: decode_save(data, "crafted.msav"))
    if save is None:
        return
    with wall_deadline(20):
        outcome("replay", lambda: replay(save))


def test_the_unaltered_files_run(small_save: bytes) -> None:
    """The mutations start from files that work (so that refusing them means something)."""
    assert load_scene(_SCENE).characters
    assert msgspec.convert(_CONFIG_DOC["gate"], dict)
    assert replay(decode_save(small_save, "small.msav")).verified
