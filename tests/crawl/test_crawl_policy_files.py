"""The crawler's policy files: redirects across hosts, an endless robots.txt from a real
capsule server, and a database of the old format."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing
from capsule_crawl import serving
from crawl_fakes import Answer, FakeSite, gmi
from crawlers import sqlite_crawler
from db_rows import rows

from geminibot.crawl.adapters import FetchResult
from geminibot.crawl.fetcher import CRAWL_LIMITS, gemini_fetch
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.server import ServerLimits
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.net.limits import DEFAULT_MAX_BODY_SIZE
from geminibot.policy.discovery import POLICY_FETCH_BYTES
from geminibot.store.db import connect

ROBOTS = b"User-agent: *\nDisallow: /private/\n"
T0 = 1.7e9
FAST = ServerLimits(rate_burst=10_000, rate_per_second=10_000.0)


def mock_wall_clock() -> float:
    return T0 + trio.current_time()


def pages() -> dict[str, Answer]:
    return {
        "gemini://a.test/": gmi("# A\n=> /private/x.gmi secret\n=> /ok.gmi fine\n"),
        "gemini://a.test/ok.gmi": gmi("# ok\n"),
        "gemini://a.test/private/x.gmi": gmi("# secret\n"),
    }


@pytest.mark.parametrize(("redirects", "private_fetched"), [(5, False), (6, True)])
async def test_robots_txt_redirects_to_other_hosts_are_followed(
    tmp_path: Path, autojump_clock: object, redirects: int, private_fetched: bool
) -> None:
    """RFC 9309 2.3.1.2: "follow at least five consecutive redirects,
    even across authorities"; a sixth makes robots.txt unavailable (allow all)."""
    site = pages()
    hops = ["gemini://a.test/robots.txt"] + [
        f"gemini://r{i}.test/robots.txt" for i in range(1, redirects + 1)
    ]
    for here, there in itertools.pairwise(hops):
        site[here] = FetchResult(31, there)
    site[hops[-1]] = FetchResult(20, "text/plain", ROBOTS)
    fake = FakeSite(site)
    crawler = sqlite_crawler(
        connect(tmp_path / "c.db"),
        fake.fetch,
        CrawlOptions(test_range=True),
        wall_clock=mock_wall_clock,
    )
    crawler.seed(["gemini://a.test/"])
    await crawler.run()
    fetched = fake.urls()
    assert fetched[: min(len(hops), 6)] == hops[:6]  # followed in order, at most 5 redirects
    assert ("gemini://a.test/private/x.gmi" in fetched) is private_fetched
    assert "gemini://a.test/ok.gmi" in fetched


#: The crawl database as geminibot 0.1 created it (schema version 1), frozen here so that
#: a later change of the schema code cannot change what this test reads.
OLD_SCHEMA = """
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE hosts (host TEXT PRIMARY KEY, first_seen REAL NOT NULL, last_fetch_at REAL,
    last_duration REAL, slow_downs INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0, urls_total INTEGER NOT NULL DEFAULT 0,
    skipped_reason TEXT);
CREATE TABLE urls (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, host TEXT NOT NULL,
    path TEXT NOT NULL, has_query INTEGER NOT NULL, depth INTEGER NOT NULL, parent TEXT,
    state TEXT NOT NULL, reason TEXT, lease TEXT, updated_at REAL NOT NULL);
CREATE INDEX urls_host_state ON urls (host, state, id);
CREATE INDEX urls_state ON urls (state);
CREATE INDEX urls_host_path ON urls (host, path, has_query);
CREATE TABLE robots (host TEXT NOT NULL, name TEXT NOT NULL, fetched_at REAL NOT NULL,
    expires_at REAL NOT NULL, outcome TEXT NOT NULL, reason TEXT NOT NULL, status INTEGER,
    body BLOB, PRIMARY KEY (host, name));
CREATE TABLE decisions (id INTEGER PRIMARY KEY, url TEXT NOT NULL, host TEXT NOT NULL,
    allowed INTEGER NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX decisions_url ON decisions (url);
CREATE TABLE fetches (id INTEGER PRIMARY KEY, url TEXT NOT NULL, host TEXT NOT NULL,
    status INTEGER, meta TEXT NOT NULL DEFAULT '', error TEXT, started_at REAL NOT NULL,
    duration REAL NOT NULL);
CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, host TEXT NOT NULL,
    status INTEGER NOT NULL, meta TEXT NOT NULL, mime TEXT, lang TEXT, size INTEGER NOT NULL,
    content_hash TEXT, fetched_at REAL NOT NULL, title TEXT NOT NULL DEFAULT '',
    duplicate_of TEXT, redirect_to TEXT, text_indexed INTEGER NOT NULL DEFAULT 0);
CREATE INDEX pages_hash ON pages (content_hash);
CREATE INDEX pages_host ON pages (host);
CREATE TABLE links (page_id INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
    position INTEGER NOT NULL, target TEXT NOT NULL, label TEXT NOT NULL,
    PRIMARY KEY (page_id, position));
CREATE VIRTUAL TABLE pages_fts USING fts5 (title, headings, body, url,
    tokenize = 'unicode61 remove_diacritics 2');
PRAGMA user_version = 1;
"""


