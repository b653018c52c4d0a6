"""The real portal process over HTTP, against a hostile capsule and hostile web clients:
what it costs to render a page is bounded, a client that does not read is dropped, only
origin-form request targets are answered, every failure is a page.

Tests that give the portal the same options share one portal process and one hostile
capsule (on a thread of its own) for the module; each looks only at the requests the
capsule saw since it began."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
import trio
from loopback import served_on_a_thread, wait_connections_closed
from public_fixtures import (
    BOUND,
    LINKS,
    Hostile,
    Portal,
    evil_args,
    header,
    hostile_capsule,
    portal_process,
    raw_http,
)

from geminibot.portal.limits import MAX_PAGE_CHARS, MAX_PAGE_LINKS


@pytest.fixture(scope="module")
def any_capsule(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hostile, Portal]]:
    """The hostile capsule, and a portal that shows any capsule (``*.test`` sent to it)."""
    err = tmp_path_factory.mktemp("portal") / "err"
    with (
        served_on_a_thread(hostile_capsule) as evil,
        portal_process(err, *evil_args(evil.port)) as portal,
    ):
        yield evil, portal


@pytest.fixture(scope="module")
def one_capsule(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hostile, Portal]]:
    """The hostile capsule, and a portal that shows it alone (``--capsule``) and gives up
    on a client that reads nothing for a second (``--send-timeout 1``: the other tests'
    answers are small enough never to wait on the client)."""
    err = tmp_path_factory.mktemp("portal") / "err"
    with served_on_a_thread(hostile_capsule) as evil:
        args = evil_args(evil.port, "--capsule", "gemini://evil.test/", "--send-timeout", "1")
        with portal_process(err, *args) as portal:
            yield evil, portal


async def get(portal: Portal, path: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=portal.base, timeout=BOUND) as web:
        return await web.get(path)


async def test_a_page_of_200000_links_is_cut_at_the_link_budget(
    any_capsule: tuple[Hostile, Portal],
) -> None:
    evil, portal = any_capsule
    before = len(evil.requests)
    r = await get(portal, "/gemini/evil.test/links")
    again = await get(portal, "/gemini/evil.test/links")
    assert r.status_code == 200
    assert r.text.count('<p class="link">') == MAX_PAGE_LINKS < LINKS
    assert f"at most {MAX_PAGE_LINKS:,} links of a page" in r.text
    assert r.headers["x-robots-tag"] == "noindex, nofollow"
    assert again.content == r.content  # rendered once, then from the page cache
    assert evil.requests[before:].count(("evil.test", "/links")) == 1


async def test_an_escaped_page_is_cut_at_the_character_budget(
    any_capsule: tuple[Hostile, Portal],
) -> None:
    _, portal = any_capsule
    r = await get(portal, "/gemini/evil.test/quotes")
    assert r.status_code == 200
    assert MAX_PAGE_CHARS < len(r.content) < MAX_PAGE_CHARS + 10_000  # not 48 MB
    assert r.text.count("&quot;") > MAX_PAGE_CHARS // 6 - 2
    assert f"at most {MAX_PAGE_CHARS:,} characters of HTML" in r.text


async def test_a_client_that_does_not_read_is_dropped(
    one_capsule: tuple[Hostile, Portal],
) -> None:
    _, portal = one_capsule
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect(("127.0.0.1", portal.port))
    await sock.send(b"GET /quotes HTTP/1.1\r\nHost: p\r\n\r\n")
    # never read: the portal's answer (2 MB) stays unread until it gives up
    # looked at four times a second: the portal gives up after a second or more
    await trio.to_thread.run_sync(wait_connections_closed, portal.port, BOUND, 0.25)
    sock.close()
    assert portal.proc.poll() is None
    ok = await get(portal, "/after-a-dropped-client")  # a page no other test asks for
    assert ok.status_code == 200
    assert "Traceback" not in portal.stderr()


async def test_only_origin_form_targets_reach_the_capsule(
    one_capsule: tuple[Hostile, Portal],
) -> None:
    evil, portal = one_capsule
    before = len(evil.requests)
    answers = [
        await raw_http(
            portal.port, b"GET %s HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n" % target
        )
        for target in (b".other.test/x", b":19700/x", b"http://other.test/x", b"*")
    ]
    ok = await get(portal, "/origin-form")  # a page no other test asks for: not cached
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert header(answer, b"x-robots-tag") == [b"noindex, nofollow"]
    assert ok.status_code == 200
    assert {host for host, _ in evil.requests[before:]} == {"evil.test"}


async def test_an_unreachable_robots_txt_is_a_refusal_kept_ten_minutes(
    any_capsule: tuple[Hostile, Portal],
) -> None:
    evil, portal = any_capsule
    before = len(evil.requests)
    first = await get(portal, "/gemini/mute.test/")
    again = await get(portal, "/gemini/mute.test/other")
    long = await get(portal, "/gemini/evil.test/" + "a" * 1100)
    for r in (first, again):
        assert r.status_code == 403
        assert r.headers["x-robots-tag"] == "noindex, nofollow"
        assert "Not shown here" in r.text
    assert evil.requests[before:].count(("mute.test", "/robots.txt")) == 1  # then from the cache
    assert long.status_code == 400
    assert "Input too long" in long.text
    assert long.headers["x-robots-tag"] == "noindex, nofollow"
    assert "Traceback" not in portal.stderr()


async def test_leaks_and_edges_of_a_one_capsule_portal(
    one_capsule: tuple[Hostile, Portal],
) -> None:
    _, portal = one_capsule
    async with httpx.AsyncClient(base_url=portal.base, timeout=BOUND) as web:
        post = await raw_http(
            portal.port,
            b"POST //attacker.test/x HTTP/1.1\r\nHost: p\r\nConnection: close\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: 8\r\n\r\ninput=hi",
        )
        page = await web.get("/dotslash")
    smuggled = await raw_http(
        portal.port,
        b"GET /small HTTP/1.1\r\nHost: p\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    )
    garbage = await raw_http(portal.port, b"NOT HTTP AT ALL\r\n\r\n")
    # a header over the 16 KiB of a head, not even ended: all of it read, then 431
    # (more unread bytes would make the portal's close a reset that loses the answer)
    huge = await raw_http(portal.port, b"GET / HTTP/1.1\r\nHost: p\r\nX: " + b"a" * 20_000)
    # no open redirect, no link off the portal without the external marker
    assert header(post, b"location") == [b"/.//attacker.test/x?hi"]
    assert 'href="/.//web.attacker.test/p"' in page.text
    assert 'href="//' not in page.text
    # Content-Length with Transfer-Encoding: answered, then the connection closed
    # (raw_http returns only when the portal closes it)
    assert smuggled.startswith(b"HTTP/1.1 200 ")
    assert header(smuggled, b"connection") == [b"close"]
    # the server's own answers carry the portal's headers too
    assert garbage.startswith(b"HTTP/1.1 400 ")
    assert huge.startswith(b"HTTP/1.1 431 ")
    for answer in (garbage, huge):
        assert header(answer, b"x-robots-tag") == [b"noindex, nofollow"]
    assert "Traceback" not in portal.stderr()
