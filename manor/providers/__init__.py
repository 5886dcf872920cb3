"""Model backends. Each is a ``Provider``: ``invoke(request)`` returns a cold stream."""

from .agno import AgnoProvider, HttpAgentTransport, RemoteAgentTransport
from .provider import Provider, collect
from .command import CommandProvider
from .mock import MockProvider
from .openai import OpenAIProvider
from .routing import RoutingProvider
from .sim import SimProfile, SimProvider

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
