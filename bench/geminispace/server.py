"""One trio TLS server that answers for every host of a :class:`~geminispace.space.Space`.

Certificates: ONE wildcard certificate (``*.space.test``, made by the shared
:func:`~geminibot.gemini.certs.make_certificate`), not one per host. Why: the host names are
ours to choose, so one label under one domain covers any number of them; a per-host
certificate would cost a key generation, a signature, two files (``SSLContext`` only loads
chains from files) and one ``SSLContext`` (tens of KiB) per host, 4,400 of each at full
size, for nothing a Gemini client checks (TOFU pins what it first sees per host; the same
certificate on every host is pinned 4,400 times, as in Geminispace where hosting providers
share one). The host is still chosen by SNI: the SNI callback records the name, refuses
names the space does not serve (vanished, gone, unknown: ``unrecognized_name`` alert, as a
dead address would fail), and the request's URL must name the same host (else ``53``).

Per-host state is the rate-limited hosts' time of last answer, nothing else.

Addresses: :func:`serving` listens on 127.0.0.1 and, with ``addresses=N``, on 127.0.1.1 ...
127.0.1.N as well (the same port: Linux routes all of 127.0.0.0/8 to loopback), so a crawl
can send each host to one of several "servers" (:func:`address_rules`) and its politeness
per resolved address can be exercised. Session tickets are offered (Python's default, two
per TLS 1.3 handshake), so clients can resume sessions.
"""

from __future__ import annotations

import datetime as dt
import random
import socket
import ssl
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import trio

from geminibot.gemini.certs import make_certificate
from geminibot.gemini.tls import TLSConnection

from .space import DOMAIN, RATE_INTERVAL, Answer, Space

#: Longest request line read (a Gemini URL is at most 1024 bytes, plus CRLF).
MAX_REQUEST = 1026
#: Seconds a client has for its TLS handshake and request line.
REQUEST_TIMEOUT = 10.0
#: Seconds to wait before accepting again after accept() failed.
ACCEPT_BACKOFF = 0.05
#: Most extra loopback addresses (127.0.1.1 ... 127.0.1.254).
MAX_ADDRESSES = 254


def loopback_address(k: int) -> str:
    """The ``k``-th extra address (1-based): 127.0.1.k."""
    if not 1 <= k <= MAX_ADDRESSES:
        raise ValueError(f"address number {k} out of 1 to {MAX_ADDRESSES}")
    return f"127.0.1.{k}"


#: Host names are sent to addresses by their last :data:`ROUTE_DIGITS` digits.
ROUTE_DIGITS = 3


def address_number(end: int, addresses: int) -> int:
    """The address (1 to ``addresses``) of the hosts whose number ends in ``end`` (its last
    :data:`ROUTE_DIGITS` digits): a fixed shuffle, so that a host's address says nothing of
    its behaviour or policy kind (both of which follow the host number modulo 10 or 6:
    ``N mod 100`` put every maze host on the same ten addresses)."""
    return _SHUFFLED[end % 10**ROUTE_DIGITS] % addresses + 1


_SHUFFLED = list(range(10**ROUTE_DIGITS))
random.Random(1965).shuffle(_SHUFFLED)


def address_rules(port: int, addresses: int) -> list[str]:
    """``--connect-to`` rules that send host ``hN`` to 127.0.1.K, K =
    :func:`address_number` of N (1 to ``addresses``), or every host to 127.0.0.1 when
    ``addresses`` is 0."""
    if addresses == 0:
        return [f"*.{DOMAIN}:1965:127.0.0.1:{port}"]
    if not 1 <= addresses <= MAX_ADDRESSES:
        raise ValueError(f"addresses must be 0 to {MAX_ADDRESSES}")
    return [
        f"h*{end:0{ROUTE_DIGITS}d}.{DOMAIN}:1965:"
        f"{loopback_address(address_number(end, addresses))}:{port}"
        for end in range(10**ROUTE_DIGITS)
    ]


def wildcard_context() -> ssl.SSLContext:
    """A server context with a fresh self-signed ``*.space.test`` certificate."""
    cert, key = make_certificate(f"*.{DOMAIN}", dt.datetime.now(dt.UTC))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "c.pem").write_bytes(cert)
        (Path(tmp) / "k.pem").write_bytes(key)
        ctx.load_cert_chain(Path(tmp) / "c.pem", Path(tmp) / "k.pem")
    return ctx


