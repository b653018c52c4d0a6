"""Index writes, search ranking and snippets, safe query strings, statistics."""

import contextlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pages import gemtext_page as page

from geminibot.index import QueryError, search, stats
from geminibot.index.search import MAX_LIMIT, MAX_QUERY_LENGTH, to_fts_query
from geminibot.index.stats import format_stats
from geminibot.index.text import MARK
from geminibot.store.database import Database
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Link, store_page


@pytest.fixture
def db(tmp_path: Path) -> sqlite3.Connection:
    conn = connect(tmp_path / "idx.db")
    with transaction(conn):
        store_page(
            conn, page("gemini://a.test/", "Welcome", "A capsule about gardening."), "indexer"
        )
        store_page(
            conn,
            page(
                "gemini://a.test/crawler",
                "Crawlers",
                "A polite crawler obeys robots.txt. The crawler waits between requests.",
                headings=("Politeness", "Gemini crawler design"),
                links=(Link("gemini://a.test/", "home"),),
            ),
            "indexer",
        )
        store_page(conn, page("gemini://a.test/img.png", text=None, mime="image/png"), "indexer")
    return conn


def test_ranking_and_snippet(db: sqlite3.Connection) -> None:
    results = search(db, "crawler")
    assert [r.url for r in results] == ["gemini://a.test/crawler"]
    assert MARK[0] + "crawler" + MARK[1] in results[0].snippet
    assert results[0].title == "Crawlers"
    assert search(db, "gardening")[0].url == "gemini://a.test/"


def test_title_outranks_body(tmp_path: Path) -> None:
    conn = connect(tmp_path / "r.db")
    with transaction(conn):
        store_page(conn, page("gemini://a.test/1", "Other", "mentions tomato once"), "indexer")
        store_page(conn, page("gemini://a.test/2", "Tomato", "a page"), "indexer")
    assert [r.url for r in search(conn, "tomato")] == ["gemini://a.test/2", "gemini://a.test/1"]


def test_query_syntax(db: sqlite3.Connection) -> None:
    assert [r.url for r in search(db, "crawl*")] == ["gemini://a.test/crawler"]
    assert search(db, '"obeys robots"')[0].url == "gemini://a.test/crawler"
    assert search(db, '"robots obeys"') == []
    assert search(db, "crawler -polite") == []
    assert {r.url for r in search(db, "gardening OR politeness")} == {
        "gemini://a.test/",
        "gemini://a.test/crawler",
    }


@pytest.mark.parametrize(
    "query",
    ['"', "AND", "NOT crawler", "crawler:", "(crawler", 'crawler"', "^crawler", "col:x", "a -b*"],
)
def test_fts_syntax_in_user_queries_is_harmless(db: sqlite3.Connection, query: str) -> None:
    with contextlib.suppress(QueryError):  # a clear error is fine; sqlite3.Error is not
        search(db, query)


@pytest.mark.parametrize("query", ["", "   ", "-crawler", "!!! ???", "OR"])
def test_empty_queries_are_clear_errors(db: sqlite3.Connection, query: str) -> None:
    with pytest.raises(QueryError, match="nothing to search for"):
        search(db, query)


def test_limits(db: sqlite3.Connection) -> None:
    with pytest.raises(QueryError, match="too long"):
        search(db, "a" * (MAX_QUERY_LENGTH + 1))
    search(db, "a" * MAX_QUERY_LENGTH)
    with pytest.raises(QueryError, match="limit"):
        search(db, "crawler", limit=0)
    with pytest.raises(QueryError, match="limit"):
        search(db, "crawler", limit=MAX_LIMIT + 1)
    assert len(search(db, "gar* OR cra*", limit=1)) == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_query_is_valid_fts_or_a_query_error(query: str) -> None:

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5 (a)")
    try:
        expr = to_fts_query(query)
    except QueryError:
        return
    conn.execute("SELECT * FROM t WHERE t MATCH ?", (expr,)).fetchall()


def test_researcher_keeps_links_not_text(tmp_path: Path) -> None:
    conn = connect(tmp_path / "res.db")
    with transaction(conn):
        store_page(
            conn,
            page("gemini://a.test/", "Secret title", "secret words", links=(Link("/x", "lbl"),)),
            "researcher",
        )
    assert search(conn, "secret") == []
    row = conn.execute("SELECT title, text_indexed, size FROM pages").fetchone()
    assert row == ("", 0, len("secret words"))
    assert conn.execute("SELECT target, label FROM links").fetchall() == [("/x", "")]


def test_store_is_idempotent(db: sqlite3.Connection) -> None:
    with transaction(db):
        store_page(db, page("gemini://a.test/", "Welcome", "A capsule about gardening."), "indexer")
    assert len(search(db, "gardening")) == 1
    assert db.execute("SELECT count(*) FROM pages").fetchone()[0] == 3


def test_stats(db: sqlite3.Connection, tmp_path: Path) -> None:
    data = stats(Database("idx.db", db, path=tmp_path / "idx.db"))
    assert data["pages"] == 3
    assert data["pages_with_text"] == 2
    assert data["mime"] == {"text/gemini": 2, "image/png": 1}
    assert data["links"] == 1
    text = format_stats(data)
    assert "MIME types:" in text
    assert "image/png" in text


def test_text_output_escapes_what_servers_wrote(tmp_path: Path) -> None:
    """A page's title, body and MIME type carry escape sequences and a line break:
    ``geminibot search`` and ``stats`` show them escaped, wrapped to 80 columns."""
    from commands import run_main

    path = tmp_path / "hostile.db"
    conn = connect(path)
    evil = "\x1b]0;owned\x07"
    with transaction(conn):
        store_page(
            conn,
            page(
                "gemini://a.test/x",
                f"Turnip{evil}\nfake line",
                "turnip soup \x1b[2J\u202etxt.exe and more",
                mime="text/gemini" + "\x1b[31m" + ";x" * 60,
            ),
            "indexer",
        )
    conn.close()
    found = run_main(["search", "turnip", "--db", str(path)])
    assert found.returncode == 0
    assert not any(c in found.stdout for c in "\x1b\x07\u202e")
    assert "Turnip\\x1b]0;owned\\x07 fake line" in found.stdout  # one line
    assert max(len(line) for line in found.stdout.splitlines()) <= 80
    assert found.stdout.splitlines()[1] == "   gemini://a.test/x"  # the URL whole, to copy
    shown = run_main(["stats", "--db", str(path)])
    assert shown.returncode == 0 and "\x1b" not in shown.stdout
    assert "text/gemini\\x1b[31m;x;x" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80
