"""The search capsule's handler, without a network: URL in, status, meta and gemtext out."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio
from commands import answer_of
from pages import gemtext_page

from geminibot.crawl.politeness import START_DELAY
from geminibot.gemini.gemtext import HeadingLine, Preformatted, parse_gemtext
from geminibot.gemini.server import Resolution
from geminibot.gemini.urls import parse_request
from geminibot.index import SearchResult, search
from geminibot.index.search import MAX_QUERY_LENGTH
from geminibot.index.tantivy_index import db_path_of, rebuild
from geminibot.searchcap import SearchCapsule
from geminibot.searchcap.app import (
    HOSTS_PER_PAGE,
    MAX_BACKLINKS,
    MAX_PAGE,
    PAGE_SIZE,
    SEARCH_READS,
    SEARCH_WAIT,
    STATS_SECONDS,
)
from geminibot.store.db import connect, set_setting, transaction
from geminibot.store.pages import Link, Page, store_page
from geminibot.store.reads import Reads
from geminibot.store.traps import FrontierLimits

GEMTEXT = "text/gemini; charset=utf-8"


def stored(url: str, title: str, text: str, links: tuple[Link, ...] = ()) -> Page:
    return gemtext_page(url, title, text, fetched_at=1_700_000_000.0, links=links)


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    conn = connect(tmp_path / "idx.db")
    with transaction(conn):
        for n in range(25):
            store_page(
                conn,
                stored(
                    f"gemini://garden.test/plant/{n:02}",
                    f"Plant {n:02}",
                    f"Tomatoes and basil, entry {n}.",
                    (Link("gemini://hub.test/", "the hub"),),
                ),
                "indexer",
            )
        store_page(
            conn,
            stored("gemini://hub.test/", "The hub", "Links to every garden.", ()),
            "indexer",
        )
        conn.execute(
            "INSERT INTO hosts (host, first_seen, last_fetch_at) VALUES"
            " ('garden.test', 1.0, 1700000000.0), ('hub.test', 1.0, NULL)"
        )
        set_setting(conn, "role", "indexer")
        set_setting(conn, "agent", "mybot")
    return conn


def reads_of(conn: sqlite3.Connection) -> Reads:
    """Reads of ``conn``'s database file, with connections of their own."""
    return Reads.of(str(db_path_of(conn)), limit=SEARCH_READS, wait=SEARCH_WAIT)


def ask(conn: sqlite3.Connection, path_query: str) -> Resolution:
    url = parse_request(f"gemini://search.test{path_query}\r\n".encode())
    with closing(SearchCapsule(reads_of(conn))) as capsule:
        return answer_of(capsule, url)  # type: ignore[no-any-return]


def text(answer: Resolution) -> str:
    assert answer.status == 20 and answer.meta == GEMTEXT, (answer.status, answer.meta)
    return answer.read_body().decode("utf-8")


def test_home_links_every_page(conn: sqlite3.Connection) -> None:
    body = text(ask(conn, "/"))
    for path in ("/search", "/backlinks", "/hosts", "/stats", "/census", "/about"):
        assert f"=> {path} " in body
    assert text(ask(conn, "")) == body


@pytest.mark.parametrize("path", ["/search", "/search?", "/search?%20%20", "/search/2"])
def test_search_asks_for_input(conn: sqlite3.Connection, path: str) -> None:
    answer = ask(conn, path)
    assert answer.status == 10
    assert answer.meta.startswith("Search for")


def test_search_answers_results_with_title_url_host_snippet(conn: sqlite3.Connection) -> None:
    body = text(ask(conn, "/search?every"))
    assert "=> gemini://hub.test/ The hub\nhub.test · Links to ⟦every⟧ garden.\n" in body


