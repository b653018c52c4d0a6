"""The trio TLS Gemini server: virtual hosting by SNI, request handling, limits and a log.

Shared by every server geminibot has: ``capsule-server`` (a folder of capsules, in
:mod:`capsule_server`) and ``geminibot serve-search`` (:mod:`geminibot.searchcap`). What
they serve is a :data:`Handler` per host name: a plain function from the request's URL to a
:class:`Resolution` (status, meta, body), with no I/O of its own beyond reading files, or to
an awaitable of one (a handler that does its I/O off the event loop itself); this
module does the network, TLS, certificates, limits and the access log around it.

One connection carries one request. The flow of a connection:

0. The listeners hand over no connection before the client has spoken (``TCP_DEFER_ACCEPT``
   for up to ``ServerLimits.header_timeout``): one that never does waits in the kernel.
1. More than ``ServerLimits.max_per_address`` connections open from the client's address (an
   IPv6 client's /64), or a client whose rate is spent by a whole burst of connections
   that sent no request (see 5): closed before TLS (no answer). More than
   ``ServerLimits.max_open`` connections open in all, or all the descriptors the process
   may open but ``ServerLimits.descriptor_reserve`` taken by connections: if the client's
   address holds less than its share of them, the oldest connection that has sent
   nothing yet (not even its TLS hello), else the oldest that has not sent its request,
   is closed to make room; otherwise, or if every one has sent its request, the new one
   is closed before TLS. An ``accept`` that fails for want of descriptors closes the
   oldest such connection too, and is logged once a minute.
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
   requests being answered at once: ``44 SECONDS``. A connection that ends without a
   valid request line (no request, a TLS failure, a timeout, a malformed line, a
   refusal) is charged to the client's rate too, into a debt of at most one burst.
6. 53 for a host not served, a host other than the SNI name, or a port that is neither
   1965 nor the one the client connected to.
7. The host's handler: a file, a body, a generated body, or any other status (a handler
   that raises gives ``40``, logged); sent within ``ServerLimits.send_timeout``, then TLS
   close_notify.

Every connection that got as far as TCP gives one access-log record
(:mod:`geminibot.gemini.accesslog`); its ``status`` is the status actually sent (null when
no header went out). Those the rate does not bound (the ones charged above, and ``44``
for the rate) are written within the client's :class:`~geminibot.gemini.accesslog.
LogBudget`, the rest counted into one record a minute.
"""

from __future__ import annotations

import errno
import inspect
import math
import resource
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

from geminibot.gemini.accesslog import (
    LOG_BURST,
    LOG_PER_MINUTE,
    SUMMARY_SECONDS,
    AccessRecord,
    LogBudget,
    now_iso,
)
from geminibot.gemini.certs import CertInfo
from geminibot.gemini.ratelimit import RateLimiter
from geminibot.gemini.sni import HostContexts
from geminibot.gemini.status import Status
from geminibot.gemini.tls import InvalidServerName, TLSConnection
from geminibot.gemini.urls import DEFAULT_PORT, MAX_REQUEST_BYTES, climbs_above_root, parse_request
from geminibot.net.addresses import address_key
from geminibot.urls import URL, InvalidURL, UnsupportedScheme

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

DESCRIPTOR_RESERVE = 128
"""Descriptors the process may open (its ``RLIMIT_NOFILE``) kept from connections, for its
other work: database connections, index files, worker processes, the log. Connections get
the rest, at most ``MAX_OPEN``."""

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

FILE_CHUNK = 64 * 1024
SMALL_FILE = 256 * 1024
"""Files up to this size are read at once and sent with the header in one write."""


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What the Gemini server allows each client and itself: timeouts, connections (in all,
    open, per address), the descriptors kept for other work, the per-address request
    rate, the access log's budget per client, the grace period at shutdown."""

    header_timeout: float = HEADER_TIMEOUT
    send_timeout: float = SEND_TIMEOUT
    max_connections: int = MAX_CONNECTIONS
    max_open: int = MAX_OPEN
    max_per_address: int = MAX_PER_ADDRESS
    overload_retry: int = OVERLOAD_RETRY
    rate_burst: int = RATE_BURST
    rate_per_second: float = RATE_PER_SECOND
    shutdown_grace: float = SHUTDOWN_GRACE
    descriptor_reserve: int = DESCRIPTOR_RESERVE
    log_burst: int = LOG_BURST
    log_per_minute: float = LOG_PER_MINUTE


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


