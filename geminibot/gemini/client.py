"""A trio Gemini client that no server can hang or crash.

::

    client = GeminiClient(known_hosts=FileKnownHosts("~/.geminibot/known_hosts"))
    response = await client.fetch("gemini://example.org/")

One request per connection (Gemini has no reuse), so the per-request work is kept small:
the ``SSLContext`` is built once per client and loads no CA bundle.

- TLS 1.2 or newer, SNI set to the URL's host. Python's ``ssl`` module sends no SNI for an
  IP address literal (``gemini://127.0.0.1/``); nothing can be done about that here.
- Certificates are not checked against CAs but pinned trust-on-first-use per host and
  port (:mod:`geminibot.gemini.tofu`).
- Time limits (:class:`~geminibot.net.limits.Limits`): connect (TCP connect plus TLS
  handshake), header (request sent and header received), idle (longest silence inside the
  body) and a total deadline over the whole fetch, redirects included. Each is a trio
  cancel scope.
- A maximum body size; redirects decided by :mod:`geminibot.net.redirects`: followed up
  to ``max_redirects`` hops, a loop refused as soon as it closes, a switch to another
  scheme refused unless allowed (then the redirect is returned, not followed), a target
  over 1024 bytes refused as the server's fault.
- A body that ends without TLS ``close_notify`` is returned with
  ``possibly_truncated=True``.
- TLS sessions are resumed where the server offers session tickets: the session of each
  (host, address, port) from its last full handshake is kept and offered on the next
  connection; a resumed handshake skips the server's key exchange and certificate
  (``Response.resumed`` says it was one). The certificate a resumed session carries is the
  one first seen on it, and is checked against the pins like any other: TOFU works the
  same either way. A server that offers no ticket, or refuses the first ticket it gave
  (jetforce 1.0.0 does: new tickets, never a resumption), is remembered as one that does
  not resume, and its sessions are no longer read (see ``_after_handshake``). At most
  :data:`MAX_TLS_SESSIONS` (host, address, port) are remembered either way, the least
  recently used forgotten first.

Only :class:`~geminibot.net.errors.FetchError` subclasses leave :meth:`GeminiClient.fetch`,
and :class:`~geminibot.urls.InvalidURL` for a URL given that cannot be requested (and
trio's own ``Cancelled`` when the caller cancels).
"""

from __future__ import annotations

import socket
import ssl
from collections import OrderedDict
from dataclasses import dataclass, field

import trio

from geminibot.gemini.response import (
    NEED_DATA,
    Body,
    EndOfResponse,
    MimeType,
    ResponseHeader,
    ResponseReader,
    decode_text,
)
from geminibot.gemini.status import Family
from geminibot.gemini.tls import TLSConnection, open_tcp
from geminibot.gemini.tofu import KnownHosts, MemoryKnownHosts, Trust, check_pin, fingerprint
from geminibot.gemini.urls import MAX_REQUEST_BYTES, SCHEME, parse_url, request_line
from geminibot.net.connect import ConnectTo, route
from geminibot.net.dns import DnsCache
from geminibot.net.errors import (
    ConnectionFailed,
    ConnectTimeout,
    DeadlineExceeded,
    HeaderTimeout,
    IdleTimeout,
    TLSFailure,
)
from geminibot.net.limits import Limits
from geminibot.net.redirects import RedirectRules, follow_chain
from geminibot.urls import URL, resolve_reference

_RECEIVE_SIZE = 65536
#: TLS sessions kept for resumption, and servers marked as not resuming (one per host,
#: address and port; a few KiB each).
MAX_TLS_SESSIONS = 5_000


@dataclass(slots=True)
class _Kept:
    """What is known of one (host, address, port)'s TLS sessions."""

    session: ssl.SSLSession | None
    """Offered on the next connection; None: the server does not resume, offer nothing."""
    resumed: bool = False
    """The server has resumed ``session`` at least once."""


