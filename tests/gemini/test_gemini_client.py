"""The trio client against well-behaved and hostile TLS servers on 127.0.0.1.

Every server here is a few lines of trio. Each test runs under ``trio.fail_after`` so a hang
is a failure, and expects one specific documented error: any other exception fails the test.
"""

from __future__ import annotations

import gc
import os
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import loopback
import pytest
import trio
from certs import CertPair, cert_pair
from hypothesis import given, settings
from hypothesis import strategies as st
from loopback import tcp_server

from geminibot import urls
from geminibot.gemini import errors
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.tofu import FileKnownHosts, MemoryKnownHosts, Trust
from geminibot.net import errors as net_errors
from geminibot.net.dns import DnsCache
from geminibot.net.limits import Limits

HOST = "h.test"
TEST_DEADLINE = 10.0
# Generous timeouts (a loaded machine must not make a test flaky); tests of a timeout pass
# their own short Limits. TEST_DEADLINE is longer still, so a hang fails the test.
LIMITS = Limits(
    connect_timeout=4.0,
    header_timeout=4.0,
    idle_timeout=4.0,
    total_timeout=8.0,
    max_body_size=100_000,
)
Handler = Callable[[trio.abc.Stream], Awaitable[None]]


class Server:
    def __init__(self, port: int) -> None:
        self.port = port
        self.requests: list[bytes] = []
        self.sni: list[str | None] = []


@asynccontextmanager
async def serve(
    handler: Handler,
    *,
    cert: CertPair | None = None,
    tls: bool = True,
    close_notify: bool = True,
    context: ssl.SSLContext | None = None,
    address: str = "127.0.0.1",
) -> AsyncIterator[Server]:
    """Run ``handler`` for each connection on a loopback port until the block ends."""
    if context is None:
        context = (cert or cert_pair(HOST)).server_context()
    server: Server

    def remember_sni(_obj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        server.sni.append(name)

    context.sni_callback = remember_sni  # type: ignore[assignment]

    async def connection(tcp: trio.SocketStream) -> None:
        stream: trio.abc.Stream = tcp
        try:
            if tls:
                stream = trio.SSLStream(
                    tcp, context, server_side=True, https_compatible=not close_notify
                )
                await stream.do_handshake()
            await handler(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client hung up, as it should on a hostile server
        finally:
            await trio.aclose_forcefully(stream) if not close_notify else await stream.aclose()

    async with tcp_server(connection, address) as port:
        server = Server(port)
        yield server


def client_for(server: Server, **options: object) -> GeminiClient:
    return GeminiClient(connect_to={HOST: ("127.0.0.1", server.port)}, limits=LIMITS, **options)  # type: ignore[arg-type]


async def read_request(stream: trio.abc.Stream, server: Server | None = None) -> bytes:
    data = await loopback.read_request(stream, 2048)
    if server is not None:
        server.requests.append(data)
    return data


def replying(*parts: bytes) -> Handler:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        for part in parts:
            await stream.send_all(part)

    return handler


async def test_success_with_sni_tofu_and_close_notify() -> None:
    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(b"20 text/gemini; lang=en\r\n# Hi\r\n")) as server:
            client = client_for(server)
            first = await client.fetch(f"gemini://{HOST}/")
            second = await client.fetch(f"gemini://{HOST}/")
    assert (first.status, first.meta, first.body) == (20, "text/gemini; lang=en", b"# Hi\r\n")
    assert first.mime is not None and first.mime.lang == "en"
    assert first.text() == "# Hi\r\n"
    assert not first.possibly_truncated
    assert first.certificate == cert_pair(HOST).fingerprint
    assert (first.trust, second.trust) == (Trust.NEW, Trust.TRUSTED)
    assert server.sni == [HOST, HOST]
    assert first.redirects == ()


async def test_request_line_is_the_normalised_url() -> None:
    seen: list[bytes] = []

    async def handler(stream: trio.abc.Stream) -> None:
        seen.append(await read_request(stream))
        await stream.send_all(b"51 Not found\r\n")

    with trio.fail_after(TEST_DEADLINE):
        async with serve(handler) as server:
            response = await client_for(server).fetch("GEMINI://H.test:1965/a/../b c#frag")
    assert seen == [b"gemini://h.test/b%20c\r\n"]
    assert (response.status, response.meta, response.body) == (51, "Not found", b"")


async def test_missing_close_notify_is_flagged() -> None:
    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(b"20 text/plain\r\nhello"), close_notify=False) as server:
            response = await client_for(server).fetch(f"gemini://{HOST}/")
    assert response.body == b"hello"
    assert response.possibly_truncated


