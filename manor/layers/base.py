"""Layers: cross-cutting behaviour wrapped around any provider, in a declared order."""

from __future__ import annotations

import abc
from collections.abc import AsyncGenerator, Sequence
from typing import ClassVar, final

from ..calls import Event, Request
from ..providers.base import Provider

__all__ = ["Layer", "Stack"]


class Layer(abc.ABC):
    """One cross-cutting concern. It sees each call's request and the provider below it.

    ``priority`` declares where the layer sits in a ``Stack``: lower is further out.
    """

    priority: ClassVar[int]

    @abc.abstractmethod
    def stream(self, request: Request, inner: Provider) -> AsyncGenerator[Event, None]:
        """Stream ``request`` through ``inner``, adding this layer's behaviour.

        Implement as an async generator: it must stay cold until iterated. Never yield
        from inside a cancel scope; put scopes around the awaits on ``inner`` only.
        """


@final
class _Wrapped(Provider):
    def __init__(self, layer: Layer, inner: Provider) -> None:
        self.layer = layer
        self.inner = inner

    def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        return self.layer.stream(request, self.inner)


@final
class Stack(Provider):
    """A backend wrapped in layers, outermost (lowest priority) first.

    The callers and the backend stay unchanged: the stack is itself a provider.
    """

    def __init__(self, backend: Provider, layers: Sequence[Layer] = ()) -> None:
        self.backend = backend
        self.layers: tuple[Layer, ...] = tuple(sorted(layers, key=lambda layer: layer.priority))
        provider: Provider = backend
        for layer in reversed(self.layers):
            provider = _Wrapped(layer, provider)
        self._outer = provider

    def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        return self._outer.invoke(request)

    def layer(self, kind: type[Layer]) -> Layer | None:
        """The stack's layer of this type, if it has one."""
        return next((layer for layer in self.layers if isinstance(layer, kind)), None)

    def __repr__(self) -> str:
        names = " ∘ ".join(type(layer).__name__ for layer in self.layers)
        return f"Stack({names} ∘ {type(self.backend).__name__})"
