"""``manor serve-agent``'s HTTP server: routes requests to the Agno, OpenAI and Anthropic
faces of one ``AgentHost``, so all share its capacity and queue."""

from __future__ import annotations

import json
import re
from typing import final
from urllib.parse import unquote

import attrs
import trio

from . import agno_api, anthropic_api, openai_api
from .host import AgentHost
from .http_server import HttpRequest, HttpResponse, serve_http

__all__ = ["AgentServer"]

_RUNS = re.compile(r"^/agents/([^/]+)/runs$")
_CANCEL = re.compile(r"^/agents/([^/]+)/runs/([^/]+)/cancel$")


@final
@attrs.define(eq=False)
class AgentServer:
    """The routes of ``manor serve-agent`` over ``host`` (which must be serving).

    - ``POST /agents/{agent_id}/runs``, ``POST /agents/{agent_id}/runs/{run_id}/cancel``
    - ``POST /v1/chat/completions``, ``GET /v1/models``
    - ``POST /v1/messages`` (Anthropic Messages)
    - ``POST /admin/capacity`` with ``{"capacity": N}``: run at most N at once from now
      on (a platform whose limit moves); answers the host's statistics
    - ``GET /stats``: the host's statistics (capacity, peak running, dropped, ...) and
      ``connections``, the TCP connections accepted so far (this request's included):
      a client that reuses its connections opens few.
    """

    host: AgentHost
    _connections: int = attrs.field(default=0, init=False)

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        return self._connections

    async def serve(
        self, address: str = "127.0.0.1", port: int = 0, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; ``task_status.started`` gets the base URL."""
        await serve_http(self.handle, address, port, on_connection=self._count_connection, task_status=task_status)

    async def handle(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        if match := _RUNS.match(path):
            return await self._only("POST", request) or await agno_api.create_run(self.host, request, unquote(match[1]))
        if match := _CANCEL.match(path):
            return await self._only("POST", request) or await agno_api.cancel_run(self.host, unquote(match[2]))
        if path == "/v1/chat/completions":
            return await self._only("POST", request) or await openai_api.chat_completions(self.host, request)
        if path == "/v1/messages":
            return await self._only("POST", request) or await anthropic_api.messages(self.host, request)
        if path == "/admin/capacity":
            return await self._only("POST", request) or self._resize(request)
        if path == "/v1/models":
            return await self._only("GET", request) or await openai_api.list_models(self.host)
        if path == "/stats":
            stats = {**attrs.asdict(self.host.statistics()), "connections": self._connections}
            return await self._only("GET", request) or HttpResponse.json(200, stats)
        return HttpResponse.json(404, {"detail": "Not Found"})

    def _resize(self, request: HttpRequest) -> HttpResponse:
        try:
            capacity = json.loads(request.body).get("capacity")
        except (ValueError, AttributeError):
            capacity = None
        if type(capacity) is not int or capacity < 1:
            return HttpResponse.json(422, {"detail": 'expected {"capacity": N}, N a whole number >= 1'})
        self.host.resize(capacity)
        return HttpResponse.json(200, attrs.asdict(self.host.statistics()))

    def _count_connection(self) -> None:
        self._connections += 1

    async def _only(self, method: str, request: HttpRequest) -> HttpResponse | None:
        if request.method == method:
            return None
        return HttpResponse.json(405, {"detail": "Method Not Allowed"}, [("allow", method)])