async def test_endless_body_stops_at_the_size_limit() -> None:
    async def endless(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(b"20 application/octet-stream\r\n")
        while True:
            await stream.send_all(b"x" * 16384)

    with trio.fail_after(TEST_DEADLINE):
        async with serve(endless) as server:
            with pytest.raises(net_errors.BodyTooLarge):
                await client_for(server).fetch(f"gemini://{HOST}/")


async def test_body_of_exactly_the_size_limit_is_accepted() -> None:
    body = b"y" * LIMITS.max_body_size
    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(b"20 text/plain\r\n", body)) as server:
            response = await client_for(server).fetch(f"gemini://{HOST}/")
    assert response.body == body


def dripping(header: bytes, interval: float) -> Handler:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(header)
        while True:
            await trio.sleep(interval)
            await stream.send_all(b".")

    return handler


@pytest.mark.parametrize(
    ("name", "header", "interval", "limits", "error"),
    [
        (
            "a byte a second ends at the idle timeout",
            b"20 text/plain\r\n",
            1.0,
            Limits(idle_timeout=0.2, total_timeout=5.0),
            net_errors.IdleTimeout,
        ),
        (
            "a fast drip ends at the total deadline",
            b"20 text/plain\r\n",
            0.02,
            Limits(idle_timeout=1.0, total_timeout=0.5),
            net_errors.DeadlineExceeded,
        ),
        (
            "a dripping header ends at the header timeout",
            b"2",
            0.05,
            Limits(header_timeout=0.3),
            net_errors.HeaderTimeout,
        ),
    ],
)
async def test_drips_end_at_their_timeout(
    name: str, header: bytes, interval: float, limits: Limits, error: type[Exception]
) -> None:
    with trio.fail_after(TEST_DEADLINE):
        async with serve(dripping(header, interval)) as server:
            with pytest.raises(error):
                await client_for(server).fetch(f"gemini://{HOST}/", limits=limits)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"20 text/gemini", errors.HeaderMissingCRLF),
        (b"20 text/gemini\nbody", errors.HeaderMissingCRLF),
        (b"20 " + b"a" * 1100 + b"\r\n", errors.HeaderTooLong),
        (b"20 " + b"a" * 5000, errors.HeaderTooLong),
        (b"OK text/gemini\r\n", errors.InvalidStatus),
        (b"2x text/gemini\r\n", errors.InvalidStatus),
        (b"99 what\r\n", errors.UnknownStatus),
        (b"20 text/gemini; charset=\xff\r\n", errors.HeaderNotUTF8),
        (b"30\r\n", errors.InvalidMeta),
        (b"", errors.EmptyResponse),
    ],
)
async def test_bad_headers_give_specific_errors(reply: bytes, error: type[Exception]) -> None:
    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(reply)) as server:
            with pytest.raises(error):
                await client_for(server).fetch(f"gemini://{HOST}/")


def redirecting(target: Callable[[bytes], bytes], server_box: list[Server]) -> Handler:
    async def handler(stream: trio.abc.Stream) -> None:
        request = await read_request(stream, server_box[0])
        await stream.send_all(target(request.strip()))

    return handler


def counting_redirects(request: bytes) -> bytes:
    """/N redirects to /N+1, forever."""
    n = int(request.rsplit(b"/", 1)[1] or b"0")
    return b"30 /%d\r\n" % (n + 1)


async def run_redirects(
    target: Callable[[bytes], bytes], url: str, **options: object
) -> tuple[object, Server]:
    box: list[Server] = []
    with trio.fail_after(TEST_DEADLINE):
        async with serve(redirecting(target, box)) as server:
            box.append(server)
            try:
                return await client_for(server, **options).fetch(url), server
            except net_errors.FetchError as exc:
                return exc, server


async def test_endless_redirects_stop_after_five_hops() -> None:
    outcome, server = await run_redirects(counting_redirects, f"gemini://{HOST}/0")
    assert isinstance(outcome, net_errors.TooManyRedirects)
    assert len(server.requests) == 6  # the first request and five redirects followed


