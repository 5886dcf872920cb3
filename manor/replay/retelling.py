"""A save's story, told again: the world rebuilt from the recorded calls, tick by tick, and
written out as Markdown, plain text or JSON Lines (``manor story``).

A save holds the calls, not the story: the story is what the world makes of them, so it is
rebuilt by applying each recorded tick to a fresh world — no call is made, no time passes.

Markdown is for reading: as in the dashboard, a tick's alike degraded turns (same caller
kind, fallback, reason and message), ``FOLD_AT`` or more, are one line naming every caller
(``manor.folds``). Text and JSON Lines keep a line per entry, for tools.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

import attrs
import msgspec

from ..callers import Caller, caller_of
from ..errors import SaveError
from ..folds import Fold, fold_story
from ..output import STORY_FORMATS, write_output
from ..records import StoryEntry
from ..saves.reader import Save
from ..worlds import create_world, world_class
from ..worlds.failures import world_code
from .checking import unplanned_calls
from .recorded import check_world

__all__ = ["FORMATS", "StoryLine", "story_lines", "story_text", "write_story"]

#: The formats ``manor story`` writes.
FORMATS = STORY_FORMATS
Format = Literal["md", "txt", "jsonl"]


@attrs.frozen
class StoryLine:
    """A story entry, and what failed when its call degraded."""

    entry: StoryEntry
    error: str = ""


class _JsonLine(msgspec.Struct, kw_only=True):
    tick: int
    caller: str
    agent: str
    speaker: str
    text: str
    fallback: str
    reason: str | None
    error: str


def story_lines(save: Save) -> Iterator[StoryLine]:
    """Every line of ``save``'s story, in order.

    Raises:
        SaveError: a tick does not hold the calls its world planned, or does not
            rebuild the world the recording had after it (the save was altered, or this
            Manor's world has other rules): its story would not be the recorded run's.
    """
    check_world(save)
    world = create_world(save.scene, save.header.seed)
    for frame in save.ticks:
        record = frame.record
        with world_code(world, "plan", record.tick):
            planned = world.plan()
        if difference := unplanned_calls(planned, record.calls):
            raise SaveError(f"{save.name}: tick {record.tick} does not hold the calls its world planned ({difference}); its story cannot be told")
        with world_code(world, "apply", record.tick):
            entries = world.apply(record.calls)
        if world.hash != record.world_hash:
            raise SaveError(f"{save.name}: tick {record.tick} does not rebuild the recorded world; its story cannot be told")
        # A degraded turn's entry gets its call's error: the entries of one caller and
        # agent come in the order of their calls (a world may add entries of its own).
        errors: dict[tuple[str, str], deque[str]] = {}
        for call in record.calls:
            if not call.ok:
                errors.setdefault((call.caller, call.agent), deque()).append(call.error)
        for entry in entries:
            waiting = errors.get((entry.caller, entry.agent)) if entry.fallback else None
            yield StoryLine(entry, waiting.popleft() if waiting else "")


def story_text(save: Save, lines: Sequence[StoryLine], format: Format) -> str:
    """``lines`` (``story_lines(save)``) in ``format``; the scene's name heads the
    Markdown, and the world's callers (``World.callers``) say how each kind is told."""
    callers = world_class(save.scene.spec.world).callers
    if format == "jsonl":
        encoder = msgspec.json.Encoder()
        return "".join(encoder.encode(_json(line)).decode() + "\n" for line in lines)
    if format == "txt":
        return "".join(f"{line.entry.tick:>4} {_said(line, callers)}\n" for line in lines)
    out = [f"# {save.scene.spec.name}\n"]
    tick = 0
    for item in fold_story(lines, lambda line: line.entry, callers, key=lambda line: line.error):
        line = item.items[0] if isinstance(item, Fold) else item
        if line.entry.tick != tick:
            tick = line.entry.tick
            out.append(f"\n## Tick {tick}\n\n")
        out.append(f"- {_folded(item) if isinstance(item, Fold) else _said(line, callers, markdown=True)}\n")
    return "".join(out)


def _said(line: StoryLine, callers: Mapping[str, Caller], *, markdown: bool = False) -> str:
    entry = line.entry
    who = f"**{entry.speaker}**" if markdown else entry.speaker
    caller = caller_of(callers, entry.caller)
    beat = f"{caller.label} · " if caller.style == "aside" else ""
    if not entry.fallback:
        return f"{beat}{who}: {entry.text}"
    why = f"{entry.reason}: {line.error}" if line.error else f"{entry.reason}"
    said = f"{beat}{who}: ⚠ {entry.fallback} ({why})"
    return f"_{said}_" if markdown else said


def _folded(fold: Fold[StoryLine]) -> str:
    """A Markdown line for many alike degraded turns, naming every one."""
    first = fold.items[0]
    why = f"{first.entry.reason}: {first.error}" if first.error else f"{first.entry.reason}"
    names = ", ".join(line.entry.speaker for line in fold.items)
    return f"_⚠ {fold.says} ({why}) — {names}_"


def _json(line: StoryLine) -> _JsonLine:
    entry = line.entry
    return _JsonLine(
        tick=entry.tick, caller=entry.caller, agent=entry.agent, speaker=entry.speaker, text=entry.text,
        fallback=entry.fallback, reason=entry.reason, error=line.error,
    )  # fmt: skip


def write_story(save: Save, format: Format, path: str) -> int:
    """Write the story of ``save`` to ``path`` (replacing it, see ``manor.output``);
    return how many lines it has.

    Raises:
        SaveError: the story cannot be rebuilt, or the file cannot be written.
    """
    lines = list(story_lines(save))
    try:
        write_output(path, story_text(save, lines, format))
    except BrokenPipeError:
        raise  # a reader that stopped early (``| head``): no error, see manor.cli.main
    except OSError as exc:
        raise SaveError(f"{path}: cannot write the story: {exc.strerror or exc}") from None
    return len(lines)
