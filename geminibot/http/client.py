"""An http(s) client on httpx, run under trio, with the Gemini client's limits.

::

    async with WebClient(user_agent=user_agent("geminibot")) as client:
        response = await client.fetch("https://example.org/robots.txt")

- The limits are :class:`geminibot.net.limits.Limits`, the same object and the same
  defaults as the Gemini client: connect (TCP plus TLS), header (request sent, status line
  and headers received), idle (longest silence inside the body), a total deadline over the
  whole fetch (redirects included), the largest body and the redirect hops. Every time
  limit is a trio cancel scope; the connect and header limits are one scope whose deadline
  moves when httpcore reports (through its ``trace`` extension) that the request starts
  going out, so a pooled connection gets the header limit only.
- The body is read as a stream and reading stops as soon as it passes the size limit
  (a ``Content-Length`` above the limit stops it before any byte of the body). The limit
  applies to the decoded body, so a gzip bomb stops at the cap too.
- Redirects (301, 302, 303, 307, 308 with a ``Location``) are followed by this module, not
  by httpx, as :mod:`geminibot.net.redirects` decides: up to ``max_redirects`` hops; a
  loop is refused as soon as it closes; a switch to a scheme other than http/https is
  refused unless ``allow_scheme_switch`` (then the redirect is returned unfollowed).
- Connections are opened by :class:`Connector`, httpcore's network backend for this
  client: ``connect_to`` (the same type and meaning as the Gemini client's; tests reach
  loopback this way) says where a host's connections go, the name is resolved through
  ``dns``, the :class:`~geminibot.net.dns.DnsCache` the crawl's Gemini client and address
  lookup share (once per ``DNS_TTL``, not per connection), and its addresses are tried in
  order. The request URL keeps the host, so the ``Host`` header, TLS SNI and the
  certificate check are the URL's host, and httpx's connection pool is keyed by it: two
  names on one address never share a connection (a pooled TLS connection checked for one
  name is not reused for another).
- Every request carries a real ``User-Agent`` (:func:`user_agent`).

Only :class:`~geminibot.net.errors.FetchError` subclasses leave :meth:`WebClient.fetch`,
and :class:`~geminibot.urls.InvalidURL` for a URL given that is not an http(s) URL.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpcore
import httpx
import trio

from geminibot import __version__
from geminibot.http.urls import DEFAULT_INFO_URL as _INFO_URL
from geminibot.http.urls import parse_web_url
from geminibot.net.connect import ConnectTo, route
from geminibot.net.dns import DnsCache
from geminibot.net.errors import (
    BodyTooLarge,
    ConnectionFailed,
    ConnectTimeout,
    DeadlineExceeded,
    FetchError,
    HeaderTimeout,
    IdleTimeout,
    RemoteProtocolError,
    TLSFailure,
)
from geminibot.net.limits import Limits
from geminibot.net.redirects import RedirectRules, follow_chain
from geminibot.urls import URL, WEB_SCHEMES, InvalidURL, resolve_reference

#: Where a site owner reads who the bot is; put in the User-Agent (override with --contact).
#: Kept in :mod:`geminibot.http.urls`, which the command line reads without httpx.
DEFAULT_INFO_URL = _INFO_URL
#: Statuses whose Location is followed.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
Headers = tuple[tuple[str, str], ...]


def user_agent(
    token: str = "geminibot", version: str = __version__, info_url: str = DEFAULT_INFO_URL
) -> str:
    """``token/version (+info_url)``: the product token robots.txt groups match on."""
    return f"{token}/{version} (+{info_url})"


@dataclass(frozen=True, slots=True)
class WebResponse:
    """An http(s) response as :class:`WebClient` returns it: status, headers, body and the
    redirects followed to reach it."""

    url: URL
    """The URL that gave this response (after redirects)."""
    status: int
    reason: str
    headers: Headers
    body: bytes
    redirects: tuple[URL, ...] = field(default=())
    """Every URL that redirected, in order."""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        low = name.lower()
        return next((v for k, v in self.headers if k.lower() == low), None)

    @property
    def content_type(self) -> str:
        return self.header("content-type") or ""

    @property
    def redirect_url(self) -> str | None:
        """For a 3xx with a Location: its target resolved against :attr:`url`."""
        location = self.header("location")
        if not 300 <= self.status <= 399 or not location:
            return None
        return resolve_reference(str(self.url), location.strip())


#: The connection pool's bounds (httpx's defaults; the pool is :class:`PoolTransport`'s).
POOL_CONNECTIONS = 100
POOL_KEEPALIVE_CONNECTIONS = 20
POOL_KEEPALIVE_SECONDS = 5.0


class Connector(httpcore.AsyncNetworkBackend):
    """httpcore's network backend for :class:`WebClient`: a TCP connection for a URL's
    host and port, where ``connect_to`` sends it, the name resolved through ``dns``, its
    addresses tried in order (the first that answers). httpcore then runs TLS on it with
    the URL's host as SNI and as the name the certificate must carry."""

    def __init__(self, dns: DnsCache, connect_to: ConnectTo | None = None) -> None:
        self.dns = dns
        self.connect_to = connect_to
        self._tcp = httpcore.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address, to_port = route(self.connect_to, host, port)  # --test-range: ConnectionFailed
        try:
            addresses = await self.dns.addresses(address, to_port)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {address}: {exc}") from None
        error = httpcore.ConnectError(f"{address} has no address")
        for ip in addresses:
            try:
                return await self._tcp.connect_tcp(
                    ip, to_port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                error = exc
        raise error

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)


