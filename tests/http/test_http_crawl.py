"""The crawler on a real loopback website: policy files, announce, every ask answer."""

from __future__ import annotations

import gzip
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from clocks import JumpClock
from crawlers import sqlite_crawler
from webserver import Page, WebServer, html, redirect, serve, system_tls, text

from geminibot.crawl.crawler import Crawler
from geminibot.crawl.fetcher import ProtocolFetcher
from geminibot.crawl.settings import CrawlOptions
from geminibot.crawl.warc import WarcArchive
from geminibot.http.client import WebClient
from geminibot.index import search
from geminibot.net.limits import Limits
from geminibot.policy.robots2_ask import ASK_PATH
from geminibot.store.db import connect

#: Time limits no answer reaches however loaded the machine (none of these tests is about
#: a time limit; those set their own), yet a hang still ends the test.
BOUNDED = Limits(connect_timeout=30, header_timeout=30, idle_timeout=30, total_timeout=60)
IDENTITY = "geminibot/0.1.0 (search-indexer)"
ROBOTS = text("User-agent: *\nDisallow: /private/\n")
HOME = html(
    "<html lang=en><head><title>Web home</title></head><body><h1>Welcome</h1>"
    "<p>Mirrored garden notes.</p><a href='/blog/a.html'>A post</a>"
    "<a href='/about.html'>About</a><a href='/private/x.html'>secret</a></body></html>"
)
PAGES = {
    "/": HOME,
    "/blog/a.html": html("<title>Post A</title><p>hedgehogs in winter</p>"),
    "/about.html": html("<title>About</title><p>who writes here</p>"),
    "/private/x.html": html("<p>honeypot</p>"),
}
Answer = tuple[int, tuple[tuple[str, str], ...]]


def ask_endpoint(*answers: Answer) -> Callable[[BaseHTTPRequestHandler], None]:
    """Answers HEAD asks in turn (the last one repeats)."""
    queue = list(answers)

    def answer(handler: BaseHTTPRequestHandler) -> None:
        status, headers = queue.pop(0) if len(queue) > 1 else queue[0]
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


def decision(value: str, *scopes: str) -> Answer:
    return 200, (("X-Robots2-Decision", value), *(("X-Robots2-Scope", s) for s in scopes))


async def crawl_site(
    tmp_path: Path,
    routes: dict[str, object],
    seeds: tuple[str, ...] = ("/",),
    archive: WarcArchive | None = None,
    clock: JumpClock | None = None,
    **options: object,
) -> tuple[WebServer, sqlite3.Connection, Crawler]:
    with serve(routes) as web:  # type: ignore[arg-type]
        route = {"web.test": ("127.0.0.1", web.port)}
        async with WebClient(verify=system_tls(), limits=BOUNDED, connect_to=route) as client:
            conn = connect(tmp_path / "crawl.db")
            opts = CrawlOptions(test_range=True, **options)  # type: ignore[arg-type]
            fetch = ProtocolFetcher(web=client)
            crawler = sqlite_crawler(conn, fetch, opts, archive=archive, clock=clock)
            crawler.seed([f"http://web.test{path}" for path in seeds])
            await crawler.run()
    return web, conn, crawler


def fetched(web: WebServer) -> set[str]:
    return set(web.paths("GET"))


def states(conn: sqlite3.Connection) -> dict[str, str]:
    rows = conn.execute("SELECT url, state FROM urls").fetchall()
    return {url.removeprefix("http://web.test"): state for url, state in rows}


async def test_web_crawl_obeys_robots_and_indexes_html(tmp_path: Path) -> None:
    web, conn, _ = await crawl_site(tmp_path, {**PAGES, "/robots.txt": ROBOTS})
    assert web.paths("GET")[:3] == ["/robots.txt", "/robots2.txt", "/agents.txt"]
    assert fetched(web) == {"/robots.txt", "/robots2.txt", "/agents.txt", "/", "/blog/a.html"} | {
        "/about.html"
    }
    assert states(conn)["/private/x.html"] == "refused"
    assert [r.url for r in search(conn, "hedgehogs")] == ["http://web.test/blog/a.html"]
    title, lang = conn.execute(
        "SELECT title, lang FROM pages WHERE url = 'http://web.test/'"
    ).fetchone()
    assert (title, lang) == ("Web home", "en")
    assert all("X-Agent-Identity" not in r.headers for r in web.log)  # no announce: yes
    outcomes = dict(conn.execute("SELECT name, outcome FROM robots").fetchall())
    assert outcomes == {"robots.txt": "success", "robots2.txt": "unavailable"} | {
        "agents.txt": "unavailable"
    }


