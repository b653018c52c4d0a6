"""The real portal process over HTTP, against a hostile capsule and hostile web clients:
what it costs to render a page is bounded, a client that does not read is dropped, only
origin-form request targets are answered, every failure is a page."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import trio
from loopback import wait_connections_closed
from public_fixtures import BOUND, LINKS, Portal, hostile_capsule, portal_process

from geminibot.portal.limits import MAX_PAGE_CHARS, MAX_PAGE_LINKS


def evil_args(port: int, *more: str) -> tuple[str, ...]:
    return ("--test-range", "--connect-to", f"*.test:1965:127.0.0.1:{port}", *more)


async def get(portal: Portal, path: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=portal.base, timeout=BOUND) as web:
        return await web.get(path)


async def test_a_page_of_200000_links_is_cut_at_the_link_budget(tmp_path: Path) -> None:
    async with hostile_capsule() as evil:
        with portal_process(tmp_path / "err", *evil_args(evil.port)) as portal:
            r = await get(portal, "/gemini/evil.test/links")
            again = await get(portal, "/gemini/evil.test/links")
    assert r.status_code == 200
    assert r.text.count('<p class="link">') == MAX_PAGE_LINKS < LINKS
    assert f"at most {MAX_PAGE_LINKS:,} links of a page" in r.text
    assert r.headers["x-robots-tag"] == "noindex, nofollow"
    assert again.content == r.content  # rendered once, then from the page cache
    assert evil.requests.count(("evil.test", "/links")) == 1


async def test_an_escaped_page_is_cut_at_the_character_budget(tmp_path: Path) -> None:
    async with hostile_capsule() as evil:
        with portal_process(tmp_path / "err", *evil_args(evil.port)) as portal:
            r = await get(portal, "/gemini/evil.test/quotes")
    assert r.status_code == 200
    assert MAX_PAGE_CHARS < len(r.content) < MAX_PAGE_CHARS + 10_000  # not 48 MB
    assert r.text.count("&quot;") > MAX_PAGE_CHARS // 6 - 2
    assert f"at most {MAX_PAGE_CHARS:,} characters of HTML" in r.text


async def test_a_client_that_does_not_read_is_dropped(tmp_path: Path) -> None:
    async with hostile_capsule() as evil:
        args = evil_args(evil.port, "--send-timeout", "1")
        with portal_process(tmp_path / "err", *args) as portal:
            sock = trio.socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            await sock.connect(("127.0.0.1", portal.port))
            await sock.send(b"GET /gemini/evil.test/quotes HTTP/1.1\r\nHost: p\r\n\r\n")
            # never read: the portal's answer (2 MB) stays unread until it gives up
            await trio.to_thread.run_sync(wait_connections_closed, portal.port, BOUND)
            sock.close()
            assert portal.proc.poll() is None
            ok = await get(portal, "/gemini/evil.test/small")
    assert ok.status_code == 200
    assert "Traceback" not in portal.stderr()
