"""Routing each call to its agent's backend, so that a cast can mix backends (the
narrator on a bigger model, the characters on a local one).

The router is the backend the engine's stack wraps: the gate, the platform limiter, the
timeout, the breaker and every other layer sit above it, so one gate admits the calls of
every backend. ``routing_provider`` builds it from the backends the configuration assigns
(``Config.assign_backends``); when every agent is on the built-in simulator it returns
the simulator itself, so a run without backend settings is exactly what it always was.

Each HTTP backend shares one httpx client (one connection pool) among all its calls,
instead of opening a client and a connection per call. A client belongs to the trio run
that made it: the router makes its backends on a run's first call and a system task
closes their clients when that run ends (trio cancels system tasks once the main task
has returned, so no call is still using them). An engine run a second time gets fresh
backends and clients.

The HTTP backends' modules (httpx, some 80 ms to import) are imported when a backend of
theirs is made: a run on the simulator never loads them.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from ..calls import Done, Event, Request
from ..config.backends import (
    BUILT_IN_BACKEND,
    AgnoBackend,
    AnthropicBackend,
    Assignment,
    Backends,
    BackendTable,
    ClaudeCodeBackend,
    CommandBackend,
    OpenAIBackend,
    SimBackend,
)
from ..errors import CallError, ProviderError
from .claude_code import ClaudeCodeProvider
from .command import CommandProvider
from .provider import Provider
from .sim import SimProvider

if TYPE_CHECKING:
    import httpx

__all__ = ["MakeBackend", "RoutingProvider", "RoutingStatistics", "RunClients", "routing_provider"]


@attrs.frozen
class _Held:
    """A client of a run: how to close it, and whether it is closed."""

    close: Callable[[], Awaitable[object]]
    closed: Callable[[], bool]


@final
@attrs.define(eq=False)
class RunClients:
    """The HTTP clients of one run's backends (httpx's, the Anthropic SDK's); all closed
    when the run ends."""

    _clients: list[_Held] = attrs.field(factory=list, init=False)

    def new(self, timeout: httpx.Timeout) -> httpx.AsyncClient:
        """A client for one backend, with that backend's timeouts as its defaults."""
        import httpx

        # No cap on connections: the shared gate above bounds the calls in flight, and a
        # pool limit would be a second, hidden limiter under it.
        client = httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=None))
        self._clients.append(_Held(client.aclose, lambda: client.is_closed))
        return client

    def anthropic(self, table: AnthropicBackend) -> Any:
        """An Anthropic SDK client for one backend (``anthropic_client``)."""
        from .anthropic import anthropic_client

        client = anthropic_client(table.api_key_env, table.base_url, table.connect_timeout_s, table.read_timeout_s)
        self._clients.append(_Held(client.close, client.is_closed))
        return client

    @property
    def open(self) -> int:
        return sum(not client.closed() for client in self._clients)

    async def close_when_cancelled(self) -> None:
        """Sleep until cancelled (the run ending), then close every client."""
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                for client in self._clients:
                    try:
                        await client.close()
                    except Exception:  # noqa: BLE001 - a system task that raises crashes the whole run
                        pass


#: Makes one named backend for one run, taking its HTTP clients from ``RunClients``.
MakeBackend = Callable[[RunClients], Provider]


@attrs.frozen
class RoutingStatistics:
    #: Calls started, by backend name.
    calls: Mapping[str, int]
    #: HTTP clients of the current run not yet closed.
    open_clients: int


@attrs.define(eq=False)
class _RunBackends:
    token: trio.lowlevel.TrioToken
    providers: dict[str, Provider]
    clients: RunClients


