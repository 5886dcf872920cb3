"""Model backends. Each is a ``Provider``: ``invoke(request)`` returns a cold stream.

Each name is imported from its module when first asked for: the HTTP backends' modules
load httpx (some 80 ms), which a run on the simulator never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Module -> the names this package exports from it.
_HOMES: dict[str, tuple[str, ...]] = {
    ".agno": ("AgnoProvider", "HttpAgentTransport", "RemoteAgentTransport"),
    ".command": ("CommandProvider",),
    ".mock": ("MockProvider",),
    ".openai": ("OpenAIProvider",),
    ".provider": ("Provider", "collect"),
    ".routing": ("RoutingProvider",),
    ".sim": ("SimProfile", "SimProvider"),
}

if TYPE_CHECKING:
    # What type checkers see (they cannot follow ``__getattr__``); kept equal to ``_HOMES``.
    from .agno import AgnoProvider, HttpAgentTransport, RemoteAgentTransport
    from .command import CommandProvider
    from .mock import MockProvider
    from .openai import OpenAIProvider
    from .provider import Provider, collect
    from .routing import RoutingProvider
    from .sim import SimProfile, SimProvider

_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "AgnoProvider",
    "CommandProvider",
    "HttpAgentTransport",
    "MockProvider",
    "OpenAIProvider",
    "Provider",
    "RemoteAgentTransport",
    "RoutingProvider",
    "SimProfile",
    "SimProvider",
    "collect",
]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
