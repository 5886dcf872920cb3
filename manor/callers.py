"""What a world says about each kind of caller it plans calls for: ``Caller``.

A world declares its caller kinds (``World.callers``: kind -> ``Caller``); everything
the engine, the dashboard, the story and the simulator show or do differently for a
kind comes from there, never from the kind's name. A kind no world declared (a record a
test made up) is shown by its name (``caller_of``).

    >>> callers = {"guess": Caller("passes", player=True, plural="guessers")}
    >>> caller_of(callers, "guess").plural, caller_of(callers, "guess").short
    ('guessers', 'gues')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import attrs

__all__ = ["STYLES", "Caller", "CallerStyle", "caller_of"]

#: How the story tells a call's text, and what the simulator answers it with:
#: ``line``, a speaker's own words ("Hobbes: …"); ``narration``, the narrator's voice
#: (no speaker, in italics); ``summary``, a record of what happened ("summary: …",
#: dimmed; the simulator sums up the prompt); ``aside``, a line set apart from the
#: dialogue ("beat · Hobbes: …").
CallerStyle = Literal["line", "narration", "summary", "aside"]
STYLES: tuple[CallerStyle, ...] = ("line", "narration", "summary", "aside")


@attrs.frozen
class Caller:
    """A kind of caller a world plans calls for, and how it is shown.

    Only ``fallback`` is required; every label defaults from the kind's own name, so
    ``Caller("passes")`` is a whole declaration. A world declares its kinds by name::

        callers = {
            "villager": Caller("abstains", player=True, plural="villagers"),
            "moderator": Caller("keeps silent", style="narration"),
        }

    Attributes:
        fallback: what a degraded call of this kind leaves in the story instead of its
            text ("idle", "abstains"): never silently nothing.
        player: the players' own calls. The ``batch`` and ``legacy`` policies fire
            these in barriers of k (the other kinds alongside), and ``legacy`` retries
            them when the platform refuses them.
        label: the kind as the dashboard's agents table and the trace name it
            ("beat" for ``scene_beat``); "" = the kind itself.
        short: at most four characters, for the agents table's narrow kind column;
            "" = the label's first four.
        plural: how a folded story line names many callers of the kind ("912
            characters idle"); "" = "<kind> calls".
        style: how the story tells its text (``CallerStyle``).
    """

    fallback: str
    player: bool = False
    label: str = ""
    short: str = attrs.field(default="", validator=attrs.validators.max_len(4))
    plural: str = ""
    style: CallerStyle = attrs.field(default="line", validator=attrs.validators.in_(STYLES))


def caller_of(callers: Mapping[str, Caller], kind: str) -> Caller:
    """``kind``'s ``Caller`` with every label filled in; a kind ``callers`` does not
    declare is shown by its own name, with no fallback."""
    caller = callers.get(kind) or Caller("")
    label = caller.label or kind
    return attrs.evolve(caller, label=label, short=caller.short or label[:4], plural=caller.plural or f"{kind} calls")
