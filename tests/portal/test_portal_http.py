"""The portal's HTTP server as hostile web clients meet it, on the real process: HTTP/2 is
refused on the plain port (prior knowledge, rapid reset, h2c upgrade), a head is at most
16 KiB, a body that never ends is not held, a WebSocket upgrade gets a page, descriptors
run out for no one (the oldest idle connection makes room; ``EMFILE`` is one line), and
stopping under load is clean.

Tests that give the portal the same options share one portal process and one hostile
capsule for the module."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio
from loopback import served_on_a_thread
from public_fixtures import (
    BOUND,
    Hostile,
    Portal,
    evil_args,
    h2_client_bytes,
    header,
    hostile_capsule,
    portal_process,
    raw_http,
)

from geminibot.portal.limits import DESCRIPTOR_RESERVE, MAX_HEAD_BYTES


@pytest.fixture(scope="module")
def evil() -> Iterator[Hostile]:
    """The hostile capsule, on a thread of its own, for the module's portals."""
    with served_on_a_thread(hostile_capsule) as hostile:
        yield hostile


@pytest.fixture(scope="module")
def portal(evil: Hostile, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Portal]:
    """A portal that shows any ``*.test`` capsule (the hostile one), and waits a second
    for a form body (``--body-timeout 1``)."""
    err = tmp_path_factory.mktemp("portal") / "err"
    with portal_process(err, *evil_args(evil.port, "--body-timeout", "1")) as portal:
        yield portal


async def get(portal: Portal, path: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=portal.base, timeout=BOUND) as web:
        return await web.get(path)


def sized_head(size: int) -> bytes:
    """A GET whose head (request line, fields, blank line) is exactly ``size`` bytes."""
    start = b"GET /gemini/evil.test/head HTTP/1.1\r\nHost: p\r\nConnection: close\r\nX-Pad: "
    return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"


async def test_http2_is_refused_on_the_plain_port(portal: Portal) -> None:
    one = await raw_http(portal.port, h2_client_bytes([b"/gemini/evil.test/"]), eof=True)
    # 2,000 streams opened and reset at once (CVE-2023-44487), then a PING
    rapid = await raw_http(portal.port, h2_client_bytes([b"/"] * 2000, reset=True), eof=True)
    for answer in (one, rapid):
        # an HTTP/1.1 answer and nothing more: no SETTINGS, no stream, no PING answered
        assert answer.startswith(b"HTTP/1.1 505 "), answer[:80]
        assert answer.endswith(b"\r\n\r\n")
        assert header(answer, b"connection") == [b"close"]
        assert header(answer, b"x-robots-tag") == [b"noindex, nofollow"]
    ok = await get(portal, "/gemini/evil.test/after-h2")
    assert ok.status_code == 200
    assert ok.http_version == "HTTP/1.1"


