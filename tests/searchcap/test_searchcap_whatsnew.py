"""The search capsule's pages of what is new, without a network: /feeds by format, /new
as a gemsub page (read back by the crawler's own feed reader), /new?QUERY only the
entries whose page matches, /newest the capsules of the last 30 days, /random a 30 to a
live page."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from commands import answer_of
from pages import gemtext_page

from geminibot.feeds.parse import Entry, Feed, read_feed
from geminibot.gemini.server import Resolution
from geminibot.gemini.urls import parse_request
from geminibot.index.reads import Reads
from geminibot.index.search import MAX_QUERY_LENGTH
from geminibot.searchcap import SearchCapsule
from geminibot.store.db import connect, transaction
from geminibot.store.feedstore import store_feed
from geminibot.store.pages import store_page
from geminibot.store.sqlite_sql import ENGINE

DAY = 86400.0
NOW = 1_750_000_000.0
LOG = "gemini://log.test/index.gmi"
ATOM = "gemini://news.test/atom.xml"


def post(n: int, age_days: float, title: str) -> Entry:
    return Entry(f"gemini://log.test/{n}.gmi", title, NOW - age_days * DAY)


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "idx.db"
    conn = connect(path)

    def run(c: Any, statement: Any, params: dict[str, Any]) -> Any:
        return c.execute(ENGINE.sql[statement], params)

    with transaction(conn):
        for n, words in ((1, "tomatoes in May"), (2, "basil and more"), (3, "old tomatoes")):
            store_page(conn, gemtext_page(f"gemini://log.test/{n}.gmi", f"P{n}", words), "indexer")
        gemsub = Feed(
            "gemsub",
            "A \x1b[31mlog",
            None,
            (post(1, 1, "Tomatoes\nin May"), post(2, 3, ""), post(3, 30, "Too old")),
        )
        store_feed(run, conn, LOG, "log.test", gemsub, NOW - DAY)
        atom = Feed("atom", "News", "Ann", (post(1, 1, "Tomatoes again"),))
        store_feed(run, conn, ATOM, "news.test", atom, NOW - DAY)
        conn.execute(
            "INSERT INTO hosts (host, first_seen, last_fetch_at) VALUES"
            f" ('log.test', {NOW - 2 * DAY}, {NOW}), ('news.test', {NOW - 90 * DAY}, {NOW}),"
            f" ('never.test', {NOW - DAY}, NULL)"
        )
    conn.close()
    return str(path)


def ask(db: str, path_query: str, pick: Callable[[int, int], int] = max) -> Resolution:
    url = parse_request(f"gemini://search.test{path_query}\r\n".encode())
    reads = Reads.of(db, limit=2, wait=5.0)
    with closing(SearchCapsule(reads, wall_clock=lambda: NOW, pick=pick)) as capsule:
        return answer_of(capsule, url)  # type: ignore[no-any-return]


def body(answer: Resolution) -> str:
    assert answer.status == 20, (answer.status, answer.meta)
    return answer.read_body().decode("utf-8")


def test_feeds_are_listed_by_format(db: str) -> None:
    text = body(ask(db, "/feeds"))
    assert "## atom (1)" in text and "## gemsub (1)" in text
    assert text.index("## gemsub") < text.index("## atom")  # the formats in their order
    assert f"=> {LOG} A [31mlog · 3 entries, latest " in text  # control characters folded
    assert f"=> {ATOM} News · 1 entries, latest " in text


def test_new_is_a_gemsub_page_of_the_week(db: str) -> None:
    answer = ask(db, "/new")
    feed = read_feed("gemini://search.test/new", answer.meta, body(answer).encode(), NOW)
    assert feed is not None and feed.format == "gemsub"
    assert feed.title == "What is new in Geminispace"
    assert [(e.url, e.title) for e in feed.entries] == [
        ("gemini://log.test/1.gmi", "Tomatoes in May"),  # one line, once for two feeds
        ("gemini://log.test/2.gmi", "log.test"),  # untitled: its capsule
    ]
    # An entry's date is its day: noon UTC of it, as gemsub says.
    assert feed.entries[0].published == (NOW - DAY) // DAY * DAY + DAY / 2


def test_new_with_a_query_keeps_the_entries_whose_page_matches(db: str) -> None:
    text = body(ask(db, "/new?basil"))
    assert "# What is new: basil" in text
    assert "=> gemini://log.test/2.gmi" in text and "1.gmi" not in text
    assert ask(db, "/new?" + "x" * (MAX_QUERY_LENGTH + 1)).status == 59


def test_newest_lists_the_capsules_of_the_last_30_days_that_answered(db: str) -> None:
    text = body(ask(db, "/newest"))
    assert "=> gemini://log.test/ log.test: first seen" in text
    assert "news.test" not in text and "never.test" not in text


def test_random_redirects_to_a_live_page(db: str, tmp_path: Path) -> None:
    last = ask(db, "/random", pick=max)
    first = ask(db, "/random", pick=min)
    assert (last.status, last.meta) == (30, "gemini://log.test/3.gmi")
    assert (first.status, first.meta) == (30, "gemini://log.test/1.gmi")
    connect(tmp_path / "empty.db").close()
    assert ask(str(tmp_path / "empty.db"), "/random").status == 51


def test_home_and_about_describe_them(db: str) -> None:
    home, about = body(ask(db, "/")), body(ask(db, "/about"))
    for path in ("/new", "/feeds", "/newest", "/random"):
        assert f"=> {path} " in home and f"=> {path} " in about
    assert "gemsub" in about and "twtxt" in about
