"""The trio TLS Gemini server: virtual hosting by SNI, request handling, limits and a log.

Shared by every server geminibot has: ``capsule-server`` (a folder of capsules, in
:mod:`capsule_server`) and ``geminibot serve-search`` (:mod:`geminibot.searchcap`). What
they serve is a :data:`Handler` per host name: a plain function from the request's URL to a
:class:`Resolution` (status, meta, body), with no I/O of its own beyond reading files, or to
an awaitable of one (a handler that does its I/O off the event loop itself); this
module does the network, TLS, certificates, limits and the access log around it.

One connection carries one request. The flow of a connection:

1. More than ``ServerLimits.max_per_address`` connections open from the client's address (an
   IPv6 client's /64): closed before TLS (no answer). More than ``ServerLimits.max_open``
   connections open in all: the oldest connection that has not yet sent its request is
   closed to make room, or, if every one has, the new one is closed before TLS.
2. TLS handshake; the ``sni_callback`` picks the context (certificate) of the host the client
   named, or the ``localhost`` fallback certificate for a missing or unknown name. The server
   sends :data:`SESSION_TICKETS` TLS 1.3 session ticket; a client offering it resumes
   (the callback still runs and picks the host).
3. Read the request line, up to CRLF, within ``ServerLimits.header_timeout`` (slowloris): more
   than 1024 bytes before CRLF gives 59; a bare LF is not a line end (the server waits for
   CRLF until the timeout, as gemini-diagnostics expects); the timeout closes the connection.
4. Validation (:func:`geminibot.gemini.urls.parse_request`, plus the CRLF and dot segments
   that climb above the root): 59 malformed, 53 another scheme.
5. The client address over its rate (a token bucket of ``ServerLimits.rate_burst`` requests
   refilled at ``ServerLimits.rate_per_second``), or more than ``ServerLimits.max_connections``
   requests being answered at once: ``44 SECONDS``.
6. 53 for a host not served, a host other than the SNI name, or a port that is neither
   1965 nor the one the client connected to.
7. The host's handler: a file, a body, a generated body, or any other status (a handler
   that raises gives ``40``, logged); sent within ``ServerLimits.send_timeout``, then TLS
   close_notify.

Every connection that got as far as TCP gives one access-log record
(:mod:`geminibot.gemini.accesslog`); its ``status`` is the status actually sent (null when
no header went out).
"""

from __future__ import annotations

import inspect
import ipaddress
import math
import socket
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import trio

from geminibot.gemini.accesslog import AccessRecord, now_iso
from geminibot.gemini.certs import FALLBACK_HOST, CertInfo, ensure_certificate
from geminibot.gemini.ratelimit import RateLimiter
from geminibot.gemini.status import Status
from geminibot.gemini.tls import InvalidServerName, TLSConnection
from geminibot.gemini.urls import DEFAULT_PORT, MAX_REQUEST_BYTES, parse_request
from geminibot.urls import REFERENCE, URL, InvalidURL, UnsupportedScheme

HEADER_TIMEOUT = 10.0
"""Seconds a client has, from TCP accept, to finish TLS and send its request line."""

SEND_TIMEOUT = 60.0
"""Seconds to send a response (and close) before the connection is dropped."""

MAX_CONNECTIONS = 256
"""Requests being answered at once above which a request gets ``44`` (see ``OVERLOAD_RETRY``).
Connections that have not sent their request yet do not count."""

MAX_OPEN = 4096
"""Connections open at once (served, waiting for their request or being refused); at this
many, the oldest one that has not sent its request is closed for a new one."""

MAX_PER_ADDRESS = 32
"""Connections open at once from one client address (an IPv6 client's /64); more are
closed before TLS."""

OVERLOAD_RETRY = 5
"""Seconds to wait, in the ``44`` sent when the server is at ``MAX_CONNECTIONS``."""

RATE_BURST = 60
"""Requests a client address may make in a burst before it is slowed down with ``44``."""

RATE_PER_SECOND = 10.0
"""Sustained requests per second allowed per client address."""

SHUTDOWN_GRACE = 5.0
"""Seconds in-flight connections get to finish after SIGINT/SIGTERM."""

MAX_REQUEST_LINE = MAX_REQUEST_BYTES + 2
"""The longest request line: a 1024-byte URL and CRLF."""