def old_crawl(db: Path) -> None:
    """A crawl the old crawler left: its home page done, one URL leased by the run that
    was killed, one queued, robots.txt cached for a day, the host skipped last time."""
    conn = sqlite3.connect(db)
    conn.executescript(OLD_SCHEMA)
    conn.executescript(
        f"""
        INSERT INTO settings VALUES ('role', 'indexer'), ('agent', 'geminibot');
        INSERT INTO hosts VALUES ('a.test', {T0 - 500}, {T0 - 100}, 0.2, 0, 0, 3,
            'next request allowed only in 9999 s');
        INSERT INTO urls (url, host, path, has_query, depth, parent, state, lease, updated_at)
        VALUES ('gemini://a.test/', 'a.test', '/', 0, 0, NULL, 'done', NULL, {T0 - 100}),
            ('gemini://a.test/b.gmi', 'a.test', '/b.gmi', 0, 1, 'gemini://a.test/', 'leased',
             'killed', {T0 - 90}),
            ('gemini://a.test/c.gmi', 'a.test', '/c.gmi', 0, 1, 'gemini://a.test/', 'queued',
             NULL, {T0 - 100});
        INSERT INTO pages (url, host, status, meta, size, fetched_at, title)
        VALUES ('gemini://a.test/', 'a.test', 20, 'text/gemini', 40, {T0 - 100}, 'A');
        """
    )
    for name, outcome, status, body in (
        ("robots.txt", "success", 20, ROBOTS),
        ("robots2.txt", "unavailable", 51, None),
        ("agents.txt", "unavailable", 51, None),
    ):
        conn.execute(
            "INSERT INTO robots VALUES ('a.test', ?, ?, ?, ?, 'cached', ?, ?)",
            (name, T0 - 200, T0 + 86000, outcome, status, body),
        )
    conn.commit()
    conn.close()


async def test_a_database_of_the_old_format_resumes(tmp_path: Path, autojump_clock: object) -> None:
    db = tmp_path / "old.db"
    old_crawl(db)
    fake = FakeSite(
        {
            "gemini://a.test/b.gmi": gmi("# B\n"),
            "gemini://a.test/c.gmi": gmi("# C\n=> /private/p.gmi\n=> /d.gmi\n"),
            "gemini://a.test/d.gmi": gmi("# D\n"),
        }
    )
    conn = connect(db)
    crawler = sqlite_crawler(
        conn, fake.fetch, CrawlOptions(test_range=True), wall_clock=mock_wall_clock
    )
    crawler.seed(["gemini://a.test/"])  # as the command line does: a known seed stays done
    progress = await crawler.run()
    # the cached policy files are used (not fetched again); the leased URL is fetched again
    assert fake.urls() == [
        "gemini://a.test/b.gmi",
        "gemini://a.test/c.gmi",
        "gemini://a.test/d.gmi",
    ]
    states = dict(conn.execute("SELECT url, state FROM urls").fetchall())
    assert states == {
        "gemini://a.test/": "done",
        "gemini://a.test/b.gmi": "done",
        "gemini://a.test/c.gmi": "done",
        "gemini://a.test/d.gmi": "done",
        "gemini://a.test/private/p.gmi": "refused",
    }
    assert progress.pages == 3 and progress.hosts_skipped == {}
    (total,) = conn.execute("SELECT urls_total FROM hosts WHERE host = 'a.test'").fetchone()
    assert total == 5


