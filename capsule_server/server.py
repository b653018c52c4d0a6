"""The trio TLS server: virtual hosting by SNI over a folder of capsules, with limits and a log.

One connection carries one request. The flow of a connection:

1. Over ``Limits.max_open`` connections open at once: closed before TLS (no answer).
2. TLS handshake; the ``sni_callback`` picks the context (certificate) of the host the client
   named, or the ``localhost`` fallback certificate for a missing or unknown name.
3. Read the request line within ``Limits.header_timeout`` (slowloris): more than 1024 bytes
   before CRLF gives 59, the timeout closes the connection.
4. Validation (:func:`geminibot.gemini.urls.parse_request`, plus the CRLF): 59 malformed,
   53 another scheme.
5. The client address over its rate (a token bucket of ``Limits.rate_burst`` requests
   refilled at ``Limits.rate_per_second``), or more than ``Limits.max_connections``
   connections open: ``44 SECONDS``.
6. 53 for a host not served, or a host other than the SNI name.
7. :meth:`Capsule.resolve`: a file, a generated body, a special response, or 51; sent within
   ``Limits.send_timeout``, then TLS close_notify.

Every connection that got as far as TCP gives one access-log record (:mod:`capsule_server.log`).
"""

from __future__ import annotations

import math
import socket
import ssl
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import trio

from capsule_server.certs import FALLBACK_HOST, ensure_certificate
from capsule_server.files import Capsule, Resolution
from capsule_server.log import AccessRecord, now_iso
from capsule_server.ratelimit import RateLimiter
from capsule_server.tls import TLSConnection
from geminibot.gemini.status import Status
from geminibot.gemini.urls import MAX_REQUEST_BYTES, parse_request
from geminibot.urls import InvalidURL, UnsupportedScheme

HEADER_TIMEOUT = 10.0
"""Seconds a client has, from TCP accept, to finish TLS and send its request line."""

SEND_TIMEOUT = 60.0
"""Seconds to send a response (and close) before the connection is dropped."""

MAX_CONNECTIONS = 256
"""Connections open at once above which a request gets ``44`` (see ``OVERLOAD_RETRY``)."""

MAX_OPEN = 4096
"""Connections open at once (served or being refused); more are closed before TLS."""

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
class Limits:
    header_timeout: float = HEADER_TIMEOUT
    send_timeout: float = SEND_TIMEOUT
    max_connections: int = MAX_CONNECTIONS
    max_open: int = MAX_OPEN
    overload_retry: int = OVERLOAD_RETRY
    rate_burst: int = RATE_BURST
    rate_per_second: float = RATE_PER_SECOND
    shutdown_grace: float = SHUTDOWN_GRACE


def _context(cert_dir: Path, host: str) -> ssl.SSLContext:
    info = ensure_certificate(cert_dir, host)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(info.cert_path, info.key_path)
    ctx.num_tickets = 0  # one request per connection: session tickets would be wasted work
    return ctx


