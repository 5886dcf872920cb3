"""Layers: cross-cutting behaviour wrapped around any provider, in a declared order.

A layer is a plain async function around the rest of the stack (``inner``): it does its
part, awaits ``inner``, and cleans up in ``finally``. The events of the call (``Admitted``
from the gate, ``Opened`` from the platform, the backend's own) are pushed to the caller's
listener as they happen, so no layer yields to the caller in the middle of its work: a
layer's cancel scope (the timeout) and its ``try``/``finally`` (a permit, a session) cover
the whole call, once, and each layer costs one coroutine per call, not one generator
step per event.

A layer that only observes calls (metrics, cost, the breaker's counting) is an
``Observer``: a hook before the call and one after it, no coroutine of its own. The
stack runs a run of adjacent observers as one step, so watching a call costs a few
function calls, not an extra coroutine frame that every resumption of the call passes
through.

The backend below keeps the provider interface, a cold stream of events: the stack
iterates it, innermost — or, for a caller that hears only the layers (``Stack.answer``,
the tick loop's calls), asks for the backend's answer, its fast path. The stack chooses
between the two, and whether a deadline is handed down to the backend, once, as it is
built. Nothing is acquired until a stack's ``call`` or ``answer`` is awaited.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar, final

from ..calls import Done, Event, Request
from ..clock import current_time
from ..errors import CallError
from ..providers.provider import DeadlineReached, Provider, call_deadline, stream

__all__ = ["JUDGE_EACH", "Answered", "Bracket", "HandedDown", "Inner", "Layer", "Listener", "Observer", "Split", "Stack", "ignore"]

#: Where a call's events go as they happen. It runs inside the call, so it must not block.
Listener = Callable[[Event], None]
#: The rest of the stack below a layer: makes the call, returns its answer.
Inner = Callable[[Request, Listener], Awaitable[Done]]


def ignore(event: Event) -> None:
    """A listener for callers that want only the answer."""


#: What ``Observer.judgement_now`` says when a layer must judge each call by its
#: ``before`` (the default).
JUDGE_EACH: object = object()


class Layer(abc.ABC):
    """One cross-cutting concern wrapped around every call: it sees each call's request
    and the stack below it (``inner``), and does its part around awaiting it.

    ``priority`` declares where the layer sits in a ``Stack``: lower is further out.
    For example, a layer that stamps each call's prompt::

        class Stamp(Layer):
            priority = 40  # between the breaker (30) and the gate (50)

            async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
                return await inner(msgspec.structs.replace(request, prompt="[stamped] " + request.prompt), listener)
    """

    priority: ClassVar[int]
    #: Whether a deadline handed down past this layer (``call_deadline``) bounds it as
    #: a cancel scope around it would: true of a layer that never waits of its own
    #: accord and leaves ``call_deadline`` alone (the platform layer, which opens a
    #: session or refuses at once). Observers' hooks never wait.
    passes_deadline: ClassVar[bool] = False
    #: Whether calls wait at this layer to be let through (the gate): a stack is split
    #: there (``Stack.split``).
    admits: ClassVar[bool] = False

    @abc.abstractmethod
    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        """Make ``request`` through ``inner``, adding this layer's behaviour.

        Returns:
            the answer ``inner`` returned.

        Raises:
            CallError: this layer's refusal, or whatever ``inner`` raised.
        """

    def bind(self, inner: Inner, *, deadline_kept_below: bool) -> Inner:
        """This layer around ``inner``, as a stack composes it: ``call`` with ``inner``.

        Args:
            deadline_kept_below: the backend keeps a call's deadline itself
                (``Provider.keeps_deadline``) and every layer in between passes it
                (``passes_deadline``): a layer that bounds the call can hand its
                deadline down (``call_deadline``) instead of opening a cancel scope
                (the timeout layer does).
        """
        return _wrap(self.call, inner)

    def arrival_order_matters(self) -> bool:
        """Whether calls arriving at the same instant could be treated differently
        depending on which arrives first (a circuit breaker choosing its half-open
        trial). Callers that fire many calls at once then start them one by one, in
        ticket order; otherwise they may let them arrive as trio runs them."""
        return False


class Observer(Layer):
    """A layer that watches calls without wrapping them: ``before`` when a call reaches
    it (it may refuse the call by raising), ``after`` when the call has ended below it.
    What ``before`` returns is handed to ``after``::

        class Count(Observer):
            priority = 15

            def __init__(self) -> None:
                self.calls = 0

            def before(self, request: Request) -> object:
                return None

            def after(self, request: Request, state: object, done: Done | None, error: BaseException | None) -> None:
                self.calls += 1

    Observers adjacent in a stack run in one step: their ``before`` hooks outermost
    first, the call, their ``after`` hooks innermost first, exactly as if each wrapped
    the next.
    """

    @abc.abstractmethod
    def before(self, request: Request) -> object:
        """A call reaches this layer; what it returns is handed back to ``after``.

        Raises:
            CallError: this layer refuses the call; nothing below it runs.
        """

    @abc.abstractmethod
    def after(self, request: Request, state: object, done: Done | None, error: BaseException | None) -> None:
        """The call ended below this layer: with ``done``, or raising ``error``
        (which goes on to the layers above). Must not raise."""

    def after_at(self, request: Request, state: object, done: Done | None, error: BaseException | None, at: float) -> None:
        """``after``, told the instant the call ended (``at``) by a caller that knows it
        (a call's task fired at admission, from its permit's release: ``Split.only_after``).
        This default forgets it and calls ``after``; a layer that reads the clock in
        ``after`` for that instant (the breaker) takes it here instead, a clock read fewer."""
        self.after(request, state, done, error)

    def judgement_now(self) -> object:
        """What ``before`` would return for every call made now, if it would let each
        through with that same state and change nothing in this layer (a closed
        circuit breaker): a caller that judges many calls at once, before any of them
        ends (a tick's, ``Split.judgement_now``), hands each that state instead of
        calling ``before``. Otherwise ``JUDGE_EACH``, the default: every call is judged
        by ``before``, as an observer that does not override this (a third party's)
        always is."""
        return JUDGE_EACH

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        return await _observe((self.before,), (self.after,), inner, request, listener)


async def _observe(
    befores: tuple[Callable[[Request], object], ...],
    afters: tuple[Callable[[Request, object, Done | None, BaseException | None], None], ...],
    inner: Inner,
    request: Request,
    listener: Listener,
) -> Done:
    """Run ``inner`` watched by observers, as if nested: their ``before`` hooks
    outermost first, their ``after`` hooks (``afters``, innermost first) in reverse."""
    states: list[object] = []
    try:
        for before in befores:
            states.append(before(request))
        done = await inner(request, listener)
    except BaseException as exc:
        skipped = len(befores) - len(states)  # observers outside the one that refused
        for after, state in zip(afters[skipped:], reversed(states)):
            after(request, state, None, exc)
        raise
    for after, state in zip(afters, reversed(states)):
        after(request, state, done, None)
    return done


def _wrap(call: Callable[[Request, Listener, Inner], Awaitable[Done]], inner: Inner) -> Inner:
    """``call`` (a layer's) around ``inner``. A closure, not ``functools.partial(call,
    inner=inner)``: a partial with a keyword builds a dict on every call, which costs
    more than the call to the function here."""

    def wrapped(request: Request, listener: Listener) -> Awaitable[Done]:
        return call(request, listener, inner)

    return wrapped


@final
class HandedDown:
    """A deadline ``seconds`` after the call reaches it, handed down (``call_deadline``)
    to ``inner`` instead of a cancel scope around it, as a layer that bounds a call binds
    it (``Layer.bind``, ``deadline_kept_below``: the timeout layer); ``expired`` is the
    error the call fails with when the backend says the deadline came (``DeadlineReached``).

    Awaited as any ``Inner``, it is a frame of its own around ``inner``. A layer right
    above it that wraps the call in a frame anyway may do the same in its own
    (``call_deadline`` set from now plus ``seconds``, then ``inner``, ``expired`` on
    ``DeadlineReached``, and the deadline reset): the gate layer
    does (``GateLayer.through``), so that a call's await chain is one frame shorter,
    every time the call resumes.
    """

    __slots__ = ("expired", "inner", "seconds")

    def __init__(self, seconds: float, inner: Inner, expired: Callable[[], CallError]) -> None:
        self.seconds = seconds
        self.inner = inner
        self.expired = expired

    async def __call__(self, request: Request, listener: Listener) -> Done:
        reset = call_deadline.set(current_time() + self.seconds)
        try:
            return await self.inner(request, listener)
        except DeadlineReached:
            raise self.expired() from None
        finally:
            call_deadline.reset(reset)


@final
class Bracket:
    """``inner`` between two steps that never wait, as a layer that holds something for
    the length of a call binds it (``Layer.bind``: the platform layer, its session):
    ``opens`` (which may refuse the call by raising: then nothing below runs), the
    listener told ``said`` (if any, and not ``ignore``), ``inner``, and ``closes`` once
    as the call ends however it ends.

    Awaited as any ``Inner``, it is a frame of its own around ``inner``. A layer right
    above it that wraps the call in a frame anyway may do the same in its own, in the
    same order: the gate layer does (``GateLayer.through``, where the timeout's deadline
    is handed down, ``HandedDown``), so that a call's await chain is one frame shorter,
    every time the call resumes.
    """

    __slots__ = ("closes", "inner", "opens", "said")

    def __init__(self, opens: Callable[[], None], closes: Callable[[], None], said: Event | None, inner: Inner) -> None:
        self.opens = opens
        self.closes = closes
        self.said = said
        self.inner = inner

    async def __call__(self, request: Request, listener: Listener) -> Done:
        self.opens()
        try:
            if self.said is not None and listener is not ignore:
                listener(self.said)
            return await self.inner(request, listener)
        finally:
            self.closes()


def _folds(layer: Layer) -> bool:
    """An observer that is only its hooks (one that overrides ``call`` is a wrapper)."""
    return isinstance(layer, Observer) and type(layer).call is Observer.call


def _compose(innermost: Inner, layers: Sequence[Layer], *, deadline_kept: bool) -> Inner:
    """The call through ``layers`` (outermost first) to ``innermost``, the backend: one
    step per layer that wraps, one per run of adjacent observers. ``deadline_kept``:
    the backend, reached this way, keeps a call's deadline itself."""
    inner = innermost
    index = len(layers)
    while index:
        if _folds(layers[index - 1]):
            start = index - 1
            while start and _folds(layers[start - 1]):
                start -= 1
            observers: list[Observer] = layers[start:index]  # type: ignore[assignment]
            befores = tuple(observer.before for observer in observers)
            afters = tuple(observer.after for observer in reversed(observers))
            inner = functools.partial(_observe, befores, afters, inner)
            index = start
        else:
            index -= 1
            layer = layers[index]
            inner = layer.bind(inner, deadline_kept_below=deadline_kept)
            deadline_kept = deadline_kept and layer.passes_deadline
    return inner


def _split(layers: Sequence[Layer], innermost: Inner, deadline_kept: bool) -> Split | None:
    """``layers`` cut at the one that admits (``Split``), the layers below it composed
    as the answered path composes them; ``None`` when none admits, or a layer above it
    does more than judge and observe."""
    admitting = next((index for index, layer in enumerate(layers) if layer.admits), None)
    if admitting is None or not all(_folds(layer) for layer in layers[:admitting]):
        return None
    below = _compose(innermost, layers[admitting + 1 :], deadline_kept=deadline_kept)
    return Split(layers[:admitting], layers[admitting], below)  # type: ignore[arg-type]


@final
class Answered:
    """The backend's fast path as the innermost step (``answer``, its ``Provider.answer``):
    awaited as any ``Inner``, it returns that coroutine itself, no frame around it (every
    frame of a call's await chain is passed through again each time the call resumes).
    The listener hears only the layers, so it is not handed down. A layer right above
    it that opens a frame anyway may call ``answer`` itself, a call fewer: the gate
    layer does, under the platform's session (``GateLayer.through``)."""

    __slots__ = ("answer",)

    def __init__(self, backend: Provider) -> None:
        self.answer = backend.answer

    def __call__(self, request: Request, listener: Listener) -> Awaitable[Done]:
        return self.answer(request)


@final
class Split:
    """A stack cut at the layer calls wait at to be let through (``Layer.admits``), when
    every layer above it only judges and observes (``Observer``): a caller can then
    judge a call when it is made (``befores``, outermost first: each may refuse it), wait
    for its admission itself, and give its task only the rest (``admitting``, ``below``),
    with the judging layers' ``afters`` (innermost first) when it ends: the same steps,
    in the same order, as the stack's own call.
    """

    __slots__ = ("admitting", "afters", "befores", "below", "observers", "only_after")

    def __init__(self, observers: Sequence[Observer], admitting: Layer, below: Inner) -> None:
        self.observers = tuple(observers)
        self.befores = tuple(observer.before for observer in observers)
        self.afters = tuple(observer.after for observer in reversed(observers))
        #: The one judging layer's ``after_at``, in the usual stack (the breaker alone):
        #: for a call every judging layer let through, ``ended`` is this hook with the
        #: call's one state and the instant it ended, which a caller that knows that
        #: instant may call itself (``manor.tick.admitted``: a frame fewer for every call,
        #: and the breaker's clock read). ``None`` with more or fewer judging layers.
        self.only_after = observers[0].after_at if len(observers) == 1 else None
        self.admitting = admitting
        self.below = below

    def judgement_now(self) -> tuple[object, ...] | None:
        """The states (``judge``'s, outermost first) of every call made now, before any
        ends, when each judging layer lets every such call through alike
        (``Observer.judgement_now``): a caller judging a tick's calls at once gives each
        these, with no ``judge``. ``None`` if any layer must judge each call: then
        ``judge`` each. The same states a ``judge`` of each call would give, and the
        layers in the same state after them: such a layer's ``before`` changes nothing."""
        states = []
        for observer in self.observers:
            state = observer.judgement_now()
            if state is JUDGE_EACH:
                return None
            states.append(state)
        return tuple(states)

    def judge(self, request: Request, states: list[object]) -> None:
        """The judging layers' ``before`` hooks, outermost first, each one's state
        appended to ``states``; a refusal's ``afters`` already heard.

        Raises:
            CallError: a layer refused the call; nothing below it runs.
        """
        try:
            for before in self.befores:
                states.append(before(request))
        except BaseException as exc:
            self.ended(request, states, None, exc)
            raise

    def ended(self, request: Request, states: Sequence[object], done: Done | None, error: BaseException | None) -> None:
        """The call ended below the judging layers (``states``: theirs, from ``judge``):
        their ``after`` hooks, innermost first, for those that let it through."""
        afters = self.afters
        if len(states) == 1 == len(afters):  # the usual stack: one judging layer, which let it through
            afters[0](request, states[0], done, error)
            return
        skipped = len(afters) - len(states)  # observers outside the one that refused
        for after, state in zip(afters[skipped:] if skipped else afters, reversed(states)):
            after(request, state, done, error)


@final
class Stack:
    """A backend wrapped in layers, outermost (lowest priority) first.

    The callers and the backend stay unchanged: callers make a call with ``call``, the
    backend answers through its stream.

    >>> import trio
    >>> from manor import MockProvider, Request, Stack, TimeoutLayer
    >>> stack = Stack(MockProvider(lambda request: f"{request.agent} bows."), [TimeoutLayer(30)])
    >>> stack
    Stack(TimeoutLayer ∘ MockProvider)
    >>> trio.run(stack.call, Request(caller="character", agent="hobbes")).text
    'hobbes bows.'
    """

    def __init__(self, backend: Provider, layers: Sequence[Layer] = ()) -> None:
        self.backend = backend
        self.layers: tuple[Layer, ...] = tuple(sorted(layers, key=lambda layer: layer.priority))
        # The layers whose decisions can depend on arrival order, asked every tick.
        self._order_sensitive = tuple(layer for layer in self.layers if type(layer).arrival_order_matters is not Layer.arrival_order_matters)
        # And the backend, if its class says it can be (``Provider.arrival_order_matters``
        # overridden: a simulated platform refusing calls beyond a capacity that moves).
        self._backend_order_sensitive = type(backend).arrival_order_matters is not Provider.arrival_order_matters
        # Two ways to the backend, chosen here once rather than call by call: its stream,
        # every event to the listener (``call``); or its answer, the fast path, for a
        # listener that hears only the layers (``answer``), handed the call's deadline
        # where the backend keeps it (``Provider.keeps_deadline``) and no layer between
        # waits (``Layer.passes_deadline``).
        self._streamed = _compose(functools.partial(stream, backend), self.layers, deadline_kept=False)
        self._answered = _compose(Answered(backend), self.layers, deadline_kept=backend.keeps_deadline)
        self.split = _split(self.layers, Answered(backend), backend.keeps_deadline)

    def call(self, request: Request, listener: Listener | None = None) -> Awaitable[Done]:
        """Make one call through every layer to the backend; ``listener`` hears its
        events as they happen, the backend's stream included. Without one, the backend
        answers by its fast path (``answer``). Await it: it is the outermost layer's
        coroutine, with no frame of the stack's own around it.

        Raises:
            CallError: (when awaited) a subclass naming why the call failed.
        """
        if listener is None:
            return self._answered(request, ignore)
        return self._streamed(request, listener)

    def answer(self, request: Request, listener: Listener) -> Awaitable[Done]:
        """Make one call for a caller that hears only what the layers say (``Admitted``
        from the gate, ``Opened`` from the platform), not the backend's stream: the
        backend answers by its fast path (``Provider.answer``), which ends the call as
        its stream would, with less work. The tick loop's calls are made so.

        Raises:
            CallError: (when awaited) a subclass naming why the call failed.
        """
        return self._answered(request, listener)

    def arrival_order_matters(self) -> bool:
        """Whether any layer's decisions, or the backend's, now depend on the order calls
        arrive in."""
        if self._backend_order_sensitive and self.backend.arrival_order_matters():
            return True
        return any(layer.arrival_order_matters() for layer in self._order_sensitive)

    def layer(self, kind: type[Layer]) -> Layer | None:
        """The stack's layer of this type, if it has one."""
        return next((layer for layer in self.layers if isinstance(layer, kind)), None)

    def __repr__(self) -> str:
        names = " ∘ ".join(type(layer).__name__ for layer in self.layers)
        return f"Stack({names} ∘ {type(self.backend).__name__})"
