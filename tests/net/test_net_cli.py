"""The commands through the shared network layer: ``geminibot fetch`` against a real TLS
server on 127.0.0.1 (the CLI runs in a worker thread, the server in the test's trio run)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from certs import cert_pair
from loopback import read_request, tcp_server

from geminibot.cli import main

Reply = Callable[[bytes], bytes]
DEADLINE = 20.0


@asynccontextmanager
async def gemini_server(host: str, reply: Reply) -> AsyncIterator[tuple[int, list[bytes]]]:
    """A TLS server answering each request line with ``reply(line)``; yields its port and
    the requests received."""
    context = cert_pair(host).server_context()
    requests: list[bytes] = []

    async def connection(tcp: trio.SocketStream) -> None:
        stream = trio.SSLStream(tcp, context, server_side=True)
        try:
            await stream.do_handshake()
            data = await read_request(stream, 4096)
            requests.append(data)
            await stream.send_all(reply(data.strip()))
            await stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await trio.aclose_forcefully(stream)

    async with tcp_server(connection) as port:
        yield port, requests


async def run_cli(argv: list[str]) -> int:
    code: Awaitable[int] | int = await trio.to_thread.run_sync(main, argv)
    assert isinstance(code, int)
    return code


async def test_redirect_to_a_too_long_url_is_a_failed_fetch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A redirect whose target is over 1024 bytes once resolved is the
    server's fault: exit 1 with an error object, not a usage error (exit 2, no output)."""
    target = b"/" + b"a" * 1015  # a meta within 1024 bytes, a URL beyond them

    def reply(line: bytes) -> bytes:
        return b"30 " + target + b"\r\n"

    with trio.fail_after(DEADLINE):
        async with gemini_server("h.test", reply) as (port, requests):
            route = ["--connect-to", f"h.test:1965:127.0.0.1:{port}"]
            code = await run_cli(["fetch", "gemini://h.test/", "--json", *route])
    assert code == 1
    record = json.loads(capsys.readouterr().out)
    assert record["error"] == "InvalidRedirect"
    assert "1024" in record["message"]
    assert len(requests) == 1  # the too-long URL was never requested
    with trio.fail_after(DEADLINE):
        async with gemini_server("h.test", reply) as (port, _):
            route = ["--connect-to", f"h.test:1965:127.0.0.1:{port}"]
            code = await run_cli(["fetch", "gemini://h.test/", *route])
    assert code == 1
    assert "InvalidRedirect" in capsys.readouterr().err


@pytest.mark.parametrize("written", ["bücher.test", "xn--bcher-kva.test"])
async def test_connect_to_matches_an_idn_host(
    written: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule written in Unicode or punycode routes the URL written either way."""

    def reply(line: bytes) -> bytes:
        return b"20 text/plain\r\nhello"

    with trio.fail_after(DEADLINE):
        async with gemini_server("xn--bcher-kva.test", reply) as (port, requests):
            route = ["--connect-to", f"{written}:1965:127.0.0.1:{port}"]
            for url in ("gemini://bücher.test/", "gemini://xn--bcher-kva.test/"):
                assert await run_cli(["fetch", url, "--json", *route]) == 0
                assert json.loads(capsys.readouterr().out)["status"] == 20
    assert requests == [b"gemini://xn--bcher-kva.test/\r\n"] * 2


def test_bad_connect_to_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "crawl.db")
    for argv in (
        ["fetch", "gemini://h.test/", "--connect-to", "h.test:0:127.0.0.1:1965"],
        ["compare", "h.test", "--connect-to", "h.test:1965:127.0.0.1:99999"],
        ["crawl", "gemini://h.test/", "--db", db, "--connect-to", "h.test:1965"],
    ):
        assert main(argv) == 2, argv
        assert "--connect-to" in capsys.readouterr().err