class CapsuleServer:
    """Serves ``capsules`` (host name to Capsule). Run with :meth:`serve` in a nursery."""

    def __init__(
        self,
        capsules: dict[str, Capsule],
        cert_dir: Path,
        limits: Limits | None = None,
        log: Callable[[AccessRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capsules = capsules
        self.limits = limits or Limits()
        self._log = log
        self._clock = clock
        self._rate = RateLimiter(self.limits.rate_burst, self.limits.rate_per_second)
        self._open = 0
        self._contexts = {host: _context(cert_dir, host) for host in capsules}
        self._host_of = {id(ctx): host for host, ctx in self._contexts.items()}
        self._unknown_name = _context(cert_dir, FALLBACK_HOST)  # SNI names a host not served
        self.ssl_context = _context(cert_dir, FALLBACK_HOST)  # also used when there is no SNI
        self.ssl_context.sni_callback = self._choose_context
        self._accept_scope = trio.CancelScope()
        self.port: int | None = None

    def _choose_context(
        self, sslobj: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext
    ) -> None:
        if server_name is not None:
            name = server_name.lower().rstrip(".")
            sslobj.context = self._contexts.get(name, self._unknown_name)

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
        """Stop accepting; connections in flight get ``Limits.shutdown_grace`` seconds."""
        self._accept_scope.cancel()

    async def _accept_loop(self, listener: trio.SocketListener, handlers: trio.Nursery) -> None:
        while True:
            try:
                accepted, address = await listener.socket.accept()
            except OSError as exc:  # EMFILE and friends: back off instead of spinning
                self._emit(AccessRecord("", error=f"accept: {exc.strerror}"))
                await trio.sleep(0.1)
                continue
            # From here on OpenSSL drives the socket itself (see capsule_server.tls).
            sock = socket.socket(
                accepted.family, accepted.type, accepted.proto, fileno=accepted.detach()
            )
            client = str(address[0]) if isinstance(address, tuple) else ""
            if self._open >= self.limits.max_open:
                sock.close()
                self._emit(AccessRecord(client, error="over the open connection limit"))
                continue
            with suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._open += 1
            handlers.start_soon(self._handle, sock, client)

    async def _handle(self, sock: socket.socket, client: str) -> None:
        started, accepted_at = self._clock(), now_iso()
        record = AccessRecord(client)
        try:
            record = await self._converse(sock, client)
        finally:
            record.time = accepted_at
            self._open -= 1
            record.duration = self._clock() - started
            self._emit(record)

    async def _converse(self, sock: socket.socket, client: str) -> AccessRecord:
        record = AccessRecord(client)
        try:
            conn = TLSConnection(sock, self.ssl_context)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            record.error = f"tls: {_reason(exc)}"
            return record
        try:
            line: bytes | None = None
            sni = 0
            with trio.move_on_after(self.limits.header_timeout):
                try:
                    await conn.do_handshake()
                except (ssl.SSLError, OSError) as exc:
                    record.error = f"tls: {_reason(exc)}"
                    return record
                sni = id(conn.context)
                line = await _read_request_line(conn)
            if line is None:
                record.error = "header timeout"
                return record
            resolution = self._answer(line, record, self._sni_host(sni))
            record.status = resolution.status
            record.meta = resolution.meta if resolution.status != Status.SUCCESS else None
            with trio.move_on_after(self.limits.send_timeout) as send_scope:
                await _send(conn, resolution, record)
            if send_scope.cancelled_caught:
                record.error = "send timeout"
        except (ssl.SSLError, OSError) as exc:
            record.error = f"connection: {_reason(exc)}"
        except _ClientClosed:
            record.error = "closed before sending a request"
        finally:
            conn.close()
        return record

    def _sni_host(self, context_id: int) -> str | None:
        """The served host the client named in SNI; "" for an unknown name; None for none."""
        if context_id == id(self._unknown_name):
            return ""
        return self._host_of.get(context_id)

    def _answer(self, line: bytes, record: AccessRecord, sni_host: str | None) -> Resolution:
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
        record.host = url.host
        record.path = url.path_query
        wait = self._rate.take(record.client, self._clock())
        if wait is not None:
            record.limited = "rate"
            return Resolution(Status.SLOW_DOWN, str(max(1, math.ceil(wait))))
        if self._open > self.limits.max_connections:
            record.limited = "busy"
            return Resolution(Status.SLOW_DOWN, str(self.limits.overload_retry))
        capsule = self.capsules.get(url.host)
        # No SNI (a client connecting by IP address) is allowed; a different name is not.
        if capsule is None or (sni_host is not None and sni_host != url.host):
            return Resolution(Status.PROXY_REQUEST_REFUSED, "This server does not serve that host")
        return capsule.resolve(url.path)

    def _emit(self, record: AccessRecord) -> None:
        if self._log is not None:
            self._log(record)


class _ClientClosed(Exception):
    pass


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLError):
        return cause.reason or str(cause)
    return type(exc).__name__ if not str(exc) else str(exc)


def _excerpt(line: bytes) -> str:
    return line[:200].decode("utf-8", "replace")


async def _read_request_line(stream: TLSConnection) -> bytes:
    """Bytes up to and including the first LF; stops early past ``MAX_REQUEST_BYTES``.

    A line that ends in a bare LF is returned as is (the parser rejects it); a line longer
    than the limit is returned truncated to ``MAX_REQUEST_LINE + 1`` bytes.
    """
    buf = bytearray()
    while True:
        data = await stream.receive_some(READ_CHUNK)
        if not data:
            if buf:
                return bytes(buf)  # no CRLF before the end: the parser answers 59
            raise _ClientClosed
        buf += data
        end = buf.find(b"\n")
        if end != -1:
            return bytes(buf[: end + 1])
        if len(buf) > MAX_REQUEST_LINE:
            return bytes(buf[: MAX_REQUEST_LINE + 1])


async def _send(stream: TLSConnection, resolution: Resolution, record: AccessRecord) -> None:
    """Send header and body, counting body bytes in ``record.bytes`` as they go."""
    header = resolution.header
    if resolution.status != Status.SUCCESS:
        await stream.send_all(header)
        return
    if resolution.body is not None:
        await stream.send_all(header + resolution.body)
        record.bytes = len(resolution.body)
        return
    if resolution.generated is not None:
        await stream.send_all(header)
        for chunk in resolution.generated.chunks():
            await stream.send_all(chunk)
            record.bytes += len(chunk)
        return
    assert resolution.file is not None
    with open(resolution.file, "rb") as fh:  # local file: reads do not block for long
        first = fh.read(SMALL_FILE)
        await stream.send_all(header + first)
        record.bytes = len(first)
        if len(first) < SMALL_FILE:
            return
        while chunk := await trio.to_thread.run_sync(fh.read, FILE_CHUNK):
            await stream.send_all(chunk)
            record.bytes += len(chunk)
