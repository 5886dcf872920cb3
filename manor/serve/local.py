"""Reaching an ``AgentHost`` in the same process: the adapter's transport with no wire.

It obeys the same directives and maps failures to the same exceptions as the HTTP
transport does against ``manor serve-agent``, so the adapter cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import final

import attrs

from ..calls import Event
from ..errors import ProviderError, SessionLimitError
from ..providers.agno import RemoteAgentTransport, RunCall
from .directives import parse_directives
from .host import AgentHost, HostFull, ModelFailed, RunCancelled, RunSpec, UnknownAgent

__all__ = ["LocalAgentTransport"]


@final
@attrs.define(eq=False)
class LocalAgentTransport(RemoteAgentTransport):
    """The adapter's transport to ``host``, a remote agent simulated in this process."""

    host: AgentHost

    async def run(self, call: RunCall) -> AsyncGenerator[Event, None]:
        what = f"agent {call.agent_id} (in-process)"
        text, directives = parse_directives(call.message)
        if directives.status == 429:
            retry = directives.retry_after
            raise SessionLimitError(f"{what}: 429 too many requests", retry_after=float(retry) if retry else None)
        if directives.status is not None and directives.status >= 400:
            raise ProviderError(f"{what}: HTTP {directives.status}: injected failure")
        if directives.garbage:
            raise ProviderError(f"{what}: answered garbage, not a run")
        spec = RunSpec(call.run_id, call.agent_id, text, directives, session_id=call.session_id)
        try:
            async for event in self.host.run(spec, outlive_client=not call.stream):
                yield event
        except UnknownAgent:
            raise ProviderError(f"{what}: no such agent (404)") from None
        except HostFull as exc:
            raise SessionLimitError(f"{what}: 429 too many requests: {exc}") from None
        except ModelFailed as exc:
            raise ProviderError(f"{what}: the run failed: {exc}") from None
        except RunCancelled:
            raise ProviderError(f"{what}: the run was cancelled remotely") from None

    async def cancel(self, agent_id: str, run_id: str) -> None:
        self.host.cancel(run_id)
