"""The http(s) client against a real HTTP server on 127.0.0.1, hostile cases included."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import certs
import pytest
import trio
from loopback import tcp_server
from webserver import Page, endless_body, html, redirect, serve, silent, slow_drip, system_tls, text

from geminibot.http.client import WebClient, user_agent
from geminibot.http.urls import parse_web_url
from geminibot.net.errors import (
    BodyTooLarge,
    ConnectionFailed,
    ConnectTimeout,
    DeadlineExceeded,
    HeaderTimeout,
    IdleTimeout,
    RedirectLoop,
    RemoteProtocolError,
    SchemeSwitchRefused,
    TLSFailure,
    TooManyRedirects,
)
from geminibot.net.limits import DEFAULT_MAX_BODY_SIZE, MAX_REDIRECTS, Limits
from geminibot.urls import InvalidURL

#: Time limits no answer reaches however loaded the machine (none of these tests is about
#: a time limit; those set their own), yet a hang still ends the test.
BOUNDED = Limits(connect_timeout=30, header_timeout=30, idle_timeout=30, total_timeout=60)


def test_same_limits_as_the_gemini_client() -> None:
    limits = WebClient().limits
    assert limits == Limits()
    assert limits.max_body_size == DEFAULT_MAX_BODY_SIZE
    assert limits.max_redirects == MAX_REDIRECTS


def test_web_urls_are_normalised() -> None:
    url = parse_web_url("HTTPS://Example.ORG:443/a/./b/../c%7e?q=%2f#frag")
    assert str(url) == "https://example.org/a/c~?q=%2F"
    assert url.origin == "https://example.org"
    assert parse_web_url("http://h.test:8080").origin == "http://h.test:8080"
    assert str(parse_web_url("http://h.test:1965/")) == "http://h.test:1965/"
    for bad in ("gemini://h.test/", "http://user@h.test/", "http:///x", "http://h.test:0/", "/x"):
        with pytest.raises(InvalidURL):
            parse_web_url(bad)


async def test_get_sends_user_agent_and_reads_body() -> None:
    with serve({"/": html("<p>hi</p>")}) as web:
        async with WebClient(verify=system_tls(), limits=BOUNDED) as client:
            response = await client.fetch(f"http://127.0.0.1:{web.port}/")
    assert response.status == 200
    assert response.body == b"<p>hi</p>"
    assert response.content_type.startswith("text/html")
    agent = web.log[0].headers["User-Agent"]
    assert agent == user_agent() and agent.startswith("geminibot/0.1")
    assert "(+" in agent


async def test_connect_to_keeps_the_host_header() -> None:
    with serve({"/robots.txt": text("User-agent: *\n")}) as web:
        route = {"site.test:80": ("127.0.0.1", web.port)}
        async with WebClient(verify=system_tls(), limits=BOUNDED, connect_to=route) as client:
            response = await client.fetch("http://site.test/robots.txt")
    assert response.status == 200
    assert str(response.url) == "http://site.test/robots.txt"
    assert web.log[0].headers["Host"] == "site.test"


async def test_extra_headers_and_head() -> None:
    with serve({"/a": text("body")}) as web:
        async with WebClient(verify=system_tls(), limits=BOUNDED) as client:
            response = await client.fetch(
                f"http://127.0.0.1:{web.port}/a", method="HEAD", headers=[("X-Test", "1")]
            )
    assert response.status == 200 and response.body == b""
    assert web.log[0].method == "HEAD" and web.log[0].headers["X-Test"] == "1"


async def test_redirects_are_followed_and_counted() -> None:
    routes = {"/a": redirect("/b", 301), "/b": redirect("/c", 307), "/c": text("end")}
    with serve(routes) as web:
        async with WebClient(verify=system_tls(), limits=BOUNDED) as client:
            base = f"http://127.0.0.1:{web.port}"
            response = await client.fetch(f"{base}/a")
            unfollowed = await client.fetch(f"{base}/a", follow_redirects=False)
    assert response.body == b"end"
    assert [u.path for u in response.redirects] == ["/a", "/b"]
    assert unfollowed.status == 301 and unfollowed.redirect_url == f"{base}/b"


async def test_redirect_loop_ends() -> None:
    with serve({"/a": redirect("/b"), "/b": redirect("/a")}) as web:
        async with WebClient(verify=system_tls(), limits=BOUNDED) as client:
            with pytest.raises(RedirectLoop):
                await client.fetch(f"http://127.0.0.1:{web.port}/a")
    assert web.paths() == ["/a", "/b"]


@pytest.mark.parametrize("hops", [MAX_REDIRECTS, MAX_REDIRECTS + 1])
async def test_redirect_hop_limit_edge(hops: int) -> None:
    routes: dict[str, object] = {f"/r{i}": redirect(f"/r{i + 1}") for i in range(hops)}
    routes[f"/r{hops}"] = text("landed")
    with serve(routes) as web:  # type: ignore[arg-type]
        async with WebClient(verify=system_tls(), limits=BOUNDED) as client:
            url = f"http://127.0.0.1:{web.port}/r0"
            if hops <= MAX_REDIRECTS:
                assert (await client.fetch(url)).body == b"landed"
            else:
                with pytest.raises(TooManyRedirects):
                    await client.fetch(url)
    assert len(web.log) == min(hops, MAX_REDIRECTS) + 1


async def test_scheme_switch_refused_or_returned() -> None:
    with serve({"/g": redirect("gemini://capsule.test/")}) as web:
        url = f"http://127.0.0.1:{web.port}/g"
        async with WebClient(verify=system_tls(), limits=BOUNDED) as client:
            with pytest.raises(SchemeSwitchRefused):
                await client.fetch(url)
        async with WebClient(
            verify=system_tls(), limits=BOUNDED, allow_scheme_switch=True
        ) as client:
            response = await client.fetch(url)
    assert response.status == 302 and response.redirect_url == "gemini://capsule.test/"


@pytest.mark.parametrize("size", [1000, 1001])
async def test_body_size_limit_edge(size: int) -> None:
    limits = Limits(connect_timeout=2, header_timeout=2, idle_timeout=2, max_body_size=1000)
    with serve({"/": Page(body=b"x" * size)}) as web:
        async with WebClient(verify=system_tls(), limits=limits) as client:
            url = f"http://127.0.0.1:{web.port}/"
            if size <= 1000:
                assert len((await client.fetch(url)).body) == size
            else:
                with pytest.raises(BodyTooLarge, match="declares"):
                    await client.fetch(url)


async def test_endless_body_stops_at_the_size_cap() -> None:
    limits = Limits(connect_timeout=2, header_timeout=2, idle_timeout=2, max_body_size=200_000)
    with serve({"/": endless_body}) as web:
        async with WebClient(verify=system_tls(), limits=limits) as client:
            with pytest.raises(BodyTooLarge, match="larger than 200000"):
                await client.fetch(f"http://127.0.0.1:{web.port}/")


async def test_gzip_bomb_stops_at_the_size_cap() -> None:
    import gzip

    bomb = gzip.compress(b"\0" * 5_000_000)
    limits = Limits(connect_timeout=2, header_timeout=2, idle_timeout=2, max_body_size=100_000)
    page = Page(body=bomb, headers=(("Content-Encoding", "gzip"),))
    with serve({"/": page}) as web:
        async with WebClient(verify=system_tls(), limits=limits) as client:
            with pytest.raises(BodyTooLarge):
                await client.fetch(f"http://127.0.0.1:{web.port}/")
    assert len(bomb) < 100_000


async def test_slow_drip_hits_the_idle_timeout() -> None:
    limits = Limits(connect_timeout=2, header_timeout=2, idle_timeout=0.2, total_timeout=5)
    with serve({"/": slow_drip(0.5)}) as web:
        async with WebClient(verify=system_tls(), limits=limits) as client:
            with pytest.raises(IdleTimeout):
                await client.fetch(f"http://127.0.0.1:{web.port}/")


async def test_fast_drip_hits_the_total_deadline() -> None:
    limits = Limits(connect_timeout=2, header_timeout=2, idle_timeout=2, total_timeout=0.5)
    with serve({"/": slow_drip(0.05)}) as web:
        async with WebClient(verify=system_tls(), limits=limits) as client:
            start = trio.current_time()
            with pytest.raises(DeadlineExceeded):
                await client.fetch(f"http://127.0.0.1:{web.port}/")
            assert trio.current_time() - start < 2


async def test_silent_server_hits_the_header_timeout() -> None:
    limits = Limits(connect_timeout=2, header_timeout=0.2, idle_timeout=2, total_timeout=5)
    with serve({"/": silent}) as web:
        async with WebClient(verify=system_tls(), limits=limits) as client:
            with pytest.raises(HeaderTimeout):
                await client.fetch(f"http://127.0.0.1:{web.port}/")


async def test_refused_connection_and_garbage() -> None:
    async with WebClient(verify=system_tls(), limits=BOUNDED) as client:
        with trio.socket.socket() as sock:
            await sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]  # bound, not listening: connection refused
            with pytest.raises(ConnectionFailed):
                await client.fetch(f"http://127.0.0.1:{port}/")

    async def garbage(stream: trio.SocketStream) -> None:
        await stream.receive_some(4096)
        await stream.send_all(b"SPAM SPAM SPAM\r\n\r\n")
        await stream.aclose()

    async with (
        tcp_server(garbage) as port,
        WebClient(verify=system_tls(), limits=BOUNDED) as client,
    ):
        with pytest.raises(RemoteProtocolError):
            await client.fetch(f"http://127.0.0.1:{port}/")


def _tls_server(context: ssl.SSLContext) -> tuple[ThreadingHTTPServer, threading.Thread]:
    from webserver import WebServer, _handler

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(WebServer({"/": text("secure")})))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    return httpd, thread


async def test_https_with_sni_through_connect_to() -> None:
    pair = certs.cert_pair("secure.test")
    httpd, thread = _tls_server(pair.server_context())
    try:
        port = httpd.server_address[1]
        trusted = ssl.create_default_context(cadata=pair.cert_pem.decode())
        route = {"secure.test": ("127.0.0.1", port)}
        async with WebClient(limits=BOUNDED, connect_to=route, verify=trusted) as client:
            response = await client.fetch(f"https://secure.test:{port}/")
            assert response.body == b"secure"
        async with WebClient(limits=BOUNDED, connect_to=route) as client:  # system CAs only
            with pytest.raises(TLSFailure):
                await client.fetch(f"https://secure.test:{port}/")
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


async def test_stalled_tls_handshake_hits_the_connect_timeout() -> None:
    async def mute(stream: trio.SocketStream) -> None:
        await trio.sleep(5)  # never answers the ClientHello

    limits = Limits(connect_timeout=0.3, header_timeout=2, idle_timeout=2, total_timeout=5)
    async with tcp_server(mute) as port, WebClient(verify=system_tls(), limits=limits) as client:
        with pytest.raises(ConnectTimeout):
            await client.fetch(f"https://127.0.0.1:{port}/")


async def test_endless_redirects_end_at_the_hop_limit() -> None:
    """A server that redirects to a new URL every time (no URL repeats, so no loop is
    seen): the client stops after MAX_REDIRECTS hops."""

    def onwards(handler: BaseHTTPRequestHandler) -> None:
        n = int(handler.path.partition("?n=")[2] or 0)
        handler.send_response(302)
        handler.send_header("Location", f"/next?n={n + 1}")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    with serve({"/next": onwards}) as web:
        async with WebClient(verify=system_tls(), limits=BOUNDED) as client:
            with pytest.raises(TooManyRedirects):
                await client.fetch(f"http://127.0.0.1:{web.port}/next")
    assert len(web.log) == MAX_REDIRECTS + 1