READ_CHUNK = 4096
FILE_CHUNK = 64 * 1024
SMALL_FILE = 256 * 1024
"""Files up to this size are read at once and sent with the header in one write."""


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What the Gemini server allows each client and itself: timeouts, connections (in all,
    open, per address), the per-address request rate, the grace period at shutdown."""

    header_timeout: float = HEADER_TIMEOUT
    send_timeout: float = SEND_TIMEOUT
    max_connections: int = MAX_CONNECTIONS
    max_open: int = MAX_OPEN
    max_per_address: int = MAX_PER_ADDRESS
    overload_retry: int = OVERLOAD_RETRY
    rate_burst: int = RATE_BURST
    rate_per_second: float = RATE_PER_SECOND
    shutdown_grace: float = SHUTDOWN_GRACE


class Chunks(Protocol):
    """A body made on demand (the server sends it chunk by chunk)."""

    def chunks(self) -> Iterator[bytes]: ...


@dataclass(frozen=True, slots=True)
class Resolution:
    """What to answer: status and meta, and for 20 exactly one body source."""

    status: int
    meta: str
    file: Path | None = None
    body: bytes | None = None
    generated: Chunks | None = None

    @property
    def header(self) -> bytes:
        return f"{self.status} {self.meta}\r\n".encode()

    def read_body(self) -> bytes:
        """The whole body, read at once (for tools and tests; the server streams)."""
        if self.body is not None:
            return self.body
        if self.generated is not None:
            return b"".join(self.generated.chunks())
        if self.file is not None:
            return self.file.read_bytes()
        return b""


#: TLS 1.3 session tickets sent after each handshake, full or resumed. A client that keeps
#: one and offers it on its next connection (the crawler does) resumes the session: the
#: server sends no certificate and makes no signature, the client checks none. Tickets are
#: stateless (encrypted by a key of the process: nothing is kept per client) and valid
#: until the server restarts or their lifetime (OpenSSL's, 2 hours) ends. One, not
#: OpenSSL's default two: every connection brings a fresh one, so a client that uses each
#: ticket once (as RFC 8446 advises) still resumes every next connection, and each ticket
#: costs the server some CPU on every handshake. Figures: docs/benchmarks.md, "TLS
#: session tickets".
SESSION_TICKETS = 1

Handler = Callable[[URL], Resolution | Awaitable[Resolution]]
"""What a host serves: the request's URL (validated, for this host and port) to the answer
(or to an awaitable of it)."""


def _context(info: CertInfo) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(info.cert_path, info.key_path)
    ctx.num_tickets = SESSION_TICKETS
    return ctx


def client_key(address: str) -> str:
    """What the per-address limits count: an IPv4 address as is, an IPv4-mapped IPv6
    address as IPv4, any other IPv6 address as its /64 network (one host or home usually
    holds a whole /64, so counting single addresses would not limit anyone)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip.packed, 64), strict=False))
    return address


#: The client whose request a handler is answering (its :func:`client_key`; "" outside
#: a request), for a handler's own limits per client (the search capsule's work budget).
CURRENT_CLIENT: ContextVar[str] = ContextVar("geminibot_client", default="")


async def open_listeners(hosts: Sequence[str], port: int) -> list[trio.SocketListener]:
    """Listeners on every address ``hosts`` resolve to, all on one port (with ``port`` 0,
    the one the system chose for the first). Raises ``OSError``."""
    addresses: list[str] = []
    for host in hosts:
        for *_, sockaddr in await trio.socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            if str(sockaddr[0]) not in addresses:
                addresses.append(str(sockaddr[0]))
    listeners: list[trio.SocketListener] = []
    try:
        for address in addresses:
            listeners += await trio.open_tcp_listeners(port, host=address)
            port = listeners[0].socket.getsockname()[1]
    except OSError:
        for listener in listeners:
            await listener.aclose()
        raise
    return listeners


class _Waiting:
    """A connection that has not sent its request line yet (it may be closed for room)."""

    __slots__ = ("evicted", "scope")

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope
        self.evicted = False