async def test_five_redirects_are_followed() -> None:
    def five(request: bytes) -> bytes:
        n = int(request.rsplit(b"/", 1)[1])
        return b"30 /%d\r\n" % (n + 1) if n < 5 else b"20 text/plain\r\ndone"

    outcome, _ = await run_redirects(five, f"gemini://{HOST}/0")
    assert not isinstance(outcome, Exception)
    assert outcome.body == b"done"  # type: ignore[attr-defined]
    assert [str(u) for u in outcome.redirects] == [  # type: ignore[attr-defined]
        f"gemini://{HOST}/{n}" for n in range(5)
    ]


async def test_redirect_loop_is_refused_when_it_closes() -> None:
    def loop(request: bytes) -> bytes:
        return b"31 b\r\n" if request.endswith(b"/a") else b"30 gemini://h.test:1965/a\r\n"

    outcome, server = await run_redirects(loop, f"gemini://{HOST}/a")
    assert isinstance(outcome, net_errors.RedirectLoop)
    assert len(server.requests) == 2


async def test_redirect_to_another_scheme() -> None:
    def to_https(_request: bytes) -> bytes:
        return b"30 https://h.test/\r\n"

    refused, _ = await run_redirects(to_https, f"gemini://{HOST}/")
    assert isinstance(refused, net_errors.SchemeSwitchRefused)
    allowed, _ = await run_redirects(to_https, f"gemini://{HOST}/", allow_scheme_switch=True)
    assert allowed.status == 30  # type: ignore[attr-defined]
    assert allowed.redirect_url == "https://h.test/"  # type: ignore[attr-defined]


async def test_redirect_is_returned_when_not_following() -> None:
    box: list[Server] = []
    with trio.fail_after(TEST_DEADLINE):
        async with serve(redirecting(lambda _: b"30 ../next?q\r\n", box)) as server:
            box.append(server)
            response = await client_for(server).fetch(
                f"gemini://{HOST}/a/b/c", follow_redirects=False
            )
    assert response.redirect_url == f"gemini://{HOST}/a/next?q"
    assert len(server.requests) == 1


async def test_changed_certificate_policy(tmp_path: Path) -> None:
    store_path = tmp_path / "known_hosts"
    with trio.fail_after(TEST_DEADLINE):
        async with (
            serve(replying(b"20 text/plain\r\nold"), cert=cert_pair(HOST, 0)) as old,
            serve(replying(b"20 text/plain\r\nnew"), cert=cert_pair(HOST, 1)) as new,
        ):
            target = {HOST: ("127.0.0.1", old.port)}
            first = await GeminiClient(
                known_hosts=FileKnownHosts(store_path), connect_to=target
            ).fetch(f"gemini://{HOST}/")
            target[HOST] = ("127.0.0.1", new.port)  # same host and port in the URL, new certificate
            with pytest.raises(errors.CertificateChanged) as refused:
                await GeminiClient(
                    known_hosts=FileKnownHosts(store_path), connect_to=target, strict_tofu=True
                ).fetch(f"gemini://{HOST}/")
            assert FileKnownHosts(store_path).get(HOST, 1965) == cert_pair(HOST, 0).fingerprint
            changed = await GeminiClient(
                known_hosts=FileKnownHosts(store_path), connect_to=target
            ).fetch(f"gemini://{HOST}/")
            other_port = await GeminiClient(
                known_hosts=FileKnownHosts(store_path), connect_to=target, strict_tofu=True
            ).fetch(f"gemini://{HOST}:1966/")
    assert first.trust is Trust.NEW
    assert refused.value.pinned == cert_pair(HOST, 0).fingerprint
    assert refused.value.seen == cert_pair(HOST, 1).fingerprint
    assert (changed.trust, changed.body) == (Trust.CHANGED, b"new")
    assert changed.previous_certificate == cert_pair(HOST, 0).fingerprint
    assert FileKnownHosts(store_path).get(HOST, 1965) == cert_pair(HOST, 1).fingerprint
    assert other_port.trust is Trust.NEW  # pins are per host and port


async def test_tcp_without_tls_times_out_at_connect() -> None:
    async def silent(_stream: trio.abc.Stream) -> None:
        await trio.sleep_forever()

    with trio.fail_after(TEST_DEADLINE):
        async with serve(silent, tls=False) as server:
            with pytest.raises(net_errors.ConnectTimeout):
                await client_for(server).fetch(
                    f"gemini://{HOST}/", limits=Limits(connect_timeout=0.3)
                )