def test_search_pages(conn: sqlite3.Connection) -> None:
    first = text(ask(conn, "/search?tomatoes"))
    assert first.count("=> gemini://garden.test/") == PAGE_SIZE
    assert "Results 1-10" in first
    assert "=> /search/2?tomatoes Next page" in first
    assert "Previous page" not in first
    third = text(ask(conn, "/search/3?tomatoes"))
    assert third.count("=> gemini://garden.test/") == 25 - 2 * PAGE_SIZE
    assert "Results 21-25" in third
    assert "Next page" not in third
    assert "=> /search/2?tomatoes Previous page" in third
    seen = [
        line.split()[1]
        for n in (1, 2, 3)
        for line in text(ask(conn, f"/search/{n}?tomatoes")).splitlines()
        if line.startswith("=> gemini://garden.test/")
    ]
    assert len(seen) == len(set(seen)) == 25
    assert "No results from 41 on." in text(ask(conn, "/search/5?tomatoes"))


@pytest.mark.parametrize("engine", ["fts5", "tantivy"])
def test_a_page_asks_the_index_for_that_page_only(conn: sqlite3.Connection, engine: str) -> None:
    """Page 3 asks for its ten results and one more (is there a next page?), from the
    20th on: the twenty before it are neither read back nor given snippets."""
    rebuild(conn)
    asked: list[tuple[int, int]] = []

    def find(db: Any, query: str, limit: int, *, offset: int = 0) -> list[SearchResult]:
        asked.append((limit, offset))
        return search(db, query, limit, offset=offset, engine=engine)

    url = parse_request(b"gemini://search.test/search/3?tomatoes\r\n")
    with closing(SearchCapsule(reads_of(conn), find)) as capsule:
        body = text(answer_of(capsule, url))
    assert asked == [(PAGE_SIZE + 1, 2 * PAGE_SIZE)]
    shown = [ln.split()[1] for ln in body.splitlines() if ln.startswith("=> gemini://")]
    assert shown == [r.url for r in search(conn, "tomatoes", 1000, engine=engine)][20:]


def test_query_is_percent_decoded_and_reencoded(conn: sqlite3.Connection) -> None:
    body = text(ask(conn, "/search?tomatoes%20basil"))
    assert "# Search: tomatoes basil" in body
    assert "=> /search/2?tomatoes%20basil Next page" in body
    assert "No results." in text(ask(conn, "/search?%22basil%20tomatoes%22"))


def test_query_of_only_symbols_is_asked_again_with_the_reason(conn: sqlite3.Connection) -> None:
    answer = ask(conn, "/search?%2D%2D%2D")
    assert answer.status == 10
    assert answer.meta.startswith("nothing to search for")


@pytest.mark.parametrize(
    ("path", "status", "meta"),
    [
        ("/search?%FF", 59, "The query is not valid UTF-8"),
        ("/search?" + "a" * (MAX_QUERY_LENGTH + 1), 59, "Query too long"),
        ("/backlinks?not%20a%20url", 59, "Not a URL"),
        ("/backlinks?ftp%3A%2F%2Fx.test%2F", 59, "Not a URL"),
        ("/nowhere", 51, "Not found"),
        ("/search/0?tomatoes", 51, "Not found"),
        (f"/search/{MAX_PAGE + 1}?tomatoes", 51, "Not found"),
        ("/search/x?tomatoes", 51, "Not found"),
        ("/hosts/2", 51, "Not found"),
        ("/stats/", 51, "Not found"),
    ],
)
def test_bad_input_is_refused(conn: sqlite3.Connection, path: str, status: int, meta: str) -> None:
    answer = ask(conn, path)
    assert (answer.status, answer.meta[: len(meta)]) == (status, meta)
    assert answer.read_body() == b""


def test_query_at_the_length_limit_is_searched(conn: sqlite3.Connection) -> None:
    query = ("tomatoes " * MAX_QUERY_LENGTH)[:MAX_QUERY_LENGTH]
    assert ask(conn, "/search?" + query.replace(" ", "%20")).status == 20