@pytest.mark.parametrize(
    ("status", "outcome", "pages"),
    [
        (404, "unavailable", {"/", "/blog/a.html", "/about.html", "/private/x.html"}),
        (500, "unreachable", set()),
    ],
)
async def test_robots_txt_status_is_mapped_by_rfc_9309(
    tmp_path: Path, status: int, outcome: str, pages: set[str]
) -> None:
    web, conn, crawler = await crawl_site(tmp_path, {**PAGES, "/robots.txt": Page(status, b"")})
    row = conn.execute("SELECT outcome FROM robots WHERE name = 'robots.txt'").fetchone()
    assert row == (outcome,)
    assert fetched(web) - {"/robots.txt", "/robots2.txt", "/agents.txt"} == pages
    if outcome == "unreachable":
        assert "robots.txt unreachable" in crawler.progress.hosts_skipped["http://web.test"]


async def test_robots_txt_429_is_waited_out_never_taken_as_its_answer(tmp_path: Path) -> None:
    """The web's 44: each Retry-After and the back-off after it are waited out on the
    crawl's clock and robots.txt asked again; once the next wait passes the longest one
    the crawler sits out, the host is skipped for now, its URLs kept queued and nothing
    cached as robots.txt's answer."""
    clock = JumpClock()  # the waits jump: no real waiting
    robots = Page(429, b"", (("Retry-After", "5"),))
    web, conn, crawler = await crawl_site(tmp_path, {**PAGES, "/robots.txt": robots}, clock=clock)
    assert conn.execute("SELECT outcome FROM robots").fetchall() == []
    assert fetched(web) == {"/robots.txt"}
    asked = web.paths("GET").count("/robots.txt")
    assert asked > 4 and clock.time >= 1.7e9 + (asked - 1) * 5
    assert "more than 1 h" in crawler.progress.hosts_skipped["http://web.test"]
    assert conn.execute("SELECT state FROM urls").fetchall() == [("queued",)]


async def test_robots_txt_redirect_is_followed(tmp_path: Path) -> None:
    routes = {**PAGES, "/robots.txt": redirect("/real-robots.txt", 301)}
    routes["/real-robots.txt"] = text("User-agent: *\nDisallow: /about\n")
    web, _conn, _ = await crawl_site(tmp_path, routes)
    assert "/real-robots.txt" in fetched(web)
    assert "/about.html" not in fetched(web) and "/private/x.html" in fetched(web)


async def test_announce_sends_x_agent_identity(tmp_path: Path) -> None:
    robots2 = text("announce: yes\ncrawl: yes\n")
    web, _, _ = await crawl_site(
        tmp_path, {**PAGES, "/robots.txt": ROBOTS, "/robots2.txt": robots2}
    )
    after_robots2 = [r for r in web.log if r.path not in ("/robots.txt", "/robots2.txt")]
    assert after_robots2 and all(
        r.headers.get("X-Agent-Identity") == IDENTITY for r in after_robots2
    )
    assert all(r.headers["User-Agent"].startswith("geminibot/") for r in web.log)


ASK_ROBOTS2 = text("crawl: ask\nannounce: yes\n")
#: The ask tests seed every page, so that each answer meets several URLs.
SEEDS = ("/", "/blog/a.html", "/about.html")


async def crawl_with_ask(
    tmp_path: Path, endpoint: Callable[[BaseHTTPRequestHandler], None] | None
) -> tuple[WebServer, sqlite3.Connection]:
    routes: dict[str, object] = {**PAGES, "/robots.txt": ROBOTS, "/robots2.txt": ASK_ROBOTS2}
    if endpoint is not None:
        routes[ASK_PATH] = endpoint
    web, conn, _ = await crawl_site(tmp_path, routes, SEEDS)
    return web, conn


def asks(web: WebServer) -> list[str]:
    return web.paths("HEAD")


def ask_fetches(conn: sqlite3.Connection) -> list[int | None]:
    rows = conn.execute("SELECT status FROM fetches WHERE url LIKE '%robots2-ask%' ORDER BY id")
    return [r[0] for r in rows.fetchall()]


POLICY = {"/robots.txt", "/robots2.txt", "/agents.txt"}


async def test_ask_allow_is_cached_and_sent_with_identity(tmp_path: Path) -> None:
    web, conn = await crawl_with_ask(tmp_path, ask_endpoint(decision("allow")))
    assert fetched(web) - POLICY == {"/", "/blog/a.html", "/about.html"}
    assert asks(web) == [f"{ASK_PATH}?directive=crawl&agent=geminibot/0.1.0"]
    head = next(r for r in web.log if r.method == "HEAD")
    assert [v for k, v in head.header_lines if k == "X-Agent-Identity"] == [IDENTITY]
    assert ask_fetches(conn) == [200]
    assert states(conn)["/private/x.html"] == "refused"  # robots.txt decides before any ask