async def test_an_h2c_upgrade_is_answered_in_http_1_1(portal: Portal) -> None:
    answer = await raw_http(
        portal.port,
        b"GET /gemini/evil.test/h2c HTTP/1.1\r\nHost: p\r\n"
        b"Connection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\n"
        b"HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:80]  # not 101 Switching Protocols
    assert b"A small page" in answer


async def test_a_head_is_at_most_16_kib(portal: Portal) -> None:
    assert MAX_HEAD_BYTES == 16 * 1024  # as docs/portal.md says
    at_limit = await raw_http(portal.port, sized_head(MAX_HEAD_BYTES))
    # a whole head one byte over, sent at once (h11 alone bounds only incomplete heads)
    over = await raw_http(portal.port, sized_head(MAX_HEAD_BYTES + 1), eof=True)
    assert at_limit.startswith(b"HTTP/1.1 200 "), at_limit[:80]
    assert over.startswith(b"HTTP/1.1 431 "), over[:80]
    assert header(over, b"x-robots-tag") == [b"noindex, nofollow"]


async def test_a_body_that_never_ends_is_not_held(portal: Portal) -> None:
    form = (
        b"POST /gemini/evil.test/form HTTP/1.1\r\nHost: p\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
        b"input=x"
    )
    # the 93 other bytes never come: answered once --body-timeout (1 s) is up, then closed
    # (raw_http returns only when the portal closes the connection)
    late = await raw_http(portal.port, form)
    # a body the portal has no use for is never read: answered, then closed
    unread = await raw_http(
        portal.port,
        b"GET /gemini/evil.test/unread HTTP/1.1\r\nHost: p\r\nContent-Length: 1000000\r\n\r\nxx",
    )
    assert late.startswith(b"HTTP/1.1 408 "), late[:80]
    assert b"did not arrive within 1 seconds" in late
    assert header(late, b"x-robots-tag") == [b"noindex, nofollow"]
    assert unread.startswith(b"HTTP/1.1 200 "), unread[:80]
    assert "Traceback" not in portal.stderr()


async def test_a_websocket_upgrade_gets_a_page(portal: Portal) -> None:
    answer = await raw_http(
        portal.port,
        b"GET /gemini/evil.test/ HTTP/1.1\r\nHost: p\r\nConnection: Upgrade, close\r\n"
        b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:80]  # not an empty 500
    assert b"does not speak WebSocket" in answer
    assert header(answer, b"x-robots-tag") == [b"noindex, nofollow"]


async def open_idle(port: int, count: int) -> list[socket.socket]:
    """``count`` connections to the portal that have sent half a request head."""
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET / HTTP/1.1\r\n")
        held.append(sock)
    return held


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the portal has closed ``sock`` (it waits up to :data:`BOUND` to know)."""
    sock.settimeout(BOUND)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


async def test_descriptors_run_out_for_no_one(evil: Hostile, tmp_path: Path) -> None:
    # 160 descriptors less the reserve: 32 connections at most; a minute for a body
    files = DESCRIPTOR_RESERVE + 32
    args = (*evil_args(evil.port), "--body-timeout", "60")
    with portal_process(tmp_path / "err", *args, files=files) as portal:
        slow = socket.create_connection(("127.0.0.1", portal.port))  # a form half sent
        slow.sendall(b"POST /gemini/evil.test/ HTTP/1.1\r\nHost: p\r\nContent-Length: 9\r\n\r\nin")
        await get(portal, "/gemini/evil.test/first")  # (the POST's head is read by now)
        held = [slow, *await open_idle(portal.port, 150)]
        try:
            ok = await get(portal, "/gemini/evil.test/descriptors")
            # closed without a word (not answered 408): made room for newcomers
            first_closed = await trio.to_thread.run_sync(closed_by_server, held[0])
            next_closed = await trio.to_thread.run_sync(closed_by_server, held[1])
        finally:
            for sock in held:
                sock.close()
        stderr = portal.stderr()
    assert ok.status_code == 200
    assert first_closed and next_closed  # those waiting longest for their client
    assert "Traceback" not in stderr
    assert "EMFILE" not in stderr  # the reserve was never touched


async def test_a_newcomer_is_told_to_come_back_when_all_have_work(
    evil: Hostile, tmp_path: Path
) -> None:
    # room for two connections, both waiting on a capsule whose robots.txt trickles
    files = DESCRIPTOR_RESERVE + 2
    with portal_process(tmp_path / "err", *evil_args(evil.port), files=files) as portal:
        before = len(evil.requests)
        held = []
        for n in range(2):
            sock = socket.create_connection(("127.0.0.1", portal.port))
            sock.sendall(b"GET /gemini/trickle%d.test/ HTTP/1.1\r\nHost: p\r\n\r\n" % n)
            held.append(sock)
        with trio.fail_after(BOUND):  # both requests in hand: the capsule has seen them
            while len([r for r in evil.requests[before:] if r[0].startswith("trickle")]) < 2:
                await trio.sleep(0.05)
        try:
            answer = await raw_http(portal.port, b"GET /about HTTP/1.1\r\nHost: p\r\n\r\n")
        finally:
            for sock in held:
                sock.close()
            portal.proc.kill()  # (not the 5 s a stop gives the two requests in hand)
            portal.proc.wait()
    assert answer.startswith(b"HTTP/1.1 503 "), answer[:80]
    assert header(answer, b"retry-after") == [b"5"]
    assert header(answer, b"x-robots-tag") == [b"noindex, nofollow"]


async def test_out_of_descriptors_is_one_line(evil: Hostile, tmp_path: Path) -> None:
    # no reserve: accept itself runs out of descriptors (EMFILE) before the table fills
    args = (*evil_args(evil.port), "--descriptor-reserve", "0")
    with portal_process(tmp_path / "err", *args, files=64) as portal:
        held = await open_idle(portal.port, 90)
        try:
            ok = await get(portal, "/about")  # (a Gemini fetch would want a descriptor too)
        finally:
            for sock in held:
                sock.close()
        stderr = portal.stderr()
    assert ok.status_code == 200
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if "EMFILE" in line]
    assert len(lines) == 1, stderr[:2000]


async def test_stopping_under_load_is_clean(evil: Hostile, tmp_path: Path) -> None:
    secret = b"SECRET-CLIENT-BYTES"
    with portal_process(tmp_path / "err", *evil_args(evil.port)) as portal:
        held = await open_idle(portal.port, 20)
        for n in range(30):  # bodies half sent, heads half sent, HTTP/2 floods
            sock = socket.create_connection(("127.0.0.1", portal.port))
            if n % 3 == 0:
                sock.sendall(
                    b"POST /gemini/evil.test/ HTTP/1.1\r\nHost: p\r\n"
                    b"Content-Length: 1000\r\n\r\n" + secret
                )
            elif n % 3 == 1:
                sock.sendall(b"GET /" + secret + b" HTTP/1.1\r\nX-" + secret)
            else:
                sock.sendall(h2_client_bytes([b"/" + secret] * 500, reset=True))
            held.append(sock)
        portal.proc.send_signal(signal.SIGTERM)
        code = await trio.to_thread.run_sync(portal.proc.wait, BOUND)
        for sock in held:
            sock.close()
        stderr = portal.stderr()
    assert code == 0
    assert "SIGTERM, stopping" in stderr
    assert "Traceback" not in stderr
    assert secret.decode() not in stderr
