"""Layers: cross-cutting behaviour wrapped around any provider, in a declared order.

A layer is a plain async function around the rest of the stack (``inner``): it does its
part, awaits ``inner``, and cleans up in ``finally``. The events of the call (``Admitted``
from the gate, ``Opened`` from the platform, the backend's own) are pushed to the caller's
listener as they happen, so no layer yields to the caller in the middle of its work: a
layer's cancel scope (the timeout) and its ``try``/``finally`` (a permit, a session) cover
the whole call, once, and each layer costs one coroutine per call, not one generator
step per event.

The backend below keeps the provider interface, a cold stream of events: the stack
iterates it, innermost. Nothing is acquired until a stack's ``call`` is awaited.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar, final

from ..calls import Done, Event, Request
from ..providers.base import Provider, answer_only, collect

__all__ = ["Inner", "Layer", "Listener", "Stack", "ignore"]

#: Where a call's events go as they happen. It runs inside the call, so it must not block.
Listener = Callable[[Event], None]
#: The rest of the stack below a layer: makes the call, returns its answer.
Inner = Callable[[Request, Listener], Awaitable[Done]]


@answer_only
def ignore(event: Event) -> None:
    """A listener for callers that want only the answer."""


class Layer(abc.ABC):
    """One cross-cutting concern. It sees each call's request and the stack below it.

    ``priority`` declares where the layer sits in a ``Stack``: lower is further out.
    """

    priority: ClassVar[int]

    @abc.abstractmethod
    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        """Make ``request`` through ``inner``, adding this layer's behaviour.

        Returns:
            the answer ``inner`` returned.

        Raises:
            CallError: this layer's refusal, or whatever ``inner`` raised.
        """

    def arrival_order_matters(self) -> bool:
        """Whether calls arriving at the same instant could be treated differently
        depending on which arrives first (a circuit breaker choosing its half-open
        trial). Callers that fire many calls at once then start them one by one, in
        ticket order; otherwise they may let them arrive as trio runs them."""
        return False


@final
class Stack:
    """A backend wrapped in layers, outermost (lowest priority) first.

    The callers and the backend stay unchanged: callers make a call with ``call``, the
    backend answers through its stream.
    """

    def __init__(self, backend: Provider, layers: Sequence[Layer] = ()) -> None:
        self.backend = backend
        self.layers: tuple[Layer, ...] = tuple(sorted(layers, key=lambda layer: layer.priority))
        # Innermost, the backend's stream, each event passed on to the listener.
        inner: Inner = functools.partial(collect, backend)
        for layer in reversed(self.layers):
            inner = functools.partial(layer.call, inner=inner)
        self._call = inner

    async def call(self, request: Request, listener: Listener = ignore) -> Done:
        """Make one call through every layer to the backend; ``listener`` hears its
        events as they happen.

        Raises:
            CallError: a subclass naming why the call failed.
        """
        return await self._call(request, listener)

    def arrival_order_matters(self) -> bool:
        """Whether any layer's decisions now depend on the order calls arrive in."""
        return any(layer.arrival_order_matters() for layer in self.layers)

    def layer(self, kind: type[Layer]) -> Layer | None:
        """The stack's layer of this type, if it has one."""
        return next((layer for layer in self.layers if isinstance(layer, kind)), None)

    def __repr__(self) -> str:
        names = " ∘ ".join(type(layer).__name__ for layer in self.layers)
        return f"Stack({names} ∘ {type(self.backend).__name__})"
