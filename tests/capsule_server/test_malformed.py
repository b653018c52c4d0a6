"""Hostile and malformed requests over real TLS (and a few without TLS).

Each case sends raw bytes and expects a status (the first two header digits) or a clean
close (""), then proves the server still serves a normal request. One server (on a thread
of its own) answers the whole module: each case leaves it serving for the next.
"""

from __future__ import annotations

import ssl
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from capsule_fixtures import TEST_LIMITS
from loopback import served_on_a_thread

from capsule_server.server import CapsuleServer
from capsule_server.testing import open_tls, raw_request, running_server
from geminibot.gemini.client import make_ssl_context

M = "maze.test"
V = "va-groups.test"
LONG_PATH_1024 = "gemini://va-groups.test/" + "x" * (1024 - len("gemini://va-groups.test/"))

# (id, SNI, raw request bytes, expected status or "" for a clean close without answer)
CASES: list[tuple[str, str | None, bytes, str]] = [
    ("control", M, b"gemini://maze.test/\r\n", "20"),
    ("url-exactly-1024-bytes", V, LONG_PATH_1024.encode() + b"\r\n", "51"),
    ("url-1025-bytes", V, LONG_PATH_1024.encode() + b"x\r\n", "59"),
    ("url-1029-bytes", M, b"gemini://maze.test/" + b"a" * 1010 + b"\r\n", "59"),
    ("2000-bytes-no-newline", M, b"gemini://maze.test/" + b"a" * 2000, "59"),
    ("8-kib-garbage", M, bytes(range(256)) * 32, "59"),
    ("cr-inside", M, b"gemini://maze.test/\rX\r\n", "59"),
    ("bom", M, b"\xef\xbb\xbfgemini://maze.test/\r\n", "59"),
    ("invalid-utf8", M, b"gemini://maze.test/\xff\r\n", "59"),
    ("overlong-utf8-slash", M, b"gemini://maze.test/\xc0\xaf\r\n", "59"),
    ("utf8-surrogate", M, b"gemini://maze.test/\xed\xa0\x80\r\n", "59"),
    ("truncated-utf8", M, b"gemini://maze.test/\xe2\x82\r\n", "59"),
    ("userinfo", M, b"gemini://user@maze.test/\r\n", "59"),
    ("userinfo-password", M, b"gemini://user:pw@maze.test/\r\n", "59"),
    ("empty-userinfo", M, b"gemini://@maze.test/\r\n", "59"),
    ("fragment", M, b"gemini://maze.test/#top\r\n", "59"),
    ("empty-fragment", M, b"gemini://maze.test/#\r\n", "59"),
    ("relative-path", M, b"/\r\n", "59"),
    ("relative-no-scheme", M, b"maze.test/\r\n", "59"),
    ("scheme-relative", M, b"//maze.test/\r\n", "59"),
    ("https-scheme", M, b"https://maze.test/\r\n", "53"),
    ("http-scheme", M, b"http://maze.test/\r\n", "53"),
    ("gopher-scheme", M, b"gopher://maze.test/\r\n", "53"),
    ("file-scheme", M, b"file:///etc/passwd\r\n", "53"),
    ("upper-case-scheme", M, b"GEMINI://maze.test/\r\n", "20"),
    ("other-host", M, b"gemini://example.com/\r\n", "53"),
    ("ip-host-with-sni", M, b"gemini://127.0.0.1/\r\n", "53"),
    ("ipv6-host", M, b"gemini://[::1]/\r\n", "53"),
    ("percent-encoded-host", M, b"gemini://maze%2etest/\r\n", "20"),
    ("idn-host", M, "gemini://ñ.test/\r\n".encode(), "53"),
    ("no-host", M, b"gemini:///\r\n", "59"),
    ("scheme-only", M, b"gemini:\r\n", "59"),
    ("bad-port", M, b"gemini://maze.test:99999/\r\n", "59"),
    ("non-numeric-port", M, b"gemini://maze.test:abc/\r\n", "59"),
    ("explicit-port", M, b"gemini://maze.test:1965/\r\n", "20"),
    ("wrong-port", M, b"gemini://maze.test:1966/\r\n", "53"),  # served on an ephemeral port
    ("upper-case-host", M, b"gemini://MAZE.TEST/\r\n", "20"),
    ("trailing-dot-host", M, b"gemini://maze.test./\r\n", "20"),
    ("no-path", M, b"gemini://maze.test\r\n", "20"),
    ("query", M, b"gemini://maze.test/?q=1\r\n", "20"),
    ("empty-line", M, b"\r\n", "59"),
    ("space-in-path", V, b"gemini://va-groups.test/a b\r\n", "51"),
    ("leading-space", M, b" gemini://maze.test/\r\n", "59"),
    ("tab", M, b"gemini://maze.test/\t\r\n", "59"),
    ("nul-byte", M, b"gemini://maze.test/\x00\r\n", "59"),
    ("del-byte", M, b"gemini://maze.test/\x7f\r\n", "59"),
    ("http-request-line", M, b"GET / HTTP/1.1\r\nHost: maze.test\r\n\r\n", "59"),
    ("pipelined-two-requests", M, b"gemini://maze.test/\r\ngemini://maze.test/\r\n", "20"),
    ("double-crlf", M, b"gemini://maze.test/\r\n\r\n", "20"),
    ("dotdot", V, b"gemini://va-groups.test/../../../../etc/passwd\r\n", "59"),
    ("encoded-dotdot", V, b"gemini://va-groups.test/%2e%2e/%2e%2e/etc/passwd\r\n", "59"),
    ("encoded-dotdot-upper", V, b"gemini://va-groups.test/%2E%2E/%2E%2E/etc/passwd\r\n", "59"),
    ("dotdot-inside", V, b"gemini://va-groups.test/public/../index.gmi\r\n", "20"),
    ("encoded-slash", V, b"gemini://va-groups.test/..%2f..%2fetc%2fpasswd\r\n", "51"),
    ("encoded-slash-upper", V, b"gemini://va-groups.test/public/..%2Fprivate/a.gmi\r\n", "51"),
    ("encoded-absolute", V, b"gemini://va-groups.test/%2Fetc%2Fpasswd\r\n", "51"),
    ("double-slash-absolute", V, b"gemini://va-groups.test//etc/passwd\r\n", "51"),
    ("backslash", V, b"gemini://va-groups.test/..\\..\\etc\\passwd\r\n", "51"),
    ("encoded-backslash", V, b"gemini://va-groups.test/..%5c..%5cetc%5cpasswd\r\n", "51"),
    ("encoded-nul", V, b"gemini://va-groups.test/index.gmi%00.txt\r\n", "51"),
    ("single-dot", V, b"gemini://va-groups.test/./index.gmi\r\n", "20"),
    ("encoded-single-dot", V, b"gemini://va-groups.test/%2e/index.gmi\r\n", "20"),
    ("overlong-encoded-slash", V, b"gemini://va-groups.test/..%c0%af..%c0%afetc\r\n", "51"),
    ("hidden-file", V, b"gemini://va-groups.test/.git/config\r\n", "51"),
    ("expect-toml", V, b"gemini://va-groups.test/expect.toml\r\n", "51"),
    ("serve-toml", M, b"gemini://robots-41.test/serve.toml\r\n", "53"),
    ("file-as-folder", V, b"gemini://va-groups.test/index.gmi/\r\n", "51"),
    ("tilde-user", V, b"gemini://va-groups.test/~root/\r\n", "51"),
    ("readme", V, b"gemini://va-groups.test/README.gmi\r\n", "20"),
]


