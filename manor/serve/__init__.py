"""``manor serve-agent``: a local remote agent for tests and demos.

``AgentHost`` is the agent (capacity, FIFO queue, runs); ``AgentServer`` puts it on
HTTP with Agno-style and OpenAI-compatible endpoints; ``LocalAgentTransport`` reaches it
in process. Requests steer it with directives (``@latency=1.3``, ``@hang``, ...).
"""

from .directives import Directives, parse_directives
from .host import AgentHost, HostStatistics, RunRecord, RunSpec
from .local import LocalAgentTransport
from .server import AgentServer

__all__ = [
    "AgentHost",
    "AgentServer",
    "Directives",
    "HostStatistics",
    "LocalAgentTransport",
    "RunRecord",
    "RunSpec",
    "parse_directives",
]