async def test_plain_text_server_is_a_tls_failure() -> None:
    async def plain(stream: trio.abc.Stream) -> None:
        await stream.send_all(b"20 text/plain\r\nnot TLS at all\r\n")

    with trio.fail_after(TEST_DEADLINE):
        async with serve(plain, tls=False) as server:
            with pytest.raises(net_errors.TLSFailure):
                await client_for(server).fetch(f"gemini://{HOST}/")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
async def test_tls_older_than_1_2_is_refused() -> None:
    context = cert_pair(HOST).server_context()
    context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(b"20 text/plain\r\n"), context=context) as server:
            with pytest.raises(net_errors.TLSFailure):
                await client_for(server).fetch(f"gemini://{HOST}/")


async def test_closed_port_is_a_connection_failure() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    client = GeminiClient(connect_to={HOST: ("127.0.0.1", port)}, limits=LIMITS)
    with trio.fail_after(TEST_DEADLINE), pytest.raises(net_errors.ConnectionFailed):
        await client.fetch(f"gemini://{HOST}/")


async def test_hang_up_without_close_notify_before_header() -> None:
    async def hang_up(stream: trio.abc.Stream) -> None:
        await read_request(stream)

    with trio.fail_after(TEST_DEADLINE):
        async with serve(hang_up, close_notify=False) as server:
            with pytest.raises(net_errors.ConnectionFailed):
                await client_for(server).fetch(f"gemini://{HOST}/")


async def test_connect_to_callable_and_ip_literal_url() -> None:
    calls: list[tuple[str, int]] = []
    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(b"20 text/plain\r\nip")) as server:

            def route(host: str, port: int) -> tuple[str, int]:
                calls.append((host, port))
                return "127.0.0.1", server.port

            response = await GeminiClient(connect_to=route).fetch("gemini://127.0.0.1/")
    assert response.body == b"ip"
    assert calls == [("127.0.0.1", 1965)]
    assert server.sni == [None]  # Python's ssl sends no SNI for an IP address


async def test_invalid_url_and_too_long_request_fail_before_connecting() -> None:
    client = GeminiClient(known_hosts=MemoryKnownHosts())
    with pytest.raises(urls.UnsupportedScheme):
        await client.fetch("https://example.org/")
    with pytest.raises(errors.RequestTooLong):
        await client.fetch("gemini://h.test/" + "a" * 1100)


_HEADERS = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"20 text/gemini\r\n", b"30 /x\r\n", b"44 5\r\n", b"20 \xff\r\n", b"2"]),
)


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(st.one_of(_HEADERS, st.binary(max_size=300)), max_size=5),
    close_notify=st.booleans(),
)
async def test_any_server_bytes_give_a_response_or_a_documented_error(
    parts: list[bytes], close_notify: bool
) -> None:
    limits = Limits(
        connect_timeout=2.0,
        header_timeout=0.5,
        idle_timeout=0.5,
        total_timeout=3.0,
        max_body_size=500,
    )
    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(*parts), close_notify=close_notify) as server:
            try:
                response = await client_for(server).fetch(f"gemini://{HOST}/x", limits=limits)
            except net_errors.FetchError:
                return
    assert 10 <= response.status <= 69
    assert len(response.body) <= 500


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback here")
async def test_ipv6_literal_url() -> None:
    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(b"20 text/plain\r\nsix"), address="::1") as server:
            response = await GeminiClient().fetch(f"gemini://[::1]:{server.port}/")
    assert response.body == b"six"
    assert str(response.url) == f"gemini://[::1]:{server.port}/"


# The transport: TCP connect and TLS over the socket (geminibot.gemini.tls).


def reading_then(close: Callable[[trio.SocketStream], None]) -> Handler:
    """A plain TCP server that reads the start of the ClientHello, then ``close``s."""

    async def handler(stream: trio.abc.Stream) -> None:
        assert isinstance(stream, trio.SocketStream)
        await stream.receive_some(5)
        close(stream)

    return handler


def hang_up(stream: trio.SocketStream) -> None:
    stream.socket.close()


def reset(stream: trio.SocketStream) -> None:
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    stream.socket.close()