@pytest.fixture(scope="module")
def server(capsules_dir: Path, cert_dir: Path) -> Iterator[CapsuleServer]:
    """The bundled capsules, served for the whole module (tests/capsule_fixtures.py serves
    them per test, in the test's own trio run)."""
    with served_on_a_thread(lambda: running_server(capsules_dir, cert_dir, TEST_LIMITS)) as srv:
        yield srv


async def still_serving(port: int) -> None:
    response = await raw_request(port, b"gemini://maze.test/\r\n", "maze.test")
    assert response.startswith(b"20 text/gemini")


@pytest.mark.parametrize(
    ("sni", "data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_malformed_over_tls(
    server: CapsuleServer, sni: str | None, data: bytes, expected: str
) -> None:
    assert server.port is not None
    response = await raw_request(server.port, data, sni)
    if expected:
        assert response[:3] == expected.encode() + b" ", response[:80]
        assert response.count(b"\r\n") >= 1
        if expected != "20":
            assert response.endswith(b"\r\n") and response.count(b"\r\n") == 1
            assert len(response) <= 1024 + 5
    else:
        assert response == b""
    await still_serving(server.port)


def test_suite_is_big_enough() -> None:
    assert len(CASES) >= 50
    assert len({c[0] for c in CASES}) == len(CASES)


PLAIN_CASES = [
    ("gemini-request-without-tls", b"gemini://maze.test/\r\n"),
    ("http-request-without-tls", b"GET / HTTP/1.0\r\n\r\n"),
    ("binary-junk", bytes(range(256)) * 4),
    ("fake-tls-record", b"\x16\x03\x01\x00\x05hello"),
    ("nothing-then-close", b""),
]


@pytest.mark.parametrize("data", [c[1] for c in PLAIN_CASES], ids=[c[0] for c in PLAIN_CASES])
async def test_without_tls_is_closed(server: CapsuleServer, data: bytes) -> None:
    assert server.port is not None
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        if data:
            await stream.send_all(data)
        else:
            await stream.send_eof()
        received = b""
        try:
            while chunk := await stream.receive_some(4096):
                received += chunk
        except trio.BrokenResourceError:
            pass
        await stream.aclose()
    # A TLS alert at most: never a Gemini header, never a hang.
    assert not received[:2].isdigit()
    await still_serving(server.port)


async def test_old_tls_versions_are_refused(server: CapsuleServer) -> None:
    assert server.port is not None
    ctx = make_ssl_context()
    try:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer TLS 1.0/1.1 at all
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = ssl.TLSVersion.TLSv1
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot offer TLS 1.1")
    tls = await open_tls(server.port, "maze.test", handshake=False, context=ctx)
    with pytest.raises(trio.BrokenResourceError) as caught:
        await tls.do_handshake()
    assert "PROTOCOL_VERSION" in str(caught.value.__cause__)  # the server's alert
    await tls.transport_stream.aclose()
    await still_serving(server.port)