class PoolTransport(httpx.AsyncBaseTransport):
    """httpx's transport interface over httpcore's connection pool, on :class:`Connector`
    (httpx's own transport takes no network backend). httpcore's exceptions pass through
    as they are; :func:`_mapped_errors` reads both libraries' kinds."""

    def __init__(self, verify: ssl.SSLContext | bool, connector: Connector) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            max_connections=POOL_CONNECTIONS,
            max_keepalive_connections=POOL_KEEPALIVE_CONNECTIONS,
            keepalive_expiry=POOL_KEEPALIVE_SECONDS,
            network_backend=connector,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        got = await self._pool.handle_async_request(sent)
        return httpx.Response(
            status_code=got.status,
            headers=got.headers,
            stream=_BodyStream(got.stream),
            extensions=got.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _BodyStream(httpx.AsyncByteStream):
    """An httpcore response body as httpx reads one; closing it returns the connection."""

    def __init__(self, stream: Iterable[bytes] | AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if isinstance(self._stream, AsyncIterable):
            async for part in self._stream:
                yield part
        else:
            for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class WebClient:
    """Fetches http(s) URLs; see the module docstring. Share one per trio run; close it."""

    def __init__(
        self,
        *,
        user_agent: str = user_agent(),
        limits: Limits | None = None,
        connect_to: ConnectTo | None = None,
        verify: ssl.SSLContext | bool = True,
        allow_scheme_switch: bool = False,
        dns: DnsCache | None = None,
    ) -> None:
        self.user_agent = user_agent
        self.limits = limits if limits is not None else Limits()
        self.connect_to = connect_to
        self.allow_scheme_switch = allow_scheme_switch
        #: Names resolved once per :data:`~geminibot.net.dns.DNS_TTL` (share one cache
        #: between the clients of a crawl).
        self.dns = dns if dns is not None else DnsCache()
        self._client = httpx.AsyncClient(
            transport=PoolTransport(verify, Connector(self.dns, connect_to)),
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(None),
            headers={"User-Agent": user_agent},
        )

    async def __aenter__(self) -> WebClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(
        self,
        url: str | URL,
        *,
        method: str = "GET",
        headers: Sequence[tuple[str, str]] = (),
        follow_redirects: bool = True,
        limits: Limits | None = None,
    ) -> WebResponse:
        """Fetch ``url`` (GET or HEAD); raises only FetchError subclasses (InvalidURL for
        a bad ``url``)."""
        limits = limits if limits is not None else self.limits
        current = parse_web_url(str(url))
        rules = None
        if follow_redirects:
            rules = RedirectRules(
                WEB_SCHEMES, limits.max_redirects, switch_schemes=self.allow_scheme_switch
            )

        async def exchange(hop: URL, followed: tuple[URL, ...]) -> WebResponse:
            status, reason, got, body = await self._exchange(hop, method, tuple(headers), limits)
            return WebResponse(hop, status, reason, got, body, followed)

        with trio.move_on_after(limits.total_timeout):
            return await follow_chain(current, exchange, _redirect_target, rules)
        raise DeadlineExceeded(f"fetch of {url} took longer than {limits.total_timeout} s")

    async def _exchange(
        self, url: URL, method: str, headers: Headers, limits: Limits
    ) -> tuple[int, str, Headers, bytes]:
        phase = ["connect"]

        with trio.CancelScope() as scope:
            scope.deadline = trio.current_time() + limits.connect_timeout

            async def trace(event: str, info: dict[str, Any]) -> None:
                if event == "http11.send_request_headers.started":
                    phase[0] = "header"
                    scope.deadline = trio.current_time() + limits.header_timeout

            request = self._client.build_request(
                method,
                str(url),
                headers=[("Host", url.authority), *headers],
                extensions={"trace": trace},
            )
            with _mapped_errors(url):
                response = await self._client.send(request, stream=True)
        if scope.cancelled_caught:
            if phase[0] == "connect":
                raise ConnectTimeout(
                    f"no connection to {url.authority} within {limits.connect_timeout} s"
                )
            raise HeaderTimeout(f"no header from {url.authority} within {limits.header_timeout} s")
        try:
            got = tuple(response.headers.multi_items())
            if method == "HEAD":
                return response.status_code, response.reason_phrase, got, b""
            declared = response.headers.get("content-length", "").strip()
            if not limits.cut_body and declared.isdigit() and int(declared) > limits.max_body_size:
                raise BodyTooLarge(
                    f"{url} declares {declared} bytes, more than {limits.max_body_size}"
                )
            body = await _read_body(url, response, limits)
            return response.status_code, response.reason_phrase, got, body
        finally:
            with trio.CancelScope(shield=True), _mapped_errors(url):
                await response.aclose()


def _redirect_target(response: WebResponse) -> str | None:
    return response.header("location") if response.status in REDIRECT_STATUSES else None


async def _read_body(url: URL, response: httpx.Response, limits: Limits) -> bytes:
    chunks: list[bytes] = []
    size = 0
    stream: AsyncIterator[bytes] = response.aiter_bytes()
    while True:
        with trio.move_on_after(limits.idle_timeout) as idle, _mapped_errors(url):
            try:
                chunk = await stream.__anext__()
            except StopAsyncIteration:
                return b"".join(chunks)
        if idle.cancelled_caught:
            raise IdleTimeout(f"body of {url} stalled for more than {limits.idle_timeout} s")
        size += len(chunk)
        if limits.cut_body and size >= limits.max_body_size:
            chunks.append(chunk)
            return b"".join(chunks)[: limits.max_body_size]
        if size > limits.max_body_size or response.num_bytes_downloaded > limits.max_body_size:
            raise BodyTooLarge(f"body of {url} is larger than {limits.max_body_size} bytes")
        chunks.append(chunk)


#: What httpcore raises (its exceptions share no base class).
_HTTPCORE_ERRORS = (
    httpcore.NetworkError,
    httpcore.TimeoutException,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)


@contextmanager
def _mapped_errors(url: URL) -> Iterator[None]:
    """Turn httpx's and httpcore's exceptions into :mod:`geminibot.net.errors`."""
    try:
        yield
    except (httpx.HTTPError, httpx.InvalidURL, *_HTTPCORE_ERRORS) as exc:
        where = url.authority
        error: FetchError | InvalidURL
        if isinstance(exc, httpx.ConnectError | httpcore.ConnectError) and _is_tls(exc):
            error = TLSFailure(f"TLS with {where} failed: {exc}")
        elif isinstance(
            exc, httpx.UnsupportedProtocol | httpx.InvalidURL | httpcore.UnsupportedProtocol
        ):
            error = InvalidURL(f"{url}: {exc}")
        elif isinstance(exc, httpx.ProtocolError | httpx.DecodingError | httpcore.ProtocolError):
            error = RemoteProtocolError(f"{where} broke HTTP: {exc}")
        else:
            error = ConnectionFailed(f"{where}: {type(exc).__name__}: {exc}")
        raise error from None


def _is_tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError | ssl.CertificateError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "SSL" in str(exc) or "certificate" in str(exc).lower()