@final
@attrs.define(eq=False)
class RoutingProvider(Provider):
    """Send each request to the backend of its agent.

    Args:
        routes: agent id -> backend name.
        backends: backend name -> how to make it for a run; every routed name has one.
        order_sensitive: one of the backends answers calls differently by their order of
            arrival (``Provider.arrival_order_matters``: a simulated capacity).
    """

    routes: Mapping[str, str]
    backends: Mapping[str, MakeBackend]
    order_sensitive: bool = False
    _run: _RunBackends | None = attrs.field(default=None, init=False)
    _calls: dict[str, int] = attrs.field(factory=dict, init=False)
    _final: CallError | None = attrs.field(default=None, init=False)

    @property
    def final_refusal(self) -> CallError | None:
        """The first refusal no retry can cure (``CallError.final``: a spend or usage
        cap, a refused key) that a backend met, if any: the run should stop."""
        return self._final

    def __attrs_post_init__(self) -> None:
        missing = sorted(set(self.routes.values()) - set(self.backends))
        if missing:
            raise ValueError(f"routes name backends that are not given: {', '.join(missing)}")

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        name = self.routes.get(request.agent)
        if name is None:
            raise ProviderError(f"no backend is assigned to agent {request.agent}")
        provider = self._providers()[name]
        self._calls[name] = self._calls.get(name, 0) + 1
        try:
            async with aclosing(provider.invoke(request)) as events:
                async for event in events:
                    yield event
        except CallError as exc:
            self._note(exc)
            raise

    async def answer(self, request: Request) -> Done:
        """The routed backend's own ``answer`` (the simulator's needs one timer)."""
        name = self.routes.get(request.agent)
        if name is None:
            raise ProviderError(f"no backend is assigned to agent {request.agent}")
        provider = self._providers()[name]
        self._calls[name] = self._calls.get(name, 0) + 1
        try:
            return await provider.answer(request)
        except CallError as exc:
            self._note(exc)
            raise

    def _note(self, error: CallError) -> None:
        if error.final and self._final is None:
            self._final = error

    def arrival_order_matters(self) -> bool:
        return self.order_sensitive

    def statistics(self) -> RoutingStatistics:
        return RoutingStatistics(calls=dict(self._calls), open_clients=self._run.clients.open if self._run else 0)

    def _providers(self) -> dict[str, Provider]:
        """This run's backends, made on its first call."""
        token = trio.lowlevel.current_trio_token()
        if self._run is None or self._run.token is not token:
            clients = RunClients()
            providers = {name: make(clients) for name, make in self.backends.items()}
            self._run = _RunBackends(token, providers, clients)
            if clients.open:
                trio.lowlevel.spawn_system_task(clients.close_when_cancelled, name="manor: close backend clients")
        return self._run.providers


def routing_provider(assignment: Mapping[str, Assignment], backends: Backends, sim: SimProvider, run_id: str) -> Provider:
    """The backend a run's calls go to.

    Args:
        assignment: every agent's backend (``Config.assign_backends``).
        backends: the named backend tables.
        sim: the built-in simulated backend, seeded for the scene; a ``kind = "sim"``
            table is a copy of it with its own fault rates.
        run_id: the engine's run id, for the remote sessions of ``agno`` backends.

    Returns:
        ``sim`` itself when every agent is on it; otherwise a ``RoutingProvider``.

    Raises:
        ConfigError: a backend of kind ``anthropic`` is in use, and its SDK is not installed.
    """
    names = {chosen.backend for chosen in assignment.values()}
    if names <= {BUILT_IN_BACKEND}:
        return sim
    if any(isinstance(backends.table(name), AnthropicBackend) for name in names):
        from .anthropic import require_sdk

        require_sdk()  # before the run, in one line, rather than at its first call
    makers = {name: functools.partial(_make, backends.table(name), sim, run_id) for name in sorted(names)}
    tables = [backends.table(name) for name in names]
    moving = any(isinstance(table, SimBackend) and table.capacity is not None for table in tables)
    return RoutingProvider({agent: chosen.backend for agent, chosen in assignment.items()}, makers, order_sensitive=moving)


def _make(table: BackendTable | None, sim: SimProvider, run_id: str, clients: RunClients) -> Provider:
    """One backend from its table (None: the built-in simulator)."""
    match table:
        case None:
            return sim
        case SimBackend():
            return attrs.evolve(sim, error_rate=table.error_rate, hang_rate=table.hang_rate, capacity=table.capacity)
        case OpenAIBackend():
            import httpx

            from .openai import OpenAIProvider

            return OpenAIProvider(
                table.base_url,
                model=table.model,
                api_key_env=table.api_key_env,
                system=table.system,
                connect_timeout=table.connect_timeout_s,
                read_timeout=table.read_timeout_s,
                client=clients.new(httpx.Timeout(table.connect_timeout_s, read=table.read_timeout_s)),
            )
        case CommandBackend():
            return CommandProvider(table.argv, model=table.model, env=table.env, cwd=table.cwd, kill_after=table.kill_after_s)
        case AnthropicBackend():
            from .anthropic import AnthropicProvider

            what = table.base_url or "api.anthropic.com"
            return AnthropicProvider(clients.anthropic(table), model=table.model, what=what, system=table.system, max_tokens=table.max_tokens)
        case ClaudeCodeBackend():
            return ClaudeCodeProvider(
                table.argv, model=table.model, resume=table.resume, env=table.env, cwd=table.cwd, kill_after=table.kill_after_s
            )
        case AgnoBackend():
            import httpx

            from .agno import AgnoProvider, HttpAgentTransport

            connect = table.connect_timeout_s
            # The transport's own timeouts: with a shared client, its requests use the client's.
            timeout = httpx.Timeout(connect=connect, read=table.read_timeout_s, write=connect, pool=connect)
            transport = HttpAgentTransport(
                table.base_url,
                api_key_env=table.api_key_env,
                connect_timeout=connect,
                read_timeout=table.read_timeout_s,
                client=clients.new(timeout),
            )
            return AgnoProvider(
                transport,
                table.agent_id,
                workers=table.workers,
                timeout=table.timeout_s,
                cancel_remote=table.cancel_remote,
                stream=table.stream,
                run_id=run_id,
                session_id=table.session_id,
            )
    raise AssertionError(f"unhandled backend table {table!r}")