def test_last_page_has_no_next_link(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        for n in range(MAX_PAGE * PAGE_SIZE + 5):
            store_page(conn, stored(f"gemini://many.test/{n}", "x", "zucchini"), "indexer")
    body = text(ask(conn, f"/search/{MAX_PAGE}?zucchini"))
    assert body.count("=> gemini://many.test/") == PAGE_SIZE
    assert "Next page" not in body


def test_backlinks(conn: sqlite3.Connection) -> None:
    assert ask(conn, "/backlinks").status == 10
    body = text(ask(conn, "/backlinks?gemini%3A%2F%2Fhub.test%2F"))
    assert body.count("=> gemini://garden.test/plant/") == 25
    assert "linked as: the hub" in body
    # the same URL unnormalised (upper-case host, explicit default port)
    again = text(ask(conn, "/backlinks?gemini://HUB.test:1965/"))
    assert again.count("=> gemini://garden.test/plant/") == 25
    assert "No indexed page links here." in text(ask(conn, "/backlinks?gemini://none.test/"))


def test_backlinks_are_bounded(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        for n in range(MAX_BACKLINKS + 1):
            page = stored(f"gemini://fan.test/{n:03}", "", "x", (Link("gemini://star.test/"),))
            store_page(conn, page, "indexer")
    body = text(ask(conn, "/backlinks?gemini://star.test/"))
    assert body.count("=> gemini://fan.test/") == MAX_BACKLINKS
    assert f"the first {MAX_BACKLINKS} pages" in body


def test_hosts_say_when_each_was_last_seen(conn: sqlite3.Connection) -> None:
    body = text(ask(conn, "/hosts"))
    assert "=> gemini://garden.test/ garden.test: last seen 2023-11-14 22:13 UTC, 25 pages" in body
    assert "=> gemini://hub.test/ hub.test: last seen never fetched, 1 page" in body


def test_hosts_page(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        conn.executemany(
            "INSERT INTO hosts (host, first_seen) VALUES (?, 1.0)",
            [(f"h{n:04}.test",) for n in range(HOSTS_PER_PAGE)],
        )
    first = text(ask(conn, "/hosts"))
    assert first.count(": last seen") == HOSTS_PER_PAGE
    assert "=> /hosts/2 Next page" in first
    second = text(ask(conn, "/hosts/2"))
    assert second.count(": last seen") == 2
    assert "=> /hosts/1 Previous page" in second


def test_stats(conn: sqlite3.Connection) -> None:
    body = text(ask(conn, "/stats"))
    assert "pages      26 (26 with searchable text" in body
    assert body.count("```") == 2


def test_census(conn: sqlite3.Connection) -> None:
    body = text(ask(conn, "/census"))
    assert body.startswith("# Census of Geminispace as crawled\n")
    assert "* capsules known (host and port) (the crawl's window): 2\n" in body
    assert "```capsules.largest\ngarden.test" in body
    assert body.count("```") % 2 == 0
    assert body.endswith("=> / Home\n")


@pytest.mark.parametrize("path", ["/census", "/stats"])
def test_a_hostile_mime_type_stays_inside_its_table(conn: sqlite3.Connection, path: str) -> None:
    """MIME types come from servers: one that is exactly the toggle, one that starts with
    it, one with a line break: each stays a line of the table's block, and the page has
    no link or heading but its own."""
    hostile = ["```", "```=> gemini://evil.test/ phish", "a/b\n=> gemini://evil.test/ x\n# H"]
    with transaction(conn):
        for n, mime in enumerate(hostile):
            page = stored(f"gemini://bad.test/{n}", "Bad", "bad")
            store_page(conn, replace(page, mime=mime, meta=mime), "indexer")
    doc = parse_gemtext(text(ask(conn, path)))
    assert not [link.url for link in doc.links if "evil" in link.url]
    assert not [h for h in doc.lines if isinstance(h, HeadingLine) and h.text == "H"]
    shown = "\n".join(line for b in doc.lines if isinstance(b, Preformatted) for line in b.lines)
    assert re.search(r"^ +``` +1$", shown, re.MULTILINE)
    assert " ```=> gemini://evil.test/ phish" in shown
    assert "a/b\\x0a=> gemini://evil.test/ x\\x0a# H" in shown


def test_stats_are_counted_at_most_once_a_period(conn: sqlite3.Connection) -> None:
    now = [100.0]
    capsule = SearchCapsule(reads_of(conn), clock=lambda: now[0])
    url = parse_request(b"gemini://search.test/stats\r\n")
    assert "pages      26 " in text(answer_of(capsule, url))
    with transaction(conn):
        store_page(conn, stored("gemini://new.test/", "New", "new page"), "indexer")
    now[0] += STATS_SECONDS - 0.001
    assert "pages      26 " in text(answer_of(capsule, url))
    now[0] += 0.001
    assert "pages      27 " in text(answer_of(capsule, url))


class CountingReads(Reads):
    """The real reads, counting the reads run."""

    runs = 0

    async def run(self, read: Any) -> Any:
        self.runs += 1
        return await super().run(read)


async def test_stats_are_counted_once_for_requests_at_once(conn: sqlite3.Connection) -> None:
    reads = CountingReads.of(str(db_path_of(conn)), limit=SEARCH_READS, wait=SEARCH_WAIT)
    capsule = SearchCapsule(reads)
    url = parse_request(b"gemini://search.test/stats\r\n")
    answers: list[Resolution] = []

    async def ask_stats() -> None:
        answers.append(await capsule.stats(url))

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(ask_stats)
    assert reads.runs == 1
    assert len(answers) == 8
    assert all("pages      26 " in text(answer) for answer in answers)


def test_about_names_the_token_and_virtual_agent_from_the_database(
    conn: sqlite3.Connection,
) -> None:
    body = text(ask(conn, "/about"))
    assert "```\nUser-agent: indexer\nDisallow: /\n```" in body
    assert "Every crawler acting as an indexer, this one included" in body
    assert "```\nUser-agent: mybot\nDisallow: /\n```" in body
    assert 'declares the category "search-indexer"' in body
    assert f"one request every {START_DELAY:g} seconds" in body
    assert f"at most {FrontierLimits().max_urls_per_host} URLs per capsule" in body


def test_about_on_a_fresh_database_uses_the_crawler_defaults(tmp_path: Path) -> None:
    body = text(ask(connect(tmp_path / "empty.db"), "/about"))
    assert "User-agent: geminibot\n" in body
    assert "User-agent: indexer\n" in body


def test_every_answer_is_plain_gemtext_whatever_the_page_text(conn: sqlite3.Connection) -> None:
    """Titles and snippets come from crawled pages: a line break in them must not start a
    link, heading or preformatted line of the capsule's own page."""
    hostile = "evil\n=> gemini://phish.test/ click\n```\n# heading"
    with transaction(conn):
        store_page(conn, stored("gemini://bad.test/", hostile, hostile + " kohlrabi"), "indexer")
    body = text(ask(conn, "/search?kohlrabi"))
    assert "phish" in body
    assert not any(line.startswith("=> gemini://phish") for line in body.splitlines())
    assert not any(line.startswith(("```", "# heading")) for line in body.splitlines())


def test_highlights_are_not_confused_with_brackets(tmp_path: Path) -> None:
    """A page's own brackets stay brackets; the capsule's highlight marks only the
    searched word (a literal one in the page is removed)."""
    conn = connect(tmp_path / "b.db")
    with transaction(conn):
        store_page(
            conn, stored("gemini://a.test/", "Ports", '["OpenJDK] port and ⟦x⟧ too', ()), "indexer"
        )
    assert 'a.test · ["OpenJDK] ⟦port⟧ and x too' in text(ask(conn, "/search?port"))


def test_a_client_budget_pays_for_searches_at_its_edge(conn: sqlite3.Connection) -> None:
    """Each search costs its units (:func:`query_cost`): a budget that pays for exactly
    two is answered twice, then ``44`` with the seconds until it pays for one more."""
    from geminibot.gemini.ratelimit import RateLimiter
    from geminibot.index.query import parse_query, query_cost

    now = [0.0]
    cost = query_cost(parse_query("tomat* basil"))
    budget = RateLimiter(2 * cost, 1.0)
    url = parse_request(b"gemini://search.test/search?tomat*%20basil\r\n")
    with closing(SearchCapsule(reads_of(conn), clock=lambda: now[0], budget=budget)) as capsule:
        assert [answer_of(capsule, url).status for _ in range(2)] == [20, 20]
        refused = answer_of(capsule, url)
        assert (refused.status, refused.meta) == (44, str(cost))
        now[0] = cost - 0.01
        assert answer_of(capsule, url).status == 44
        now[0] = float(cost)
        assert answer_of(capsule, url).status == 20
        too_costly = parse_request(b"gemini://search.test/search?a*\r\n")
        assert answer_of(capsule, too_costly).status == 59  # refused before it costs
