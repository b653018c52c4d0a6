"""Search and statistics read the same answers from both stores (``store`` and ``db`` are
parametrised: SQLite and PostgreSQL), and the command line prints them the same way."""

from __future__ import annotations

import pytest
from db_rows import reading
from test_store import A, decision, fetch, page

from geminibot.cli import main
from geminibot.index import QueryError
from geminibot.index.stats import format_stats
from geminibot.index.text import MARK
from geminibot.store.crawlstore import CrawlStore, FetchedPage
from geminibot.store.database import open_database
from geminibot.store.pages import Link

PAGES = [
    (A, "Welcome", "A capsule about gardening and tomatoes.", ()),
    (
        A + "crawler",
        "Crawlers",
        "A polite crawler obeys robots.txt. The crawler waits between requests.",
        ("Politeness", "Gemini crawler design"),
    ),
    (A + "garden", "Garden log", "Tomatoes again; the crawler of slugs is slow.", ()),
    (A + "img.png", "", None, ()),
]


def fill(store: CrawlStore, role: str = "indexer") -> None:
    store.seed([url for url, *_ in PAGES])
    for url, title, text, headings in PAGES:
        assert store.lease_host("a.test", "me") is not None
        claim = store.claim("a.test", "me")
        assert claim is not None and claim.url == url
        lang = "de-AT" if url.endswith("garden") else None  # the MIME type's lang
        p = page(url, title, text, headings=headings, links=(Link(A, "home"),), lang=lang)
        store.fetched(FetchedPage(decision(url), fetch(url), p, role, [(A, 1, url)]))


@pytest.mark.parametrize(
    ("query", "urls"),
    [
        ("crawler", [A + "crawler", A + "garden"]),
        ("tomatoes", [A, A + "garden"]),
        ('"polite crawler"', [A + "crawler"]),
        ("garden*", [A + "garden", A]),
        ("crawler -slugs", [A + "crawler"]),
        ("gardening OR obeys", [A, A + "crawler"]),
        ("nothing-here", []),
        ("lang:de crawler", [A + "garden"]),
        ("tomatoes lang:en", []),
    ],
)
def test_search_answers_alike(store: CrawlStore, db: str, query: str, urls: list[str]) -> None:
    fill(store)
    with reading(db) as (conn, search):
        results = search(conn, query, 10)
    assert sorted(r.url for r in results) == sorted(urls)
    if urls:
        assert results[0].url == urls[0]  # the same best page


def test_snippet_and_title(store: CrawlStore, db: str) -> None:
    fill(store)
    with reading(db) as (conn, search):
        (best, *_) = search(conn, "polite", 10)
    assert best.title == "Crawlers"
    assert MARK[0] + "polite" + MARK[1] in best.snippet.lower()


def test_bad_queries_are_refused_alike(store: CrawlStore, db: str) -> None:
    fill(store)
    with reading(db) as (conn, search):
        for query in ("-only", "!!!", ""):
            with pytest.raises(QueryError):
                search(conn, query, 10)
        with pytest.raises(QueryError):
            search(conn, "x", 0)


def test_researcher_keeps_no_text(store: CrawlStore, db: str) -> None:
    fill(store, role="researcher")
    with reading(db) as (conn, search):
        assert search(conn, "crawler", 10) == []


def test_stats_alike(store: CrawlStore, db: str) -> None:
    fill(store)
    from geminibot.index import stats

    with open_database(db) as database:
        data = stats(database)
    assert data["pages"] == 4 and data["pages_with_text"] == 3
    assert data["links"] == 4 and data["requests"] == 4
    assert data["frontier"] == {"done": 4}
    assert data["status"] == {"20": 4}
    assert "pages      4 (3 with searchable text, 0 duplicates)" in format_stats(data)


def test_command_line_output_alike(
    store: CrawlStore, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(store)
    assert main(["search", "polite", "--db", db]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "1. Crawlers"
    assert out[1] == f"   {A}crawler"
    assert "polite" in out[2] and MARK[0] not in out[2]  # not a terminal: unmarked
    assert main(["search", "zzz", "--db", db]) == 1
    assert main(["stats", "--db", db]) == 0
    assert capsys.readouterr().out.startswith("hosts      1 (0 skipped for now)")


def test_url_words_are_searched(store: CrawlStore, db: str) -> None:
    url = A + "zucchini-notes.gmi"
    store.seed([url])
    assert store.lease_host("a.test", "me") is not None
    assert store.claim("a.test", "me") is not None
    store.fetched(
        FetchedPage(decision(url), fetch(url), page(url, "Notes", "plain"), "indexer", [])
    )
    with reading(db) as (conn, search):
        assert [r.url for r in search(conn, "zucchini", 10)] == [url]


def test_a_cut_snippet_is_marked(store: CrawlStore, db: str) -> None:
    url = A + "long.gmi"
    text = "start " + " ".join(f"filler{i}" for i in range(40)) + " needle " + "tail " * 40
    store.seed([url])
    assert store.lease_host("a.test", "me") is not None
    assert store.claim("a.test", "me") is not None
    store.fetched(FetchedPage(decision(url), fetch(url), page(url, "Long", text), "indexer", []))
    with reading(db) as (conn, search):
        (hit,) = search(conn, "needle", 10)
    assert MARK[0] + "needle" + MARK[1] in hit.snippet
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
