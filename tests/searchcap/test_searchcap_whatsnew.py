"""The search capsule's pages of what is new, without a network: /feeds by format, /new
as a gemsub page (read back by the crawler's own feed reader), /new?QUERY only the
entries whose page matches, /newest the capsules of the last 30 days, /random a 30 to a
live page."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from commands import answer_of
from whatsnew_db import ATOM, DAY, LOG, NOW, whatsnew_db

from geminibot.feeds.parse import read_feed
from geminibot.gemini.server import Resolution
from geminibot.gemini.urls import parse_request
from geminibot.index.search import MAX_QUERY_LENGTH
from geminibot.searchcap import SearchCapsule
from geminibot.store.db import connect
from geminibot.store.reads import Reads


@pytest.fixture
def db(tmp_path: Path) -> str:
    return whatsnew_db(tmp_path / "idx.db")


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
    assert f"=> {ATOM} News <&> · 1 entries, latest " in text


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
