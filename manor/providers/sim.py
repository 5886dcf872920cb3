"""The embedded default backend: a simulated model with seeded latency, faults and
in-character text, so a world reads like a story and runs without any real model."""

from __future__ import annotations

import functools
import math
import random
import string
import threading
from collections.abc import AsyncGenerator, Awaitable, Mapping
from contextlib import aclosing
from typing import Annotated, ClassVar, final

import attrs
import msgspec
import trio
from msgspec import Meta

from ..answers import draw_answer
from ..callers import CallerStyle
from ..calls import Done, Event, Request, Started, TextDelta, Usage
from ..clock import current_time
from ..config.backends import PlatformCapacity
from ..draws import below, choice, first_gauss, seed
from ..errors import ProviderError, SessionLimitError
from ..limits import MAX_JITTER, MAX_LINE_WIDTH, Seconds
from ..templates import template_problem
from ..timer import sleep_until
from .provider import DeadlineReached, Provider, by_deadline, call_deadline

__all__ = ["GENERIC_LINES", "MOODS", "NARRATOR_LINES", "OBJECTS", "PLACEHOLDERS", "ROOMS", "SimProfile", "SimProvider", "line_problem"]

# One generator a thread, for every simulator in it, seeded again for every draw: as
# random.Random(key) would be, without building a generator (2.5 KB of state) a call.
# A draw seeds it and takes all it needs before it returns, with no await between, so
# the simulators of a thread never see each other's draws. One a thread rather than one
# a simulator: a fleet of 256 worlds has 256 simulators, and their 256 generators (640
# KB of state, rewritten by every seed) were what each call's draw brought back into the
# processor's cache, pushing out the rest of what a call touches
# (benchmarks/notes/fleet_cpu.md).
_generators = threading.local()


def _generator() -> random.Random:
    """This thread's generator for the simulators' draws."""
    try:
        return _generators.rng  # type: ignore[no-any-return]
    except AttributeError:
        rng = _generators.rng = random.Random()
        return rng


#: What a line template may name; each is filled in with a word or a name.
PLACEHOLDERS = ("object", "room", "someone", "mood")

#: The words a line's fields are filled in with: ``{object}`` a noun, ``{room}`` a noun
#: (the scene's places, when its world names some: ``SceneKeys.places``), ``{mood}`` an
#: adverb — each reads after "the" or beside a verb, never after "a".
OBJECTS = ("candlestick", "portrait", "teapot", "pocket watch", "letter", "key", "harpsichord", "dagger", "hat")
ROOMS = ("library", "ballroom", "kitchen", "conservatory", "cellar", "attic", "hall", "garden")
MOODS = ("suspiciously", "cheerfully", "gloomily", "grandly", "nervously", "absent-mindedly")
#: A character's lines when its agent file has none.
GENERIC_LINES = (
    "I {mood} inspect the {object} in the {room}.",
    "Has anyone seen {someone}? I last saw them near the {object}.",
    "The {room} is far too quiet. I do not like it.",
    "I shall have words with {someone} about the {object}.",
)
#: A narrator's lines when its agent file has none.
NARRATOR_LINES = (
    "Thunder rolls over the manor. In the {room}, {someone} {mood} eyes the {object} while the clocks disagree about the hour.",
    "A draught snuffs the candles of the {room}; when they are lit again the {object} has moved, and {someone} pretends not to notice.",
    "The manor creaks {mood}. Somewhere a door closes, and {someone} is found holding a {object} nobody remembers giving them.",
)