@dataclass(frozen=True, slots=True)
class TLSSeen:
    """What one connection showed of its TLS: the protocol version and cipher suite as
    OpenSSL names them (``TLSv1.3``, ``TLS_AES_256_GCM_SHA384``), the server's certificate
    (DER) and its SHA-256 fingerprint (as :attr:`Response.certificate`)."""

    version: str
    cipher: str
    der: bytes
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Response:
    """A Gemini response as the client returns it: header, body, the certificate seen and its
    trust, and the redirects followed to reach it."""

    url: URL
    """The URL that gave this response (after redirects)."""
    header: ResponseHeader
    body: bytes
    certificate: str
    """SHA-256 fingerprint of the server's certificate."""
    trust: Trust
    previous_certificate: str | None = None
    """The fingerprint pinned before, when ``trust`` is CHANGED."""
    redirects: tuple[URL, ...] = field(default=())
    """Every URL that redirected, in order; ``len(redirects)`` hops were followed."""
    possibly_truncated: bool = False
    """The body ended without TLS close_notify: the server may have been cut off."""
    resumed: bool = False
    """The TLS handshake resumed an earlier session (a session ticket)."""
    tls: TLSSeen | None = None
    """The TLS version, cipher and certificate of the connection that gave this response."""

    @property
    def status(self) -> int:
        return self.header.status

    @property
    def meta(self) -> str:
        return self.header.meta

    @property
    def family(self) -> Family:
        return self.header.family

    @property
    def mime(self) -> MimeType | None:
        return self.header.mime

    @property
    def redirect_url(self) -> str | None:
        """For a ``3x`` response: its target resolved against :attr:`url`."""
        target = self.header.redirect_target
        return None if target is None else resolve_reference(str(self.url), target)

    def text(self) -> str:
        """The body decoded by the MIME charset (UTF-8 by default; bad bytes replaced)."""
        return decode_text(self.body, self.mime)


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    """A client certificate (status ``60``): PEM files, and the hosts it is shown to."""

    cert_file: str
    key_file: str | None = None
    """None when the key is in ``cert_file``."""
    hosts: frozenset[str] | None = None
    """Host names (as :class:`~geminibot.urls.URL` has them) it is presented to; None: every host."""