async def test_ask_allow_with_scope_limits_the_crawl(tmp_path: Path) -> None:
    web, conn = await crawl_with_ask(tmp_path, ask_endpoint(decision("allow", "/blog/*")))
    assert fetched(web) - POLICY == {"/blog/a.html"}
    assert len(asks(web)) == 1  # the allow is remembered, with its scope
    s = states(conn)
    assert s["/"] == "refused" and s["/about.html"] == "refused"
    reason = conn.execute(
        "SELECT reason FROM decisions WHERE url = 'http://web.test/about.html'"
    ).fetchone()[0]
    assert "outside the scopes" in reason


async def test_ask_deny_refuses_and_is_remembered(tmp_path: Path) -> None:
    web, conn = await crawl_with_ask(tmp_path, ask_endpoint(decision("deny")))
    assert fetched(web) == POLICY
    assert len(asks(web)) == 1
    assert set(states(conn).values()) == {"refused"}


async def test_ask_allow_once_is_asked_for_every_page(tmp_path: Path) -> None:
    robots = text("User-agent: *\nDisallow: /private/\n")
    routes: dict[str, object] = {**PAGES, "/robots.txt": robots, "/robots2.txt": ASK_ROBOTS2}
    routes[ASK_PATH] = ask_endpoint(decision("allow-once"))
    web, _conn, _ = await crawl_site(tmp_path, routes)
    pages = fetched(web) - POLICY
    assert pages == {"/", "/blog/a.html", "/about.html"}
    assert len(asks(web)) == len(pages)  # never cached: one ask per page


async def test_ask_allow_once_with_scope(tmp_path: Path) -> None:
    web, conn = await crawl_with_ask(tmp_path, ask_endpoint(decision("allow-once", "/", "/blog/*")))
    assert fetched(web) - POLICY == {"/", "/blog/a.html"}
    s = states(conn)
    assert s["/about.html"] == "refused"
    assert len(asks(web)) == 3  # /, /blog/a.html and /about.html each asked once


async def test_ask_404_means_no(tmp_path: Path) -> None:
    web, conn = await crawl_with_ask(tmp_path, None)
    assert fetched(web) == POLICY
    assert len(asks(web)) == 1  # remembered: no endpoint
    assert ask_fetches(conn) == [404]
    reason = conn.execute("SELECT reason FROM decisions WHERE url = 'http://web.test/'").fetchone()[
        0
    ]
    assert "404" in reason


async def test_ask_429_waits_and_asks_again(tmp_path: Path) -> None:
    endpoint = ask_endpoint((429, (("Retry-After", "1"),)), decision("allow"))
    web, conn = await crawl_with_ask(tmp_path, endpoint)
    assert fetched(web) - POLICY == {"/", "/blog/a.html", "/about.html"}
    assert ask_fetches(conn) == [429, 200]
    started = [r[0] for r in conn.execute("SELECT started_at FROM fetches ORDER BY id")]
    ask_rows = conn.execute(
        "SELECT started_at FROM fetches WHERE url LIKE '%robots2-ask%' ORDER BY id"
    ).fetchall()
    assert ask_rows[1][0] - ask_rows[0][0] >= 1.0  # Retry-After obeyed
    assert len(started) == 3 + 2 + 3


@pytest.mark.parametrize(
    "garbage",
    [
        decision("maybe"),
        (200, ()),
        (200, (("X-Robots2-Decision", "allow"), ("X-Robots2-Decision", "deny"))),
        (200, (("X-Robots2-Decision", "allow"), ("X-Robots2-Scope", "blog/*"))),
        (500, ()),
    ],
)
async def test_ask_garbage_means_no_and_is_not_cached(tmp_path: Path, garbage: Answer) -> None:
    web, conn = await crawl_with_ask(tmp_path, ask_endpoint(garbage))
    assert fetched(web) == POLICY
    assert set(states(conn).values()) == {"refused"}
    assert len(asks(web)) == 3  # never remembered: asked again for each page
    reason = conn.execute("SELECT reason FROM decisions WHERE url = 'http://web.test/'").fetchone()[
        0
    ]
    assert "do not proceed" in reason


