"""Queries as people type them, on a small store searched by the tantivy index and FTS5:
stop words not required, words typed side by side ranked first, titles from TOML front
matter, highlights on the word alone (and on words of the same stem), first-words
snippets cut at a word."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from geminibot.crawl.page import extract
from geminibot.index.query import parse_query
from geminibot.index.search import (
    PLAIN_SNIPPET_CHARS,
    plain_snippet,
    search,
    text_snippet,
)
from geminibot.index.tantivy_index import rebuild
from geminibot.index.text import render_marks
from geminibot.store.db import connect, transaction
from geminibot.store.pages import store_page

LONG = " ".join(["Underground"] + ["people live in cells and talk through the screens"] * 4)
PAGES = {
    "gemini://a.test/stops.gmi": (
        "# The Machine Stops\n\nA story by E. M. Forster about people learning to live "
        "underground, served by the Machine.\n"
    ),
    "gemini://b.test/course.gmi": (
        "# Notes from a course\n\nToday: an introduction to machine learning, with small "
        "examples in Python.\n"
    ),
    "gemini://c.test/poetry.gmi": "# Poetry corner\n\nShort poems on the night sky and the stars.\n",
    "gemini://c.test/haiku.gmi": (
        '+++ type = "blog" author = "Pulko" title = "WebKit weekly report #36" +++\n\n'
        "Hello everyone,\n\nI installed RetroPie, and the gardens of WebKit grew.\n"
    ),
    "gemini://c.test/long.gmi": f"# Forster's cells\n\n{LONG}\n",
}


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    path: Path = tmp_path_factory.mktemp("real") / "crawl.db"
    db = connect(path)
    with transaction(db):
        for url, body in PAGES.items():
            page = extract(url, url.split("/")[2], 20, "text/gemini", body.encode(), 1.0).page
            store_page(db, page, "indexer")
    rebuild(db)
    yield db
    db.close()


def urls(conn: sqlite3.Connection, query: str, engine: str) -> list[str]:
    return [r.url for r in search(conn, query, 10, engine=engine)]


@pytest.mark.parametrize("engine", ["tantivy", "fts5"])
def test_stop_words_are_not_required(conn: sqlite3.Connection, engine: str) -> None:
    found = urls(conn, "poems about stars", engine)
    assert found == urls(conn, "poems stars", engine) == ["gemini://c.test/poetry.gmi"]
    assert parse_query("poems about stars").ignored == ("about",)
    # Stop words alone, or quoted, are what is asked for.
    assert [t.text for t in parse_query("the who").groups[0]] == ["the", "who"]
    assert [t.text for t in parse_query('"the who" band').groups[0]] == ["the who", "band"]


def test_words_typed_side_by_side_rank_first(conn: sqlite3.Connection) -> None:
    found = urls(conn, "machine learning", "tantivy")
    assert found[:2] == ["gemini://b.test/course.gmi", "gemini://a.test/stops.gmi"]
    # Apart, the title's word wins as before.
    assert urls(conn, "learning machine", "tantivy")[0] == "gemini://a.test/stops.gmi"


def test_a_title_from_toml_front_matter_on_one_line(conn: sqlite3.Connection) -> None:
    (result,) = search(conn, "retropie", 10)
    assert result.title == "WebKit weekly report #36"


@pytest.mark.parametrize("engine", ["tantivy", "fts5"])
def test_highlights_hold_the_word_alone_and_its_stem(conn: sqlite3.Connection, engine: str) -> None:
    (result,) = search(conn, "retropie gardens", 10, engine=engine)
    shown = render_marks(result.snippet, "[", "]")
    assert "[RetroPie], and the [gardens] of WebKit" in shown
    terms = list(parse_query("garden").groups[0])
    assert render_marks(text_snippet("The gardens grew.", terms), "[", "]") == (
        "The [gardens] grew."
    )
    terms = list(parse_query("gärten").groups[0])
    assert render_marks(text_snippet("Unser Garten.", terms, lang="de"), "[", "]") == (
        "Unser [Garten]."
    )


def test_first_words_snippets_end_at_a_word(conn: sqlite3.Connection) -> None:
    (result,) = search(conn, "inurl:long", 10)  # no searched word in its text
    assert result.snippet.endswith("…")
    assert len(result.snippet) <= PLAIN_SNIPPET_CHARS + 1
    assert LONG.startswith(result.snippet[:-1])
    assert LONG[len(result.snippet) - 1] == " "  # cut before a space: a whole word
    assert plain_snippet("short text") == "short text"
    assert plain_snippet("x" * 300) == "x" * PLAIN_SNIPPET_CHARS + "…"