@pytest.mark.parametrize("close", [hang_up, reset], ids=["EOF", "RST"])
async def test_server_gone_mid_handshake_is_a_tls_failure(
    close: Callable[[trio.SocketStream], None],
) -> None:
    with trio.fail_after(TEST_DEADLINE):
        async with serve(reading_then(close), tls=False) as server:
            with pytest.raises(net_errors.TLSFailure, match=r"TLS handshake with h\.test"):
                await client_for(server).fetch(f"gemini://{HOST}/")


async def test_server_silent_after_the_handshake_is_a_header_timeout() -> None:
    async def silent(_stream: trio.abc.Stream) -> None:
        await trio.sleep_forever()  # the handshake is done (serve), the request never read

    with trio.fail_after(TEST_DEADLINE):
        async with serve(silent) as server:
            with pytest.raises(net_errors.HeaderTimeout):
                await client_for(server).fetch(
                    f"gemini://{HOST}/", limits=Limits(header_timeout=0.3)
                )


async def test_the_client_sends_close_notify() -> None:
    """The client closes with close_notify, here after cutting a body it had enough of."""
    ends: list[bytes | str] = []

    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(b"20 text/plain\r\n" + b"z" * 100)
        try:
            ends.append(await stream.receive_some(100))  # b"": a close_notify came
        except trio.BrokenResourceError:
            ends.append("TCP closed without close_notify")

    with trio.fail_after(TEST_DEADLINE):
        async with serve(handler) as server:
            response = await client_for(server).fetch(
                f"gemini://{HOST}/", limits=Limits(max_body_size=10, cut_body=True)
            )
            while not ends:
                await trio.sleep(0.01)
    assert response.body == b"z" * 10
    assert ends == [b""]


async def test_the_next_address_is_tried_when_one_refuses() -> None:
    async def two(_name: str, _port: int) -> list[str]:
        return ["127.0.0.2", "127.0.0.1"]  # the server listens on 127.0.0.1 only

    async def one(_name: str, _port: int) -> list[str]:
        return ["127.0.0.2"]

    with trio.fail_after(TEST_DEADLINE):
        async with serve(replying(b"20 text/plain\r\nsecond")) as server:
            route = {HOST: ("two.test", server.port)}
            response = await GeminiClient(connect_to=route, dns=DnsCache(lookup=two)).fetch(
                f"gemini://{HOST}/"
            )
            refusing = GeminiClient(connect_to=route, dns=DnsCache(lookup=one))
            with pytest.raises(net_errors.ConnectionFailed, match=r"cannot connect to two\.test"):
                await refusing.fetch(f"gemini://{HOST}/")
    assert response.body == b"second"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc/self/fd here")
async def test_every_failure_closes_its_socket() -> None:
    """Each way a fetch fails closes the connection at once, even while the error (and so
    its traceback's frames) is kept, as a crawler's log may keep it."""
    kept: list[BaseException] = []

    async def stall(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(b"20 text/plain\r\n")
        await trio.sleep_forever()

    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    closed_port = listener.getsockname()[1]
    listener.close()
    gc.collect()  # (earlier tests' garbage closes its sockets now, not while we count)
    before = open_fds()
    short = Limits(connect_timeout=0.3, header_timeout=0.3, idle_timeout=0.3)
    with trio.fail_after(TEST_DEADLINE):
        cases: list[tuple[Handler, bool, type[Exception]]] = [
            (reading_then(hang_up), False, net_errors.TLSFailure),
            (reading_then(reset), False, net_errors.TLSFailure),
            (lambda _s: trio.sleep_forever(), False, net_errors.ConnectTimeout),
            (lambda _s: trio.sleep_forever(), True, net_errors.HeaderTimeout),
            (stall, True, net_errors.IdleTimeout),
        ]
        for handler, tls, error in cases:
            async with serve(handler, tls=tls) as server:
                with pytest.raises(error) as caught:
                    await client_for(server).fetch(f"gemini://{HOST}/", limits=short)
                kept.append(caught.value)
        refused = GeminiClient(connect_to={HOST: ("127.0.0.1", closed_port)})
        with pytest.raises(net_errors.ConnectionFailed) as caught:
            await refused.fetch(f"gemini://{HOST}/")
        kept.append(caught.value)
    assert open_fds() == before
