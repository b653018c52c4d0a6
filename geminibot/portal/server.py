"""The portal's HTTP server: HTTP/1.1 on trio (h11 parses and frames), serving the
portal's ASGI application (:class:`~geminibot.portal.app.PortalApp`) within the limits
of :class:`~geminibot.portal.limits.PortalLimits`.

It speaks HTTP/1.1 only. A fronting proxy (or the browser, over TLS) negotiates HTTP/2
with the client and speaks HTTP/1.1 to the portal; on this plain port HTTP/2 is refused:
its connection preface (``PRI * HTTP/2.0``) is answered ``505`` and the connection
closed, and ``Upgrade: h2c`` (or any other upgrade) is ignored, the request answered in
HTTP/1.1 (RFC 9110, 7.8). So none of HTTP/2's floods (rapid reset, SETTINGS/PING, zero
windows, endless streams) reaches the portal.

Each connection is bounded in time in every state: ``keep_alive_timeout`` waiting for a
request, ``head_timeout`` sending its head (at most ``max_head_bytes``, else ``431``),
``body_timeout`` sending a body the application reads (else ``408``), ``send_timeout``
with its window closed (``TCP_USER_TIMEOUT``, set by :func:`listen`); a body the
application does not read is never read: the connection is closed after the answer.
Connections are counted (:class:`~geminibot.portal.connections.ConnectionTable`): at the
descriptor limit less ``descriptor_reserve`` a newcomer closes the connection that has
waited longest for its client (idle, sending a head, or sending a body), or, when every
one has work in hand, is answered ``503`` itself. ``EMFILE`` from ``accept`` is one line on stderr a minute, never
a traceback; nor is anything a client sent ever written there.
"""

from __future__ import annotations

import contextlib
import errno
import resource
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, TextIO
from urllib.parse import unquote

import h11
import trio

from geminibot.cliutil import say
from geminibot.portal.connections import ConnectionTable
from geminibot.portal.limits import PortalLimits

ASGIApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]

#: Bytes read from a connection at a time.
MAX_RECV = 64 * 1024
#: ``accept`` errors that mean "out of descriptors or memory for now": retried.
CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: Connections waiting for their clients closed when ``accept`` fails for want of
#: descriptors (the oldest first), and ...
EXHAUSTED_DROP = 8
#: ... seconds before ``accept`` is tried again, ...
ACCEPT_RETRY = 0.1
#: ... and the least seconds between two lines on stderr saying so.
EXHAUSTED_LOG_EVERY = 60.0
#: After an error answer, what the client still sends is read and dropped: at most this
#: many bytes, for at most this many seconds.
LINGER_BYTES = 256 * 1024
LINGER_SECONDS = 2.0
#: Newcomers answered 503 at once when every connection has work in hand; more are
#: closed without a word (each answer holds a descriptor for a few seconds).
MAX_REFUSING = 64
#: HTTP versions answered.
VERSIONS = (b"1.0", b"1.1")


def listen(host: str, port: int, send_timeout: float) -> list[trio.SocketListener]:
    """Listening sockets on ``host``:``port``, their accepted connections dropped by the
    kernel after ``send_timeout`` seconds with an unread answer (``TCP_USER_TIMEOUT``,
    inherited from the listening socket; Linux only)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        option = getattr(socket, "TCP_USER_TIMEOUT", None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, round(send_timeout * 1000))
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return [trio.SocketListener(trio.socket.from_stdlib_socket(sock))]


def connection_capacity(reserve: int) -> int:
    """Connections the portal may hold: the descriptor limit (``ulimit -n``) less
    ``reserve``, at least 1."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(1, soft - reserve)


class _Connection:
    """One client connection: its stream and what cancels it."""

    def __init__(self, stream: trio.SocketStream, max_head_bytes: int) -> None:
        self.stream = stream
        self.scope = trio.CancelScope()
        self.http = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        try:
            peer = stream.socket.getpeername()
            local = stream.socket.getsockname()
            self.client: tuple[str, int] | None = (str(peer[0]), int(peer[1]))
            self.server: tuple[str, int] | None = (str(local[0]), int(local[1]))
        except OSError:  # already reset
            self.client = self.server = None