class SimProfile(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How one simulated agent behaves.

    Attributes:
        latency_s: the typical time of a call.
        jitter: spread of the log-normal around it (its sigma); 0 makes every call take
            exactly ``latency_s``.
        lines: line templates in the agent's voice; ``{object}`` (a noun: "teapot"),
            ``{room}`` (a noun: "library"), ``{someone}`` (a name) and ``{mood}`` (an
            adverb: "gloomily" — "I drift {mood} through the {room}", not "a {mood}
            hush") are filled in.
    """

    latency_s: Seconds = 1.0
    jitter: Annotated[float, Meta(ge=0, le=MAX_JITTER)] = 0.0
    lines: tuple[str, ...] = ()


def line_problem(template: str) -> str | None:
    """What is wrong with a line template, or ``None`` if it can be filled in: it may
    name only ``PLACEHOLDERS``, and pad a field to at most ``MAX_LINE_WIDTH``."""
    return template_problem(template, PLACEHOLDERS, max_width=MAX_LINE_WIDTH)


@final
@attrs.define(eq=False)
class SimProvider(Provider):
    """A simulated model backend: each call's latency, answer and failure drawn from
    the agent's ``SimProfile``, seeded::

        backend = SimProvider({"hobbes": SimProfile(latency_s=1.2)}, seed=1789, error_rate=0.02)

    Every draw comes from a random generator keyed by (seed, agent, caller, tick,
    attempt), never from the order in which calls happen to run, so a run is the same
    every time under the virtual clock.

    Args:
        profiles: per agent; an agent without one gets ``default``.
        seed: the scene's seed.
        error_rate: chance a call fails with ``ProviderError``.
        hang_rate: chance a call never answers.
        invalid_rate: chance the answer to a request with a shape is not JSON of it
            (a request without one draws nothing for it: its answers do not move).
        names: agent id -> the name it goes by: who ``{someone}`` in a line can be,
            never the agent speaking (default: the profiles' keys, each its own name).
        rooms: what ``{room}`` in a line can be: the scene's places (default: ``ROOMS``).
        styles: caller kind -> its ``Caller.style`` (the world's ``callers``): a
            ``summary`` call is answered with a gist of its prompt, a ``narration`` call
            with a narrator's line, any other with a character's.
        max_sessions: the backend's own concurrency cap; 0 = unlimited (the shared gate
            subsumes it).
        capacity: a platform limit that moves during the run, answered as a server
            answers it: a call that finds every session in use is refused at once
            (``SessionLimitError`` refused by the server, with its ``retry_after``).
            ``None`` (the default) refuses nothing, and draws nothing.
    """

    profiles: Mapping[str, SimProfile] = attrs.field(factory=dict)
    seed: int = 0
    default: SimProfile = SimProfile()
    names: Mapping[str, str] = attrs.field(factory=dict)
    rooms: tuple[str, ...] = ()
    styles: Mapping[str, CallerStyle] = attrs.field(factory=dict)
    error_rate: float = attrs.field(default=0.0, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    hang_rate: float = attrs.field(default=0.0, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    invalid_rate: float = attrs.field(default=0.0, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    max_sessions: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    capacity: PlatformCapacity | None = None
    _limiter: trio.CapacityLimiter | None = attrs.field(default=None, init=False)
    _in_flight: int = attrs.field(default=0, init=False)
    _epoch: float | None = attrs.field(default=None, init=False)
    # Who ``{someone}`` can be, in the order drawn, and each agent's own place in it.
    _someone: tuple[str, ...] = attrs.field(default=(), init=False, repr=False)
    _own: dict[str, int] = attrs.field(factory=dict, init=False, repr=False)
    keeps_deadline: ClassVar[bool] = True  # answer(): see there

    def __attrs_post_init__(self) -> None:
        if not self.names:
            self.names = {agent: agent for agent in self.profiles}
        self._someone = tuple(self.names.values()) or ("the butler",)
        self._own = {agent: place for place, agent in enumerate(self.names)}
        if not self.rooms:
            self.rooms = ROOMS

    def latency(self, request: Request) -> float:
        """The latency this call will have: deterministic for its key."""
        return self._draw(request)[0]

    def arrival_order_matters(self) -> bool:
        """With a ``capacity``, which of the calls arriving together is refused depends
        on which arrives first: the tick loop then starts them in ticket order."""
        return self.capacity is not None

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        latency, fault, text = self._draw(request)
        if self.capacity is not None:
            self._take_session(request)
        try:
            if self.max_sessions:
                if self._limiter is None:
                    self._limiter = trio.CapacityLimiter(self.max_sessions)
                async with self._limiter:
                    async for event in self._answer(request, latency, fault, text):
                        yield event
            else:
                async for event in self._answer(request, latency, fault, text):
                    yield event
        finally:
            if self.capacity is not None:
                self._in_flight -= 1

    def answer(self, request: Request) -> Awaitable[Done]:
        """The answer without its stream: one timer to the end of the answer instead of
        one per piece, where that ends the call at the same time to the bit
        (``_one_timer_end``); otherwise the stream, unheard. The coroutine that answers,
        not one of this method's around it (``Provider.answer``).

        It keeps the call's deadline (``call_deadline``): the one timer goes to the
        earlier of the answer's end and the deadline; a stream (or a wait for one of
        ``max_sessions``) is cancelled at the deadline.

        Raises:
            ProviderError: (when awaited) the simulated model failed this call.
            DeadlineReached: (when awaited) the call's deadline came before its answer.
        """
        if self.capacity is not None:
            return self._within_capacity(request)
        return self._answered(request)

    def _answered(self, request: Request) -> Awaitable[Done]:
        latency, fault, text = self._draw(request)
        deadline = call_deadline.get()
        if self.max_sessions:
            limited = self._limited(request, latency, fault, text)
            return limited if deadline == math.inf else by_deadline(deadline, limited)
        return self._answer_at_once(request, latency, fault, text, deadline)

    async def _within_capacity(self, request: Request) -> Done:
        self._take_session(request)
        try:
            return await self._answered(request)
        finally:
            self._in_flight -= 1

    def _take_session(self, request: Request) -> None:
        """Count the call in, or refuse it as a full server would.

        Raises:
            SessionLimitError: every session the capacity allows now is in use.
        """
        assert self.capacity is not None
        if self.capacity.by == "tick":
            at = float(request.tick)
        else:
            now = current_time()
            if self._epoch is None:
                self._epoch = now
            at = now - self._epoch
        limit = self.capacity.sessions(at)
        if limit is not None and self._in_flight >= limit:
            raise SessionLimitError(
                f"simulated platform full: {self._in_flight} of {limit} sessions in use", retry_after=self.capacity.retry_after_s
            )
        self._in_flight += 1

    async def _limited(self, request: Request, latency: float, fault: str, text: str) -> Done:
        if self._limiter is None:
            self._limiter = trio.CapacityLimiter(self.max_sessions)
        async with self._limiter:
            return await self._answer_at_once(request, latency, fault, text, math.inf)

    async def _answer_at_once(self, request: Request, latency: float, fault: str, text: str, deadline: float) -> Done:
        words = text.count(" ") + 1  # len(text.split(" ")), as the stream counts them
        end = None if fault else _one_timer_end(current_time(), latency, min(4, words))
        if end is None:
            streamed = self._streamed(request, latency, fault, text)
            return await (streamed if deadline == math.inf else by_deadline(deadline, streamed))
        if deadline <= end:
            # At a tie the deadline wins, as it does when it is a cancel scope's around
            # the answer's timer: the outer scope's cancellation is the one that shows.
            await sleep_until(deadline)
            raise DeadlineReached
        await sleep_until(end)  # without a Cancelled at the end (manor.timer)
        return Done(text=text, usage=Usage(input_tokens=_word_count(request.prompt), output_tokens=words))

    async def _streamed(self, request: Request, latency: float, fault: str, text: str) -> Done:
        async with aclosing(self._answer(request, latency, fault, text)) as events:
            async for event in events:
                if isinstance(event, Done):
                    return event
        raise AssertionError("the simulated stream always ends with Done")  # pragma: no cover

    async def _answer(self, request: Request, latency: float, fault: str, text: str) -> AsyncGenerator[Event, None]:
        first_token = latency * 0.25
        await trio.sleep(first_token)
        if fault == "hang":
            await trio.sleep_forever()
        if fault == "error":
            raise ProviderError("simulated model error")
        yield Started()
        words = text.split(" ")
        pieces = min(4, len(words))
        step = math.ceil(len(words) / pieces)
        for i in range(pieces):
            # The end, exactly: _one_timer_end repeats this arithmetic; change both or neither.
            await trio.sleep((latency - first_token) / pieces)
            chunk = " ".join(words[i * step : (i + 1) * step])
            yield TextDelta(chunk if i == 0 else " " + chunk)
        usage = Usage(input_tokens=_word_count(request.prompt), output_tokens=len(words))
        yield Done(text=text, usage=usage)

    @property
    def _rng(self) -> random.Random:
        """The generator this thread's simulators draw from (``_generator``)."""
        return _generator()

    def _draw(self, request: Request) -> tuple[float, str, str]:
        rng = _generator()
        seed(rng, f"{self.seed}:{request.agent}:{request.caller}:{request.tick}:{request.attempt}")
        random = rng.random
        profile = self.profiles.get(request.agent, self.default)
        if profile.jitter:
            latency = profile.latency_s * math.exp(first_gauss(random, 0.0, profile.jitter) - profile.jitter**2 / 2)
        else:
            latency = profile.latency_s
        roll = random()
        fault = "error" if roll < self.error_rate else "hang" if roll < self.error_rate + self.hang_rate else ""
        return latency, fault, self._text(request, profile, rng)

    def _text(self, request: Request, profile: SimProfile, rng: random.Random) -> str:
        if request.shape is not None:
            return self._shaped(request, profile, rng)
        style = self.styles.get(request.caller, "line")
        if style == "summary":
            return _summary(request.prompt)
        if style == "narration":
            return self._line(profile.lines or NARRATOR_LINES, rng, request.agent)
        return self._line(profile.lines or GENERIC_LINES, rng, request.agent)

    def _line(self, templates: tuple[str, ...], rng: random.Random, speaker: str) -> str:
        """One of ``templates``, its fields filled in with the words drawn; ``{someone}``
        is never the ``speaker`` itself (drawn as "the next" instead, so that the draws
        after it, and every answer's other words, stay as they are)."""
        # rng.choice of each, then rng.randrange(len(someone)): the same draws, a frame each.
        getrandbits, someone = rng.getrandbits, self._someone
        template, object = templates[below(getrandbits, len(templates))], OBJECTS[below(getrandbits, len(OBJECTS))]
        room, mood = self.rooms[below(getrandbits, len(self.rooms))], MOODS[below(getrandbits, len(MOODS))]
        place = below(getrandbits, len(someone))
        if place == self._own.get(speaker) and len(someone) > 1:
            place = (place + 1) % len(someone)
        by_place = _by_place(template)
        if by_place is None:
            return template.format(object=object, room=room, mood=mood, someone=someone[place])
        return by_place.format(object, room, someone[place], mood)

    def _shaped(self, request: Request, profile: SimProfile, rng: random.Random) -> str:
        """Valid JSON of ``shape``, its strings drawn from the cast's names and a line
        of the agent's; at ``invalid_rate``, an answer that is not."""
        line = self._line(profile.lines or GENERIC_LINES, rng, request.agent)
        words = (*self._someone, line)
        valid = draw_answer(request.shape, rng, words)
        if self.invalid_rate and rng.random() < self.invalid_rate:
            return _invalid(valid, rng, words)
        return valid


@functools.cache
def _by_place(template: str) -> str | None:
    """``template`` with its fields named by their place in ``PLACEHOLDERS`` ("I {3}
    inspect the {0}." for "I {mood} inspect the {object}."): filled in with
    ``format(object, room, someone, mood)``, the same line as ``format(object=…, …)``
    without a dictionary of the names built, and each field's name hashed, for every
    line (half a line's cost, benchmarks/notes/sim_draws.md). ``None`` for a template
    ``line_problem`` would refuse (a field it does not know, a field in a format spec):
    filled in by name, it fails as it always did."""
    parts = []
    try:
        for literal, name, spec, conversion in string.Formatter().parse(template):
            parts.append(literal.replace("{", "{{").replace("}", "}}"))
            if name is None:
                continue
            if name not in PLACEHOLDERS or "{" in spec or "}" in spec:
                return None
            parts.append(f"{{{PLACEHOLDERS.index(name)}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}")
    except ValueError:
        return None
    return "".join(parts)


def _summary(prompt: str) -> str:
    """A summariser's answer: the gist of the last four observations of its prompt —
    the lines after its last heading (a line ending in ``:``, "Summarise what was
    observed:"), never the heading itself — or that nothing has happened yet."""
    lines = [line for line in prompt.splitlines() if line.strip()]
    headings = [i for i, line in enumerate(lines) if line.rstrip().endswith(":")]
    observed = lines[headings[-1] + 1 :] if headings else lines
    gist = "; ".join(" ".join(line.split()[:7]).rstrip(".,;:!?") for line in observed[-4:])
    return f"So far: {gist or 'nothing of note has happened'}."


def _invalid(valid: str, rng: random.Random, words: tuple[str, ...]) -> str:
    """An answer a model might give instead of ``valid``: cut off, or prose."""
    if rng.random() < 0.5:
        return valid[: max(1, len(valid) // 2)]
    return f"I think {choice(rng, words)}, if you ask me."


#: ``bytes.translate`` table: an ASCII character that ``str.split()`` splits at (space,
#: ``\t\n\v\f\r`` and the separators ``\x1c``-``\x1f``) becomes a space, any other an ``x``.
_SPACE_OR_LETTER = bytes(32 if chr(code).isspace() else 120 for code in range(256))


def _word_count(text: str) -> int:
    """``len(text.split())``, the prompt's tokens as the simulator counts them, without
    a string built per word (a prompt has about a hundred; building them cost more than
    the rest of the answer): an ASCII text's words are counted where they start, a
    letter after a space or at the beginning."""
    if not text.isascii():
        return len(text.split())
    marks = text.encode().translate(_SPACE_OR_LETTER)
    return marks.count(b" x") + marks.startswith(b"x")


def _one_timer_end(now: float, latency: float, pieces: int) -> float | None:
    """When a streamed answer starting ``now`` ends (``SimProvider._answer``: a sleep
    to the first token, then one per piece), if one timer to that instant ends it at
    the same time to the bit; ``None`` if it might not.

    Each ``trio.sleep`` sets its deadline from the clock, and under trio's virtual
    clock the clock reaches a deadline ``d`` from ``c`` as ``c + (d - c)``, which is
    ``d`` exactly when ``c >= d / 2`` (Sterbenz) but can be off by the last bit when
    the jump is longer than the time already passed. So the streamed answer's end is
    the pieces' deadlines summed in the same order, and one timer lands there too,
    whenever the answer ends by twice the time it starts at: then every jump to any
    deadline up to its end — its own, and those of calls in flight beside it — starts
    from at least ``now`` and is exact whether the pieces' deadlines are there or not.
    (Early in a virtual run, when that does not hold, the answer streams as it always
    did.) A zero latency answers through the stream too: its sleeps are checkpoints.
    """
    if not latency > 0 or not now > 0:
        return None
    first_token = latency * 0.25
    piece = (latency - first_token) / pieces
    end = now + first_token
    for _ in range(pieces):
        end = end + piece
    return end if end <= 2 * now else None
