"""What a search costs, on every engine (FTS5, tantivy, PostgreSQL) over one crawl with
hostile pages (``hostile_pages``): the text a page puts in the index is bounded, snippets
are found in the first characters of a page only, a query over the query budget is
refused, and a stuffed page of a host with no trust path is not first."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hostile_pages as hp
import pytest
from commands import run_main
from postgres_cluster import new_database

from geminibot.index import SearchResult, pg_search, search
from geminibot.index.query import QueryTooCostly
from geminibot.index.text import MARK
from geminibot.store import pg
from geminibot.store.db import connect
from geminibot.store.pages import MAX_INDEXED_CHARS

ENGINES = ["fts5", "tantivy", "postgresql"]
Find = Callable[..., list[SearchResult]]


@pytest.fixture(scope="module")
def sqlite_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("costs") / "crawl.db"
    conn = connect(path)
    hp.fill_sqlite(conn)
    conn.close()
    return path


@pytest.fixture(scope="module")
def sqlite_conn(sqlite_path: Path) -> Iterator[sqlite3.Connection]:
    conn = connect(sqlite_path, create=False)
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def pg_conn(pg_cluster: str) -> Iterator[Any]:
    url = new_database(pg_cluster)
    hp.fill_postgres(url)
    with pg.connect(url) as conn:
        yield conn


@pytest.fixture(scope="module", params=ENGINES)
def find(request: Any) -> Find:
    """``find(query, limit=10, authority=True)`` on one engine."""
    engine = request.param
    if engine == "postgresql":
        conn = request.getfixturevalue("pg_conn")
        return lambda query, limit=10, **kw: pg_search.search(conn, query, limit, **kw)
    db = request.getfixturevalue("sqlite_conn")
    return lambda query, limit=10, **kw: search(db, query, limit, engine=engine, **kw)


def urls(results: list[SearchResult]) -> list[str]:
    return [r.url for r in results]


def test_a_page_puts_at_most_the_limit_of_its_text_in_the_index(find: Find) -> None:
    assert urls(find(hp.LAST_WORD)) == ["gemini://edge.test/"]
    assert find(hp.PAST_WORD) == []


def test_the_store_keeps_at_most_the_limit_of_a_page_text(
    sqlite_conn: sqlite3.Connection, pg_conn: Any
) -> None:
    length = "SELECT max(length(body)) FROM pages_fts"
    assert sqlite_conn.execute(length).fetchone()[0] == MAX_INDEXED_CHARS
    longest = pg_conn.execute("SELECT max(char_length(body)) FROM pages").fetchone()[0]
    assert longest == MAX_INDEXED_CHARS


def test_a_snippet_comes_from_the_first_characters_of_a_page(find: Find) -> None:
    (far,) = find(hp.FAR_WORD)
    assert far.url == "gemini://far.test/"
    assert MARK[0] not in far.snippet and far.snippet.startswith("Start. lorem")


def test_pages_of_megabytes_found_by_title_show_their_first_words(find: Find) -> None:
    results = find("party", hp.BIG_PAGES + 1)
    assert sorted(urls(results)) == sorted(f"gemini://party{n}.test/" for n in range(12))
    assert all(r.snippet.startswith("lorem ipsum") and len(r.snippet) < 200 for r in results)


def test_a_stuffed_page_of_an_untrusted_host_is_not_first(find: Find) -> None:
    """Its title, headings and link farm put it first by text alone; the bound on
    untrusted hosts puts the honest page first, the stuffed one still found."""
    assert urls(find("recipe", authority=False))[0] == hp.SPAM
    ranked = urls(find("recipe"))
    assert ranked[0] == hp.RECIPES[0]
    assert hp.SPAM in ranked


@pytest.mark.parametrize(
    "query",
    [
        " ".join(f"{c}*" for c in "abcdefghijklmnopqrstuvwxy" * 5),
        "a*",
        "rec* lor* ips* dol*",
        '"a b c d e f g h i"',
        " ".join(f"w{n}" for n in range(13)),
    ],
)
def test_a_query_over_budget_is_refused_on_every_engine(find: Find, query: str) -> None:
    with pytest.raises(QueryTooCostly):
        find(query)


def test_the_search_command_refuses_a_query_over_budget_with_one_line(
    sqlite_path: Path,
) -> None:
    done = run_main(["search", "--db", str(sqlite_path), "a*", "recipe"])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "prefix a* too short" in done.stderr, done.stderr


def test_link_text_from_hosts_with_no_trust_path_counts_for_nothing(
    sqlite_conn: sqlite3.Connection,
) -> None:
    """The farm's words for a trusted page are not its link text (tantivy: the only
    engine with link text); the trusted hub's are."""
    assert search(sqlite_conn, hp.FARM_WORD, engine="tantivy") == []
    assert hp.RECIPES[1] in urls(search(sqlite_conn, "larder", engine="tantivy"))