#: What ``accept`` fails with when the process or the system is out of descriptors.
OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def connection_budget(max_open: int, reserve: int) -> int:
    """Connections the server holds open at most: ``max_open``, or fewer when the
    process's descriptor limit less ``reserve`` is lower (at least one)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return max_open
    return max(1, min(max_open, soft - reserve))


#: The client whose request a handler is answering (its :func:`~geminibot.net.addresses.
#: address_key`; "" outside a request), for a handler's own limits per client.
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


#: Seconds a connection must have been silent to count as one that "has sent nothing"
#: when room is made: one just accepted has not been read yet, whatever it sent.
SILENT_GRACE = 1.0


class _Waiting:
    """A connection that has not sent its request line yet (it may be closed for room);
    ``heard``: it has sent something (its TLS hello)."""

    __slots__ = ("evicted", "heard", "scope", "since")

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope
        self.evicted = False
        self.heard = False
        self.since = trio.current_time()


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
        self._log_budget = LogBudget(self.limits.log_burst, self.limits.log_per_minute)
        self._accept_failures: Counter[str] = Counter()  # not logged yet, by reason
        self._held_back = trio.Event()  # set when a record was counted, not logged
        self._accept_logged_at: float | None = None
        self._max_open = connection_budget(self.limits.max_open, self.limits.descriptor_reserve)
        self._open = 0
        self._answering = 0
        self._per_address: Counter[str] = Counter()
        self._waiting: dict[int, _Waiting] = {}  # in accept order: the oldest first
        self._next_id = 0
        self._tls = HostContexts(cert_dir, self.sites, _context)  # by SNI name
        self.ssl_context = self._tls.default
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
    def max_open(self) -> int:
        """Connections held open at most: ``ServerLimits.max_open``, or fewer when the
        descriptor limit less ``ServerLimits.descriptor_reserve`` is lower."""
        return self._max_open

    @property
    def answering(self) -> int:
        """Requests being answered now (what ``ServerLimits.max_connections`` bounds)."""
        return self._answering

    async def serve(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on ``listeners`` until :meth:`shutdown`; then let connections finish."""
        self._max_open = connection_budget(self.limits.max_open, self.limits.descriptor_reserve)
        for listener in listeners:  # a client speaks first: hand over none that has not
            with suppress(OSError, AttributeError):  # (Linux's TCP_DEFER_ACCEPT)
                defer = math.ceil(self.limits.header_timeout)
                listener.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, defer)
        async with trio.open_nursery() as handlers:
            with self._accept_scope:
                async with trio.open_nursery() as acceptors:
                    for listener in listeners:
                        acceptors.start_soon(self._accept_loop, listener, handlers)
                    acceptors.start_soon(self._summarise)
                    task_status.started()
            for listener in listeners:
                with suppress(trio.ClosedResourceError, OSError):
                    await listener.aclose()
            handlers.cancel_scope.deadline = trio.current_time() + self.limits.shutdown_grace
        self._write_summaries()

    def shutdown(self) -> None:
        """Stop accepting; connections in flight get ``ServerLimits.shutdown_grace`` seconds."""
        self._accept_scope.cancel()
        self.stopping.set()

    async def _accept_loop(self, listener: trio.SocketListener, handlers: trio.Nursery) -> None:
        while True:
            try:
                accepted, address = await listener.socket.accept()
            except OSError as exc:  # EMFILE and friends: make room, or back off
                self._accept_failed(exc)
                room = exc.errno in OUT_OF_DESCRIPTORS and self._make_room()
                await trio.sleep(0.01 if room else 0.1)
                continue
            # From here on OpenSSL drives the socket itself (see geminibot.gemini.tls).
            sock = socket.socket(
                accepted.family, accepted.type, accepted.proto, fileno=accepted.detach()
            )
            client = str(address[0]) if isinstance(address, tuple) else ""
            key = address_key(client)
            now = self._clock()
            refusal = None
            if self._per_address[key] >= self.limits.max_per_address:
                refusal = "over the per-address connection limit"
            elif self._rate.exhausted(key, now):
                refusal = "over the rate (connections that sent no request)"
            elif self._open >= self._max_open and not self._room_for(key):
                refusal = "over the open connection limit"
            if refusal is not None:
                sock.close()
                self._rate.charge(key, now)
                self._log_connection(AccessRecord(client, error=refusal), key)
                continue
            with suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._open += 1
            self._per_address[key] += 1
            handlers.start_soon(self._handle, sock, client, key)

    def _room_for(self, key: str) -> bool:
        """At the connection budget, whether a newcomer from ``key`` gets in: only if its
        address holds less than its share of the budget (over the addresses holding
        connections), by closing the oldest idle connection. So clients that hold many
        do not take turns evicting one another: each of their newcomers is closed
        before TLS, which costs the server little."""
        share = self._max_open / max(1, len(self._per_address))
        return self._per_address[key] < share and self._make_room()

    def _make_room(self) -> bool:
        """Close the oldest connection that has sent nothing for :data:`SILENT_GRACE`,
        else the oldest that has not sent its request; False if there is none."""
        now = trio.current_time()
        oldest = next(
            (n for n, w in self._waiting.items() if not w.heard and now - w.since >= SILENT_GRACE),
            None,
        )
        if oldest is None:
            oldest = next(iter(self._waiting), None)
        if oldest is None:
            return False
        waiting = self._waiting.pop(oldest)
        waiting.evicted = True
        waiting.scope.cancel()
        return True

    def _accept_failed(self, exc: OSError) -> None:
        """Log a failed ``accept`` at once if none was logged for a minute, else count it
        (:meth:`_write_summaries` says how many)."""
        reason = f"accept: {exc.strerror or type(exc).__name__}"
        now = self._clock()
        if self._accept_logged_at is None or now - self._accept_logged_at >= SUMMARY_SECONDS:
            self._accept_logged_at = now
            self._emit(AccessRecord("", error=reason))
        else:
            self._accept_failures[reason] += 1
            self._held_back.set()

    async def _summarise(self) -> None:
        """A minute after a record is first held back, the records that count what was
        held back; no timer runs while nothing is (an idle server sleeps)."""
        while True:
            await self._held_back.wait()
            await trio.sleep(SUMMARY_SECONDS)
            self._held_back = trio.Event()
            self._write_summaries()

    def _write_summaries(self) -> None:
        """The records that count what was not logged since the last ones."""
        for reason, n in self._accept_failures.items():
            self._emit(AccessRecord("", error=f"{reason} ({n} more times)"))
        self._accept_failures.clear()
        for record in self._log_budget.summaries():
            self._emit(record)

    def _log_connection(self, record: AccessRecord, key: str) -> None:
        """Log ``record`` of client ``key``; one the rate does not bound (no valid
        request, or refused for the rate) within the client's log budget."""
        unbounded = record.host is None or record.limited == "rate"
        if unbounded and not self._log_budget.admits(key, self._clock()):
            self._held_back.set()
            return
        self._emit(record)

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
            ended = self._clock()
            if record.host is None:  # no valid request: charged to the client's rate
                self._rate.charge(key, ended)
            record.duration = ended - started
            self._log_connection(record, key)

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
            resolution = await self._answer(line, record, self._tls.host_of(sni), local_port)
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
                await trio.lowlevel.wait_readable(conn.tls)  # the client's hello
                waiting.heard = True
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
        wait = self._rate.take(address_key(record.client), self._clock())
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
        CURRENT_CLIENT.set(address_key(record.client))
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
    ``buf``; never more than ``MAX_REQUEST_LINE + 1`` bytes are read.

    A line longer than the limit is returned truncated to ``MAX_REQUEST_LINE + 1`` bytes.
    A close_notify before CRLF returns what came (the server answers 59); a TCP close
    without one raises :class:`_NoLineEnd` (the TLS session is broken: nothing can be
    answered).
    """
    while True:
        data = await stream.receive_some(MAX_REQUEST_LINE + 1 - len(buf))
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