class PortalServer:
    """Serves ``app`` on listeners until told to stop (:meth:`serve`). ``headers`` go on
    the answers the server makes itself (the application adds its own)."""

    def __init__(
        self,
        app: ASGIApp,
        limits: PortalLimits,
        *,
        headers: list[tuple[bytes, bytes]],
        capacity: int,
        err: TextIO = sys.stderr,
    ) -> None:
        self.app = app
        self.limits = limits
        self.headers = headers
        self.table: ConnectionTable[_Connection] = ConnectionTable(capacity)
        self.err = err
        self.stopping = False
        self._exhausted_at: float | None = None
        self._exhausted_unsaid = 0
        self._refusing = 0  # newcomers being answered 503 now

    async def serve(self, listeners: list[trio.SocketListener], stop: trio.Event) -> None:
        """Accept and answer until ``stop`` is set; then close the listeners and the
        connections waiting for their clients, and give the others ``shutdown_grace``
        seconds to be answered."""
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:
                for listener in listeners:
                    accepting.start_soon(self._accept_loop, listener, connections)
                await stop.wait()
                accepting.cancel_scope.cancel()
            self.stopping = True
            for listener in listeners:
                await trio.aclose_forcefully(listener)
            for conn in list(self.table):
                if self.table.is_idle(conn):
                    conn.scope.cancel()
            connections.cancel_scope.deadline = trio.current_time() + self.limits.shutdown_grace

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in CAPACITY_ERRNOS:
                    raise
                self._exhausted(exc)
                await trio.sleep(ACCEPT_RETRY)
                continue
            conn = _Connection(stream, self.limits.max_head_bytes)
            if self.table.full:
                oldest = self.table.oldest_idle()
                if oldest is None:
                    if self._refusing < MAX_REFUSING:
                        nursery.start_soon(self._refuse, conn)
                    else:  # refusing many already: closed without a word
                        await trio.aclose_forcefully(conn.stream)
                    continue
                self.table.remove(oldest)
                oldest.scope.cancel()
            self.table.add(conn)
            nursery.start_soon(self._connection, conn)

    def _exhausted(self, exc: OSError) -> None:
        """Out of descriptors: the :data:`EXHAUSTED_DROP` connections waiting longest for
        their clients make room, and one line a minute says so."""
        for _ in range(EXHAUSTED_DROP):
            oldest = self.table.oldest_idle()
            if oldest is None:
                break
            self.table.remove(oldest)
            oldest.scope.cancel()
        now = trio.current_time()
        if self._exhausted_at is not None and now - self._exhausted_at < EXHAUSTED_LOG_EVERY:
            self._exhausted_unsaid += 1
            return
        more = f" ({self._exhausted_unsaid} more since the last such line)"
        name = errno.errorcode.get(exc.errno or 0, "?")
        say(
            self.err,
            f"geminibot portal: cannot accept a connection ({name}, {len(self.table)} open): "
            f"raise the descriptor limit (ulimit -n){more if self._exhausted_unsaid else ''}",
        )
        self.err.flush()
        self._exhausted_at = now
        self._exhausted_unsaid = 0

    async def _refuse(self, conn: _Connection) -> None:
        """Every connection has work in hand: the newcomer is told to come back."""
        self._refusing += 1
        try:
            with trio.move_on_after(self.limits.keep_alive_timeout):
                suppress = contextlib.suppress(
                    trio.BrokenResourceError, trio.ClosedResourceError, OSError
                )
                with suppress:
                    await self._error(conn, 503, [(b"retry-after", b"5")])
        finally:
            self._refusing -= 1
            await trio.aclose_forcefully(conn.stream)

    async def _connection(self, conn: _Connection) -> None:
        try:
            with conn.scope:
                await self._requests(conn)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the client went away
        except Exception as exc:  # a fault of the server: one line, no client bytes
            say(self.err, f"geminibot portal: connection closed: {type(exc).__name__}")
        finally:
            self.table.remove(conn)
            await trio.aclose_forcefully(conn.stream)

    async def _requests(self, conn: _Connection) -> None:
        """Request after request on one connection, until one of them closes it."""
        for _ in range(self.limits.max_requests_per_connection):
            self.table.idle(conn)
            request = await self._read_head(conn)
            if request is None or self.stopping:
                return
            self.table.busy(conn)
            exchange = _Exchange(self, conn, request)
            if not await exchange.run() or self.stopping:
                return
            conn.http.start_next_cycle()

    async def _read_head(self, conn: _Connection) -> h11.Request | None:
        """The next request's head, or None when the connection is to be closed (closed
        by the client, too slow, or answered an error)."""
        http = conn.http
        limits = self.limits
        pending = len(http.trailing_data[0])  # pipelined bytes already read
        received = pending
        now = trio.current_time()
        wait = limits.head_timeout if pending else limits.keep_alive_timeout
        with trio.CancelScope(deadline=now + wait) as waiting:
            while True:
                try:
                    event = http.next_event()
                except h11.RemoteProtocolError as exc:
                    await self._error(conn, exc.error_status_hint)
                    return None
                if event is h11.NEED_DATA:
                    data = await conn.stream.receive_some(MAX_RECV)
                    if data and not received:
                        waiting.deadline = trio.current_time() + limits.head_timeout
                    received += len(data)
                    http.receive_data(bytes(data))
                    continue
                if not isinstance(event, h11.Request):
                    return None
                if received - len(http.trailing_data[0]) > limits.max_head_bytes:
                    await self._error(conn, 431)
                    return None
                if event.http_version not in VERSIONS:  # HTTP/2's preface, or worse
                    await self._error(conn, 505)
                    return None
                return event
        return None  # nothing, or not a whole head, in time: closed without a word

    async def _error(
        self, conn: _Connection, status: int, more: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        """An answer of the server's own, empty, and the connection closed after it."""
        if conn.http.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        head = [*self.headers, *(more or []), (b"content-length", b"0"), (b"connection", b"close")]
        try:
            response = h11.Response(status_code=status, headers=head, reason=_reason(status))
            data = conn.http.send(response)
            data = (data or b"") + (conn.http.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            return
        with trio.move_on_after(self.limits.keep_alive_timeout):
            await conn.stream.send_all(data)
            await _linger(conn.stream)


async def _linger(stream: trio.SocketStream) -> None:
    """Close gently after an error answer: end the sending side, then read and drop what
    the client still sends (up to :data:`LINGER_BYTES`, for :data:`LINGER_SECONDS`), so
    that closing with unread bytes (a reset) does not destroy the answer in flight."""
    await stream.send_eof()
    left = LINGER_BYTES
    with trio.move_on_after(LINGER_SECONDS):
        while left > 0:
            data = await stream.receive_some(MAX_RECV)
            if not data:
                return
            left -= len(data)


class _Exchange:
    """One request on a connection, handed to the ASGI application: its ``receive``
    reads the body (within ``body_timeout``), its ``send`` frames the answer."""

    def __init__(self, server: PortalServer, conn: _Connection, request: h11.Request) -> None:
        self.server = server
        self.conn = conn
        self.request = request
        self.body_deadline = trio.current_time() + server.limits.body_timeout
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.started = False
        self.ended = False
        self.broken = False
        self.disconnected = False
        self.waiting = False  # for the body, since the first receive

    def scope(self) -> dict[str, Any]:
        target = bytes(self.request.target)
        path, _, query = target.partition(b"?")
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": self.request.http_version.decode("ascii"),
            "method": self.request.method.decode("ascii", "replace").upper(),
            "scheme": "http",
            "path": unquote(path.decode("latin-1")),
            "raw_path": path,
            "query_string": query,
            "root_path": "",
            "headers": [(bytes(name), bytes(value)) for name, value in self.request.headers],
            "client": self.conn.client,
            "server": self.conn.server,
            "extensions": {},
        }

    async def run(self) -> bool:
        """Answer the request; whether the connection may carry another."""
        try:
            await self.server.app(self.scope(), self.receive, self.send)
        except Exception as exc:  # the application's own fault (it answers its faults)
            say(self.server.err, f"geminibot portal: request failed: {type(exc).__name__}")
        if not self.started and not self.broken:
            fault = {"type": "http.response.start", "status": 500, "headers": self.server.headers}
            await self.send(fault)
            await self.send({"type": "http.response.body", "body": b""})
        if not self.ended or self.broken:
            return False
        return self._request_read()

    def _request_read(self) -> bool:
        """Whether the whole request has been read (the application read its body, or it
        had none), so that the connection can carry the next one."""
        http = self.conn.http
        while http.their_state is h11.SEND_BODY:
            try:
                event = http.next_event()
            except h11.RemoteProtocolError:
                return False
            if event is h11.NEED_DATA or isinstance(event, h11.Data):
                return False  # a body not read: never read, the connection closed
        return http.our_state is h11.DONE and http.their_state is h11.DONE

    async def receive(self) -> dict[str, Any]:
        http = self.conn.http
        if self.disconnected or self.broken:
            return {"type": "http.disconnect"}
        if http.they_are_waiting_for_100_continue:
            continuing = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
            await self._write(http.send(continuing))
        if not self.waiting:  # waiting for the client: the first to make room, if need be
            self.waiting = True
            self.server.table.idle(self.conn)
        with trio.move_on_at(self.body_deadline):
            while True:
                try:
                    event = http.next_event()
                except h11.RemoteProtocolError:
                    break
                if event is h11.NEED_DATA:
                    data = await self.conn.stream.receive_some(MAX_RECV)
                    http.receive_data(bytes(data))
                    continue
                if isinstance(event, h11.Data):
                    return {"type": "http.request", "body": bytes(event.data), "more_body": True}
                if isinstance(event, h11.EndOfMessage):
                    self.disconnected = True  # (nothing more to receive)
                    self.server.table.busy(self.conn)
                    return {"type": "http.request", "body": b"", "more_body": False}
                break
        self.disconnected = True  # too slow, or gone: the application answers 408
        self.server.table.busy(self.conn)
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if self.broken or self.ended:
            return
        http = self.conn.http
        kind = message["type"]
        if kind == "http.response.start":
            self.status = int(message["status"])
            self.headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
            return
        if kind != "http.response.body":
            return
        try:
            if not self.started:
                self.started = True
                headers = [*self.headers, (b"date", formatdate(usegmt=True).encode())]
                head = h11.Response(
                    status_code=self.status, headers=headers, reason=_reason(self.status)
                )
                await self._write(http.send(head))
            body = bytes(message.get("body", b""))
            if body:
                await self._write(http.send(h11.Data(data=body)))
            if not message.get("more_body", False):
                await self._write(http.send(h11.EndOfMessage()))
                self.ended = True
        except h11.LocalProtocolError as exc:  # an answer that breaks HTTP/1.1's rules
            say(self.server.err, f"geminibot portal: answer not sent: {exc}")
            self.broken = True

    async def _write(self, data: bytes | None) -> None:
        if not data or self.broken:
            return
        try:
            await self.conn.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""