class GeminiServer:
    """Serves ``sites`` (host name to its :data:`Handler`), each host with its own
    certificate from ``cert_dir`` (made on first start). Run with :meth:`serve` in a nursery.

    Every certificate is checked (or made) when the server is built; a host's TLS context,
    which loads its certificate into OpenSSL, is built when a client first names the host."""

    def __init__(
        self,
        sites: Mapping[str, Handler],
        cert_dir: Path,
        limits: ServerLimits | None = None,
        log: Callable[[AccessRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sites = dict(sites)
        self.limits = limits or ServerLimits()
        self._log = log
        self._clock = clock
        self._rate = RateLimiter(self.limits.rate_burst, self.limits.rate_per_second)
        self._open = 0
        self._answering = 0
        self._per_address: Counter[str] = Counter()
        self._waiting: dict[int, _Waiting] = {}  # in accept order: the oldest first
        self._next_id = 0
        self._certificates = {host: ensure_certificate(cert_dir, host) for host in self.sites}
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._host_of: dict[int, str] = {}
        fallback = ensure_certificate(cert_dir, FALLBACK_HOST)
        self._unknown_name = _context(fallback)  # SNI names a host not served
        self.ssl_context = _context(fallback)  # also used when there is no SNI
        self.ssl_context.sni_callback = self._choose_context
        self._accept_scope = trio.CancelScope()
        self.port: int | None = None
        self.log_failure: str | None = None
        self.stopping = trio.Event()
        """Set by :meth:`shutdown`."""

    @property
    def open_connections(self) -> int:
        """Connections open now (waiting for their request, being answered or refused)."""
        return self._open

    @property
    def answering(self) -> int:
        """Requests being answered now (what ``ServerLimits.max_connections`` bounds)."""
        return self._answering

    def _choose_context(
        self, sslobj: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext
    ) -> None:
        if server_name is not None:
            sslobj.context = self._context_for(server_name.lower().rstrip("."))

    def _context_for(self, name: str) -> ssl.SSLContext:
        """The TLS context of the served host ``name`` (built on its first use), or the
        one for names not served."""
        context = self._contexts.get(name)
        if context is None:
            certificate = self._certificates.get(name)
            if certificate is None:
                return self._unknown_name
            context = self._contexts[name] = _context(certificate)
            self._host_of[id(context)] = name
        return context

    async def serve(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on ``listeners`` until :meth:`shutdown`; then let connections finish."""
        async with trio.open_nursery() as handlers:
            with self._accept_scope:
                async with trio.open_nursery() as acceptors:
                    for listener in listeners:
                        acceptors.start_soon(self._accept_loop, listener, handlers)
                    task_status.started()
            for listener in listeners:
                with suppress(trio.ClosedResourceError, OSError):
                    await listener.aclose()
            handlers.cancel_scope.deadline = trio.current_time() + self.limits.shutdown_grace

    def shutdown(self) -> None:
        """Stop accepting; connections in flight get ``ServerLimits.shutdown_grace`` seconds."""
        self._accept_scope.cancel()
        self.stopping.set()

    async def _accept_loop(self, listener: trio.SocketListener, handlers: trio.Nursery) -> None:
        while True:
            try:
                accepted, address = await listener.socket.accept()
            except OSError as exc:  # EMFILE and friends: back off instead of spinning
                self._emit(AccessRecord("", error=f"accept: {exc.strerror}"))
                await trio.sleep(0.1)
                continue
            # From here on OpenSSL drives the socket itself (see geminibot.gemini.tls).
            sock = socket.socket(
                accepted.family, accepted.type, accepted.proto, fileno=accepted.detach()
            )
            client = str(address[0]) if isinstance(address, tuple) else ""
            key = client_key(client)
            refusal = None
            if self._per_address[key] >= self.limits.max_per_address:
                refusal = "over the per-address connection limit"
            elif self._open >= self.limits.max_open and not self._make_room():
                refusal = "over the open connection limit"
            if refusal is not None:
                sock.close()
                self._emit(AccessRecord(client, error=refusal))
                continue
            with suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._open += 1
            self._per_address[key] += 1
            handlers.start_soon(self._handle, sock, client, key)

    def _make_room(self) -> bool:
        """Close the oldest connection that has not sent its request; False if none has."""
        oldest = next(iter(self._waiting), None)
        if oldest is None:
            return False
        waiting = self._waiting.pop(oldest)
        waiting.evicted = True
        waiting.scope.cancel()
        return True

    async def _handle(self, sock: socket.socket, client: str, key: str) -> None:
        started, accepted_at = self._clock(), now_iso()
        record = AccessRecord(client)
        try:
            await self._converse(sock, record)
        finally:
            record.time = accepted_at
            self._open -= 1
            self._per_address[key] -= 1
            if not self._per_address[key]:
                del self._per_address[key]
            record.duration = self._clock() - started
            self._emit(record)

    async def _converse(self, sock: socket.socket, record: AccessRecord) -> None:
        try:
            local_port = sock.getsockname()[1]
            conn = TLSConnection(sock, self.ssl_context)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            record.error = f"tls: {_reason(exc)}"
            return
        received = bytearray()
        resolution: Resolution | None = None
        self._next_id += 1
        number = self._next_id
        line: bytes | None = None
        try:
            request = await self._read_request(conn, record, number, received)
            if request is None:
                return
            line, sni = request
            self._answering += 1
            resolution = await self._answer(line, record, self._sni_host(sni), local_port)
            with trio.move_on_after(self.limits.send_timeout) as send_scope:
                await _send(conn, resolution)
            if send_scope.cancelled_caught:
                record.error = "send timeout"
            _record_sent(record, resolution, conn.bytes_sent)
        except (ssl.SSLError, OSError) as exc:
            record.error = f"connection: {_reason(exc)}"
            if resolution is not None:
                _record_sent(record, resolution, conn.bytes_sent)
        except _ClientClosed:
            record.error = "closed before sending a request"
        except _NoLineEnd:
            record.error = "closed without close_notify before the end of the request line"
            record.request = _excerpt(received)
        finally:
            self._waiting.pop(number, None)
            if line is not None:
                self._answering -= 1
            conn.close()

    async def _read_request(
        self, conn: TLSConnection, record: AccessRecord, number: int, received: bytearray
    ) -> tuple[bytes, int] | None:
        """The handshake and the request line, within the header timeout: the line and the
        id of the SNI's context, or None when ``record.error`` says why there is none."""
        sni = 0
        line: bytes | None = None
        with trio.move_on_after(self.limits.header_timeout) as header_scope:
            waiting = self._waiting[number] = _Waiting(header_scope)
            try:
                await conn.do_handshake()
            except InvalidServerName as exc:
                record.error = f"tls: {exc}"
                return None
            except (ssl.SSLError, OSError) as exc:
                record.error = f"tls: {_reason(exc)}"
                return None
            sni = id(conn.context)
            line = await _read_request_line(conn, received)
        self._waiting.pop(number, None)
        if line is None:
            if waiting.evicted:
                record.error = "closed to make room (had sent no request)"
            else:
                record.error = "header timeout"
            if received:
                record.request = _excerpt(received)
            return None
        return line, sni

    def _sni_host(self, context_id: int) -> str | None:
        """The served host the client named in SNI; "" for an unknown name; None for none."""
        if context_id == id(self._unknown_name):
            return ""
        return self._host_of.get(context_id)

    async def _answer(
        self, line: bytes, record: AccessRecord, sni_host: str | None, local_port: int
    ) -> Resolution:
        if not line.endswith(b"\r\n") or len(line) > MAX_REQUEST_LINE:
            record.request = _excerpt(line)
            too_long = len(line) > MAX_REQUEST_LINE
            meta = "Request longer than 1024 bytes" if too_long else "Request must end with CRLF"
            return Resolution(Status.BAD_REQUEST, meta)
        try:
            url = parse_request(line)
        except UnsupportedScheme as exc:
            record.request = _excerpt(line)
            return Resolution(
                Status.PROXY_REQUEST_REFUSED, f"This server does not serve {exc.scheme}: URLs"
            )
        except InvalidURL as exc:
            record.request = _excerpt(line)
            return Resolution(Status.BAD_REQUEST, str(exc)[:200])
        if climbs_above_root(line[:-2].decode("utf-8")):
            record.request = _excerpt(line)
            return Resolution(Status.BAD_REQUEST, "Dot segments climb above the root")
        record.host = url.host
        record.path = url.path_query
        wait = self._rate.take(client_key(record.client), self._clock())
        if wait is not None:
            record.limited = "rate"
            return Resolution(Status.SLOW_DOWN, str(max(1, math.ceil(wait))))
        if self._answering > self.limits.max_connections:
            record.limited = "busy"
            return Resolution(Status.SLOW_DOWN, str(self.limits.overload_retry))
        handler = self.sites.get(url.host)
        # No SNI (a client connecting by IP address) is allowed; a different name is not.
        if handler is None or (sni_host is not None and sni_host != url.host):
            return Resolution(Status.PROXY_REQUEST_REFUSED, "This server does not serve that host")
        # 1965 is always accepted: the server may sit behind a forward from it.
        if url.port not in (DEFAULT_PORT, local_port):
            return Resolution(Status.PROXY_REQUEST_REFUSED, "This server does not serve that port")
        CURRENT_CLIENT.set(client_key(record.client))
        try:
            answer = handler(url)
            return await answer if inspect.isawaitable(answer) else answer
        except Exception as exc:  # a handler's bug must not take the server down
            record.error = f"handler: {type(exc).__name__}: {exc}"[:200]
            return Resolution(Status.TEMPORARY_FAILURE, "Internal error")

    def _emit(self, record: AccessRecord) -> None:
        """Log ``record``. If the log cannot be written (a full disk, a closed pipe), the
        server stops (connections in flight finish, unlogged) rather than serve unlogged:
        ``log_failure`` says why."""
        if self._log is None or self.log_failure is not None:
            return
        try:
            self._log(record)
        except OSError as exc:
            self.log_failure = exc.strerror or str(exc)
            self.shutdown()


class _ClientClosed(Exception):
    """The client closed the connection before its answer was sent."""

    pass


class _NoLineEnd(Exception):
    """TCP closed (without a TLS close_notify) before the request line ended."""


def climbs_above_root(url: str) -> bool:
    """True if the path of the absolute URL ``url`` has more ``..`` segments (``%2E`` is a
    dot, as RFC 3986 says) than there are segments above them to remove.

    Normalisation (RFC 3986 5.2.4) would quietly keep such a path at the root
    (``/../../`` is ``/``); the server refuses it instead, as gemini-diagnostics expects
    ("a URL should not be able to escape the root")."""
    match = REFERENCE.fullmatch(url)
    if match is None:
        return False
    depth = 0
    for segment in match.group(3).split("/")[1:]:
        name = segment.replace("%2e", ".").replace("%2E", ".")
        if name == "..":
            if depth == 0:
                return True
            depth -= 1
        elif name != ".":
            depth += 1
    return False


def _record_sent(record: AccessRecord, resolution: Resolution, sent: int) -> None:
    """Status, meta and body bytes as far as they were sent (nothing if the header was not)."""
    header = len(resolution.header)
    if sent < header:
        return
    record.status = resolution.status
    record.meta = resolution.meta if resolution.status != Status.SUCCESS else None
    record.bytes = sent - header


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLError):
        return cause.reason or str(cause)
    return type(exc).__name__ if not str(exc) else str(exc)


def _excerpt(line: bytes | bytearray) -> str:
    return bytes(line[:200]).decode("utf-8", "replace")


async def _read_request_line(stream: TLSConnection, buf: bytearray) -> bytes:
    """Bytes up to and including the first CRLF (a bare LF is not a line end), read into
    ``buf``; stops early past ``MAX_REQUEST_BYTES``.

    A line longer than the limit is returned truncated to ``MAX_REQUEST_LINE + 1`` bytes.
    A close_notify before CRLF returns what came (the server answers 59); a TCP close
    without one raises :class:`_NoLineEnd` (the TLS session is broken: nothing can be
    answered).
    """
    while True:
        data = await stream.receive_some(READ_CHUNK)
        if not data:
            if not buf:
                raise _ClientClosed
            if stream.ragged_eof:
                raise _NoLineEnd
            return bytes(buf)
        start = max(0, len(buf) - 1)  # a CR may end the previous chunk
        buf += data
        end = buf.find(b"\r\n", start)
        if end != -1:
            return bytes(buf[: end + 2])
        if len(buf) > MAX_REQUEST_LINE:
            return bytes(buf[: MAX_REQUEST_LINE + 1])


async def _send(stream: TLSConnection, resolution: Resolution) -> None:
    """Send header and body (``stream.bytes_sent`` tells how far it got)."""
    header = resolution.header
    if resolution.status != Status.SUCCESS:
        await stream.send_all(header)
        return
    if resolution.body is not None:
        await stream.send_all(header + resolution.body)
        return
    if resolution.generated is not None:
        await stream.send_all(header)
        for chunk in resolution.generated.chunks():
            await stream.send_all(chunk)
        return
    assert resolution.file is not None
    with open(resolution.file, "rb") as fh:  # local file: reads do not block for long
        first = fh.read(SMALL_FILE)
        await stream.send_all(header + first)
        if len(first) < SMALL_FILE:
            return
        while chunk := await trio.to_thread.run_sync(fh.read, FILE_CHUNK):
            await stream.send_all(chunk)
