"""A minimal HTTP/1.1 server: h11 over ``trio.serve_tcp``, one handler for every request.

Small on purpose: keep-alive, bodies up to 1 MiB, streamed (chunked) responses. While a
request is being handled the connection is watched: a client that hangs up cancels its
handler, which is how ``manor serve-agent`` drops a queued run whose client has gone.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import attrs
import h11
import trio

__all__ = ["HttpRequest", "HttpResponse", "serve_http"]

_MAX_BODY = 1 << 20
_READ = 65536


@attrs.frozen
class HttpRequest:
    """A request as the handler sees it; header names are lower case."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


@attrs.frozen
class HttpResponse:
    """A whole response (``body``), or a streamed one (``stream``, sent chunked)."""

    status: int
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None

    @classmethod
    def json(cls, status: int, value: Any, headers: Sequence[tuple[str, str]] = ()) -> HttpResponse:
        return cls(status, (("content-type", "application/json"), *headers), json.dumps(value).encode())


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


async def serve_http(
    handler: Handler,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    on_connection: Callable[[], None] | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``handler`` until cancelled; ``task_status.started`` gets the base URL.

    Args:
        port: 0 picks a free port.
        on_connection: called for every connection accepted (to count them).
    """

    async def connection(stream: trio.SocketStream) -> None:
        if on_connection is not None:
            on_connection()
        await _Connection(stream, handler).serve()

    listeners = await trio.open_tcp_listeners(port, host=host)
    address = listeners[0].socket.getsockname()
    shown = f"[{address[0]}]" if ":" in address[0] else address[0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, connection, listeners)
        task_status.started(f"http://{shown}:{address[1]}")


@attrs.define(eq=False)
class _Connection:
    stream: trio.SocketStream
    handler: Handler
    conn: h11.Connection = attrs.field(factory=lambda: h11.Connection(h11.SERVER))

    async def serve(self) -> None:
        try:
            while True:
                request = await self._read_request()
                if request is None:
                    return
                if not await self._exchange(request):
                    return
                if self.conn.our_state is not h11.DONE or self.conn.their_state is not h11.DONE:
                    return
                self.conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return
        finally:
            await self.stream.aclose()

    async def _read_request(self) -> HttpRequest | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                await self._send_error(exc.error_status_hint, f"bad request: {exc}")
                return None
            if event is h11.NEED_DATA:
                self.conn.receive_data(await self.stream.receive_some(_READ))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > _MAX_BODY:
                    await self._send_error(413, "request body too large")
                    return None
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in head.headers}
                path = head.target.decode("latin-1").split("?", 1)[0]
                return HttpRequest(head.method.decode("ascii"), path, headers, bytes(body))
            else:  # ConnectionClosed, PAUSED
                return None

    async def _exchange(self, request: HttpRequest) -> bool:
        """Handle one request and send its response; False if the client hung up."""
        gone = False
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal gone
                try:
                    data = await self.stream.receive_some(_READ)
                except trio.BrokenResourceError:
                    data = b""
                if data:  # the next request, pipelined: keep it for later
                    self.conn.receive_data(data)
                    return
                gone = True
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            await self._respond(request)
            nursery.cancel_scope.cancel()
        return not gone

    async def _respond(self, request: HttpRequest) -> None:
        try:
            response = await self.handler(request)
        except Exception as exc:  # a bug in a handler must not take the server down
            response = HttpResponse.json(500, {"error": {"message": f"internal error: {exc!r}", "type": "server_error"}})
        headers = list(response.headers)
        if response.stream is None:
            headers.append(("content-length", str(len(response.body))))
            await self._send(h11.Response(status_code=response.status, headers=headers))
            if response.body:
                await self._send(h11.Data(data=response.body))
        else:
            # Closed however this ends, so a hung-up client's run is let go at once.
            async with aclosing(response.stream) as chunks:  # type: ignore[type-var]
                await self._send(h11.Response(status_code=response.status, headers=headers))
                async for chunk in chunks:
                    await self._send(h11.Data(data=chunk))
        await self._send(h11.EndOfMessage())

    async def _send_error(self, status: int, message: str) -> None:
        if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(body))), ("connection", "close")]
        try:
            await self._send(h11.Response(status_code=status, headers=headers))
            await self._send(h11.Data(data=body))
            await self._send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            pass

    async def _send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            await self.stream.send_all(data)