#: A robots.txt far longer than the crawl's largest body (DEFAULT_MAX_BODY_SIZE, 16 MiB):
#: without a bound of its own, the crawler would read it all the way to that limit.
ENDLESS = 64 * 1024 * 1024


async def test_an_endless_robots_txt_is_read_only_as_far_as_is_kept(
    tmp_path: Path, loopback_clock: trio.testing.MockClock
) -> None:
    """A real capsule server sends a 64 MiB robots.txt: the crawler stops reading it one
    byte past what it keeps (POLICY_FETCH_BYTES), so the server sent far less than
    the 16 MiB a page may have; the first 500 KiB are obeyed, and the capsule crawled."""
    source = tmp_path / "source" / "endless.test"
    source.mkdir(parents=True)
    (source / "index.gmi").write_text("# Endless\n=> /ok.gmi fine\n")
    (source / "ok.gmi").write_text("# ok\n")
    (source / "serve.toml").write_text(
        f'[[generated]]\npath = "/robots.txt"\nkind = "large-robots"\nsize = {ENDLESS}\n'
    )
    read: dict[str, int] = {}
    async with serving(
        ["endless.test"], tmp_path / "capsules", tmp_path / "certs", FAST, tmp_path / "source"
    ) as served:
        resolver = Resolver([ConnectRule("*", 1965, "127.0.0.1", served.port)], loopback_only=True)
        fetch = gemini_fetch(GeminiClient(connect_to=resolver, limits=CRAWL_LIMITS))

        async def counted(url: str, *, max_body: int | None = None) -> FetchResult:
            answer = await fetch(url, max_body=max_body)
            read[url] = len(answer.body)
            return answer

        crawler = sqlite_crawler(connect(tmp_path / "c.db"), counted, CrawlOptions(test_range=True))
        crawler.seed(["gemini://endless.test/"])
        await crawler.run()
    assert read["gemini://endless.test/robots.txt"] == POLICY_FETCH_BYTES
    [sent] = [r for r in served.records if r.path == "/robots.txt"]
    assert sent.bytes < DEFAULT_MAX_BODY_SIZE  # the rest never left the server's buffers
    assert "gemini://endless.test/ok.gmi" in read
    [(kept,)] = rows(tmp_path / "c.db", "SELECT length(body) FROM robots WHERE name = 'robots.txt'")
    assert kept == POLICY_FETCH_BYTES  # what is kept, and the byte that says there is more


@pytest.mark.parametrize(
    ("role", "robots", "read"),
    [
        ("researcher", ROBOTS, True),
        ("indexer", ROBOTS, False),
        ("researcher", b"User-agent: researcher\nDisallow: /.well-known/\n", False),
    ],
)
async def test_a_researcher_reads_security_txt_once_when_the_policy_allows(
    tmp_path: Path, autojump_clock: object, role: str, robots: bytes, read: bool
) -> None:
    security = "gemini://a.test/.well-known/security.txt"
    site = {
        **pages(),
        "gemini://a.test/robots.txt": FetchResult(20, "text/plain", robots),
        security: FetchResult(20, "text/plain", b"Contact: mailto:a@a.test\n"),
    }
    fake = FakeSite(site)
    crawler = sqlite_crawler(
        connect(tmp_path / "c.db"),
        fake.fetch,
        CrawlOptions(role=role, test_range=True),
        wall_clock=mock_wall_clock,
    )
    crawler.seed(["gemini://a.test/"])
    await crawler.run()
    assert fake.urls().count(security) == (1 if read else 0)
    cached = rows(
        tmp_path / "c.db", "SELECT name, outcome FROM robots WHERE name LIKE '%security%'"
    )
    assert cached == ([(".well-known/security.txt", "success")] if read else [])