@dataclass
class SpaceServer:
    """Serves ``space`` as it is on ``day`` (change ``day`` between crawls)."""

    space: Space
    day: int = 0
    rate_interval: float = RATE_INTERVAL
    #: (host, path, status) of every answer, when ``record`` is set (tests).
    record: bool = False
    log: list[tuple[str, str, int]] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    refused_handshakes: int = 0
    port: int | None = None

    def __post_init__(self) -> None:
        self.context = wildcard_context()
        self.context.sni_callback = self._sni
        self._names: dict[int, str] = {}
        self._last: dict[int, float] = {}

    def _sni(self, sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> int | None:
        host = (name or "").lower().rstrip(".")
        i = self.space.index_of(host)
        if i is None or not self.space.answers(i, self.day):
            self.refused_handshakes += 1
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        self._names[id(sock)] = host
        return None

    async def serve(
        self,
        listener: trio.SocketListener,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                try:
                    accepted, _ = await listener.socket.accept()
                except OSError:  # out of file descriptors and the like: back off
                    await trio.sleep(ACCEPT_BACKOFF)
                    continue
                sock = socket.socket(
                    accepted.family, accepted.type, accepted.proto, fileno=accepted.detach()
                )
                with suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                nursery.start_soon(self._handle, sock)

    async def _handle(self, sock: socket.socket) -> None:
        try:
            conn = TLSConnection(sock, self.context)
        except (ssl.SSLError, OSError):
            sock.close()
            return
        key = id(conn.tls)
        try:
            with trio.move_on_after(REQUEST_TIMEOUT):
                await conn.do_handshake()
                line = await self._read_line(conn)
                answer = self._answer(self._names.get(key, ""), line)
                if answer.delay:
                    await trio.sleep(answer.delay)
                self.statuses[answer.status] += 1
                await conn.send_all(answer.header + answer.body)
        except (ssl.SSLError, OSError):
            pass
        finally:
            self._names.pop(key, None)
            conn.close()

    @staticmethod
    async def _read_line(conn: TLSConnection) -> bytes:
        buf = b""
        while b"\n" not in buf and len(buf) <= MAX_REQUEST:
            data = await conn.receive_some(MAX_REQUEST + 1)
            if not data:
                break
            buf += data
        return buf

    def _answer(self, sni: str, line: bytes) -> Answer:
        if not line.endswith(b"\r\n") or len(line) > MAX_REQUEST:
            return Answer(59, "bad request")
        try:
            url = urlsplit(line[:-2].decode("utf-8"))
            port = url.port
        except (UnicodeDecodeError, ValueError):
            return Answer(59, "bad request")
        host = (url.hostname or "").rstrip(".")
        if url.scheme != "gemini" or host != sni or port not in (None, 1965, self.port):
            return Answer(53, "this server does not serve that URL")
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        i = self.space.index_of(host)
        assert i is not None  # the SNI callback let only our hosts through
        if self.space.behaviour(i) == "rate-limited":
            now = trio.current_time()
            last = self._last.get(i)
            if last is not None and now - last < self.rate_interval:
                answer = Answer(44, str(max(1, round(self.rate_interval))))
                self._note(host, path, answer)
                return answer
            self._last[i] = now
        answer = self.space.respond(host, path, self.day)
        self._note(host, path, answer)
        return answer

    def _note(self, host: str, path: str, answer: Answer) -> None:
        if self.record:
            self.log.append((host, path, answer.status))


@asynccontextmanager
async def serving(server: SpaceServer, addresses: int = 0) -> AsyncIterator[SpaceServer]:
    """Run ``server`` on 127.0.0.1 and a free port (``server.port``), and on that port of
    127.0.1.1 ... 127.0.1.``addresses`` too, until the block ends."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    server.port = listeners[0].socket.getsockname()[1]
    for k in range(1, addresses + 1):
        listeners += await trio.open_tcp_listeners(server.port, host=loopback_address(k))
    try:
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                await nursery.start(server.serve, listener)
            try:
                yield server
            finally:
                nursery.cancel_scope.cancel()
    finally:
        # Not inside the cancelled nursery: a checkpoint there would raise Cancelled, which
        # would replace (and so hide) an exception raised by the block.
        with trio.CancelScope(shield=True):
            for listener in listeners:
                await listener.aclose()