async def test_meta_nofollow_keeps_text_but_follows_no_link(tmp_path: Path) -> None:
    routes: dict[str, object] = {
        "/robots.txt": ROBOTS,
        "/": html("<meta name=robots content='nofollow'><p>home words</p><a href='/n.html'>n</a>"),
        "/n.html": html("<p>never reached</p>"),
    }
    web, conn, _ = await crawl_site(tmp_path, routes)
    assert "/n.html" not in fetched(web)
    assert [r.url for r in search(conn, "home")] == ["http://web.test/"]


async def test_x_robots_tag_noindex_keeps_metadata_only(tmp_path: Path) -> None:
    page = Page(body=b"<p>secret words</p><a href='/n.html'>n</a>")
    routes: dict[str, object] = {
        "/robots.txt": ROBOTS,
        "/": Page(body=page.body, headers=(("X-Robots-Tag", "noindex"),)),
        "/n.html": html("<p>never reached</p>"),
    }
    web, conn, _ = await crawl_site(tmp_path, routes)
    assert search(conn, "secret") == []
    assert "/n.html" not in fetched(web)
    assert conn.execute("SELECT mime FROM pages WHERE url = 'http://web.test/'").fetchone() == (
        "text/html",
    )


async def test_archiver_writes_http_records(tmp_path: Path) -> None:
    from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

    gzipped = Page(
        body=gzip.compress(b"<p>zipped words</p>"), headers=(("Content-Encoding", "gzip"),)
    )
    archive = WarcArchive(tmp_path / "warc", "run", 0.0)
    await crawl_site(
        tmp_path, {"/robots.txt": ROBOTS, "/": gzipped}, archive=archive, role="archiver"
    )
    archive.close()
    with archive.path.open("rb") as fh:
        records = [
            (r.rec_headers.get_header("WARC-Target-URI"), r.http_headers, r.content_stream().read())
            for r in ArchiveIterator(fh)
        ]
    assert [url for url, _, _ in records] == ["http://web.test/"]
    _, headers, body = records[0]
    assert headers.get_statuscode() == "200" and body == b"<p>zipped words</p>"
    assert headers.get_header("Content-Encoding") is None


async def test_503_with_retry_after_slows_the_host_down(tmp_path: Path) -> None:
    answers = [Page(503, b"busy", (("Retry-After", "1"),)), html("<p>calm again</p>")]

    def busy_then_calm(handler: BaseHTTPRequestHandler) -> None:
        page = answers.pop(0) if len(answers) > 1 else answers[0]
        handler.send_response(page.status)
        length = ("Content-Length", str(len(page.body)))
        for name, value in (*page.headers, ("Content-Type", page.content_type), length):
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(page.body)

    _web, conn, crawler = await crawl_site(tmp_path, {"/robots.txt": ROBOTS, "/": busy_then_calm})
    rows = conn.execute(
        "SELECT status, started_at, duration FROM fetches WHERE url = 'http://web.test/' ORDER BY id"
    ).fetchall()
    assert [r[0] for r in rows] == [503, 200]
    assert rows[1][1] - (rows[0][1] + rows[0][2]) >= 1.0  # Retry-After obeyed
    assert crawler.progress.slow_downs == 1
    assert [r.url for r in search(conn, "calm")] == ["http://web.test/"]


async def test_bodies_over_the_crawl_limit_are_cut_policy_read_page_failed(
    tmp_path: Path,
) -> None:
    """The crawler's clients cut a body at their limit; a policy file
    so cut is read (its first 500 KiB), never unreachable; a page so cut counts as failed."""
    limit = 600 * 1024
    big = "#" * (2 * limit)
    routes = {**PAGES, "/robots.txt": text("User-agent: *\nDisallow: /about\n" + big)}
    routes["/blog/a.html"] = html("<title>Huge</title><p>" + big + "</p>")
    with serve(routes) as web:  # type: ignore[arg-type]
        route = {"web.test": ("127.0.0.1", web.port)}
        limits = replace(BOUNDED, max_body_size=limit, cut_body=True)
        async with WebClient(verify=system_tls(), limits=limits, connect_to=route) as client:
            conn = connect(tmp_path / "crawl.db")
            crawler = sqlite_crawler(
                conn, ProtocolFetcher(web=client), CrawlOptions(test_range=True)
            )
            crawler.seed(["http://web.test/"])
            await crawler.run()
    got = states(conn)
    assert got["/about.html"] == "refused" and got["/private/x.html"] == "done"
    assert got["/blog/a.html"] == "failed"
    (reason,) = conn.execute(
        "SELECT reason FROM urls WHERE url = 'http://web.test/blog/a.html'"
    ).fetchone()
    assert "BodyTooLarge" in reason
