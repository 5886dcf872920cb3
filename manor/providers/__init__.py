"""Model backends. Each is a ``Provider``: ``invoke(request)`` returns a cold stream."""

from .base import Provider, collect
from .sim import SimProfile, SimProvider

__all__ = ["Provider", "SimProfile", "SimProvider", "collect"]