def make_ssl_context(certificate: ClientCertificate | None = None) -> ssl.SSLContext:
    """TLS 1.2 or newer, no CA checks (trust on first use replaces them); with
    ``certificate``, presented when a server asks (raises OSError or ssl.SSLError if the
    files cannot be read or do not match)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if certificate is not None:
        context.load_cert_chain(certificate.cert_file, certificate.key_file)
    return context


def _redirect_target(response: Response) -> str | None:
    return response.header.redirect_target if response.family is Family.REDIRECT else None


class GeminiClient:
    """Fetches Gemini URLs; see the module docstring. Safe to share between tasks."""

    def __init__(
        self,
        *,
        known_hosts: KnownHosts | None = None,
        strict_tofu: bool = False,
        limits: Limits | None = None,
        connect_to: ConnectTo | None = None,
        allow_scheme_switch: bool = False,
        client_certificate: ClientCertificate | None = None,
        dns: DnsCache | None = None,
    ) -> None:
        #: Names resolved once per :data:`~geminibot.net.dns.DNS_TTL` (share one cache
        #: between the clients of a crawl).
        self.dns = dns if dns is not None else DnsCache()
        self._sessions: OrderedDict[tuple[str, str, int, int], _Kept] = OrderedDict()
        self.known_hosts: KnownHosts = (
            known_hosts if known_hosts is not None else MemoryKnownHosts()
        )
        self.strict_tofu = strict_tofu
        self.limits = limits if limits is not None else Limits()
        self.connect_to = connect_to
        self.allow_scheme_switch = allow_scheme_switch
        self._ssl_context = make_ssl_context()
        self.client_certificate = client_certificate
        self._cert_context = (
            make_ssl_context(client_certificate) if client_certificate is not None else None
        )

    async def fetch(
        self,
        url: str | URL,
        *,
        follow_redirects: bool = True,
        limits: Limits | None = None,
    ) -> Response:
        """Fetch ``url``, following redirects; raises only FetchError subclasses (InvalidURL
        for a ``url`` that cannot be requested)."""
        limits = limits if limits is not None else self.limits
        current = parse_url(str(url))
        rules = None
        if follow_redirects:
            rules = RedirectRules(
                (SCHEME,),
                limits.max_redirects,
                switch_schemes=self.allow_scheme_switch,
                max_url_bytes=MAX_REQUEST_BYTES,
            )

        async def exchange(hop: URL, followed: tuple[URL, ...]) -> Response:
            return await self._exchange(hop, followed, limits)

        with trio.move_on_after(limits.total_timeout):
            return await follow_chain(current, exchange, _redirect_target, rules)
        raise DeadlineExceeded(f"fetch of {url} took longer than {limits.total_timeout} s")

    def _context_for(self, url: URL) -> ssl.SSLContext:
        cert = self.client_certificate
        if (
            self._cert_context is not None
            and cert is not None
            and (cert.hosts is None or url.host in cert.hosts)
        ):
            return self._cert_context
        return self._ssl_context

    def _address(self, host: str, port: int) -> tuple[str, int]:
        return route(self.connect_to, host, port)

    async def _connect(self, address: str, port: int) -> socket.socket:
        """A TCP connection to ``address`` (a name through the DNS cache: its addresses
        in order, the first that answers)."""
        try:
            addresses = await self.dns.addresses(address, port)
        except OSError as exc:
            raise ConnectionFailed(f"cannot connect to {address} port {port}: {exc}") from None
        error: OSError | None = None
        for ip in addresses:
            try:
                return await open_tcp(ip, port)
            except OSError as exc:
                error = exc
        raise ConnectionFailed(f"cannot connect to {address} port {port}: {error}")

    async def _exchange(self, url: URL, followed: tuple[URL, ...], limits: Limits) -> Response:
        request = request_line(url)
        address, port = self._address(url.host, url.port)
        context = self._context_for(url)
        session_key = (url.host, address, port, id(context))
        kept = self._sessions.get(session_key)
        conn: TLSConnection | None = None
        try:
            with trio.move_on_after(limits.connect_timeout) as connecting:
                sock = await self._connect(address, port)
                try:
                    offer = kept.session if kept is not None else None
                    conn = TLSConnection(sock, context, url.host, offer)
                    await conn.do_handshake()
                except OSError as exc:  # ssl.SSLError is one
                    raise TLSFailure(f"TLS handshake with {url.authority} failed: {exc}") from None
                finally:
                    if conn is None:
                        sock.close()
            if connecting.cancelled_caught:
                raise ConnectTimeout(
                    f"no TLS connection to {url.authority} within {limits.connect_timeout} s"
                )
            assert conn is not None
            der = conn.peer_certificate()
            if der is None:  # pragma: no cover - a TLS server always sends a certificate
                raise TLSFailure(f"{url.authority} sent no certificate")
            seen = fingerprint(der)
            trust, previous = check_pin(
                self.known_hosts, url.host, url.port, seen, strict=self.strict_tofu
            )
            reader = ResponseReader(None if limits.cut_body else limits.max_body_size)
            with trio.move_on_after(limits.header_timeout) as waiting:
                await _send(conn, request)
                header = await _read_header(conn, reader)
            if waiting.cancelled_caught:
                raise HeaderTimeout(
                    f"no header from {url.authority} within {limits.header_timeout} s"
                )
            cut = limits.max_body_size if limits.cut_body else None
            body, truncated = await _read_body(conn, reader, limits.idle_timeout, cut)
            resumed = conn.session_reused
            self._after_handshake(session_key, kept, conn, resumed)
            tls = TLSSeen(conn.tls.version() or "", conn.cipher_name(), der, seen)
        finally:
            if conn is not None:
                conn.close()  # our close_notify, without waiting for the peer's
        return Response(url, header, body, seen, trust, previous, followed, truncated, resumed, tls)

    def _after_handshake(
        self, key: tuple[str, str, int, int], kept: _Kept | None, conn: TLSConnection, resumed: bool
    ) -> None:
        """Keep the connection's session for the next one, if the server will resume it.

        Reading ``SSLSocket.session`` costs about 5.6 KiB that is never freed (CPython 3.11
        with OpenSSL 3.0; docs/benchmarks.md has the figures) and
        0.2-0.4 ms of CPU, so it is read after a full handshake only, and only where it may
        be resumed: not after a resumed one (the session kept stays the one offered: TLS 1.3
        lets a client offer one ticket more than once), not again for a server that offered
        no ticket, and not again for one that refused the first ticket it gave (jetforce
        does, every time: without this, every connection to it read and leaked a session).
        A server that resumed a session and then refuses it (its ticket expired, its keys
        changed) has its new session read: one read per run of resumptions."""
        current = self._sessions.get(key) is kept  # not forgotten meanwhile (concurrent fetches)
        if resumed:
            if kept is not None:
                kept.resumed = True
                if current:
                    self._sessions.move_to_end(key)
            return
        if kept is not None and (kept.session is None or not kept.resumed):
            kept.session = None  # offered no ticket, or refused its first: does not resume
            if current:
                self._sessions.move_to_end(key)
            return
        session = conn.session
        has_ticket = session is not None and session.has_ticket
        self._sessions[key] = _Kept(session if has_ticket else None)
        self._sessions.move_to_end(key)
        while len(self._sessions) > MAX_TLS_SESSIONS:
            self._sessions.popitem(last=False)

    def tls_sessions(self) -> int:
        """How many TLS sessions are kept for resumption (servers marked as not resuming
        are not counted)."""
        return sum(kept.session is not None for kept in self._sessions.values())


async def _send(conn: TLSConnection, data: bytes) -> None:
    try:
        await conn.send_all(data)
    except OSError as exc:  # ssl.SSLError is one
        raise ConnectionFailed(f"connection broke while sending the request: {exc}") from None


async def _receive(conn: TLSConnection) -> tuple[bytes, bool]:
    """(data, clean): b"" at the end; clean is False when the end had no close_notify (or
    the connection broke)."""
    try:
        data = await conn.receive_some(_RECEIVE_SIZE)
    except OSError:  # ssl.SSLError is one: a reset, a bad record
        return b"", False
    return data, not conn.ragged_eof


async def _read_header(conn: TLSConnection, reader: ResponseReader) -> ResponseHeader:
    while True:
        event = reader.next_event()
        if isinstance(event, ResponseHeader):
            return event
        assert event is NEED_DATA
        data, clean = await _receive(conn)
        if not data and not clean and not reader.has_buffered_data:
            raise ConnectionFailed("the connection broke before the response header")
        reader.receive_data(data)


async def _read_body(
    conn: TLSConnection,
    reader: ResponseReader,
    idle_timeout: float,
    cut: int | None = None,
) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    clean = True
    while True:
        event = reader.next_event()
        if isinstance(event, Body):
            chunks.append(event.data)
            size += len(event.data)
            if cut is not None and size >= cut:
                return b"".join(chunks)[:cut], False
        elif isinstance(event, EndOfResponse):
            return b"".join(chunks), not clean
        else:
            with trio.move_on_after(idle_timeout) as idle:
                data, clean = await _receive(conn)
            if idle.cancelled_caught:
                raise IdleTimeout(f"body stalled for more than {idle_timeout} s")
            reader.receive_data(data)
