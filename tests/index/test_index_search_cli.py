"""``geminibot search`` and the search capsule on a small crawl of their own: queries that
start with ``-``, ``lang:CODE`` and stems in a page's language, an unlabeled link's words,
titles for every result."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

import pytest
import tantivy
from commands import answer_of, run_main

from geminibot.crawl.page import extract
from geminibot.gemini.urls import parse_request
from geminibot.index.search import search
from geminibot.index.search_cli import reader_language
from geminibot.index.tantivy_index import open_current, rebuild
from geminibot.searchcap import SearchCapsule
from geminibot.store.db import connect, transaction
from geminibot.store.pages import store_page

ENGLISH = (
    "We spent a week walking along the river, eating bread and cheese in small cafes, "
    "and every evening we climbed somewhere high to look at the lights of the city. "
)
GERMAN = (
    "Im Frühling haben wir den Garten hinter dem Haus umgegraben und neue Beete angelegt. "
    "Die Kinder haben Kartoffeln, Bohnen und Sonnenblumen gepflanzt, und jeden Abend "
    "wird gegossen, damit die Pflanzen im Sommer gut wachsen können. "
)
PAGES = {
    "gemini://en.test/trip.gmi": (
        f"# A week in Paris\n\n{ENGLISH * 2}\n=> /images/eiffel_outside.jpg\n"
        "=> gemini://os.test/beos_notes.gmi\n"
    ),
    "gemini://de.test/garten.gmi": f"# Unser Beet\n\n{GERMAN * 2}\n",
    "gemini://os.test/beos_notes.gmi": f"# An operating system\n\n{ENGLISH}\nabout BeOS\n",
    "gemini://os.test/haiku.gmi": f"# Haiku\n\n{ENGLISH}\nabout BeOS and Haiku\n",
    "gemini://os.test/untitled.gmi": "=> /a.gmi\n```\nbeos in ascii art\n```\n",
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("searchcli") / "crawl.db"
    conn = connect(path)
    with transaction(conn):
        for url, body in PAGES.items():
            page = extract(url, url.split("/")[2], 20, "text/gemini", body.encode(), 1.0).page
            store_page(conn, page, "indexer")
    rebuild(conn)
    conn.close()
    return path


def urls(db: Path, query: str, *extra: str) -> list[str]:
    found = run_main(["search", *extra, query, "--db", str(db), "--json"])
    assert found.returncode in (0, 1), found.stderr
    return [line.split('"url": "')[1].split('"')[0] for line in found.stdout.splitlines()]


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--", "-haiku", "beos", "--db"],
        ["search", "-haiku", "beos", "--db"],
        ["search", "beos", "-haiku", "--db"],
        ["search", "--db", "DB", "--", "-haiku", "beos"],
    ],
)
def test_a_query_may_start_with_a_dash(db: Path, argv: list[str]) -> None:
    argv = [str(db) if a == "DB" else a for a in argv]
    if argv[-1] == "--db":
        argv.append(str(db))
    found = run_main([*argv, "--json"])
    assert found.returncode == 0, found.stderr
    assert "os.test/beos_notes.gmi" in found.stdout and "haiku.gmi" not in found.stdout


def test_only_an_excluded_word_is_a_usage_error(db: Path) -> None:
    found = run_main(["search", "--", "-haiku", "--db", str(db)])
    assert found.returncode == 2 and "nothing to search for" in found.stderr
    assert run_main(["search", "-h"]).returncode == 0  # -h is still help


def test_unlabeled_link_words(db: Path) -> None:
    assert urls(db, "eiffel") == ["gemini://en.test/trip.gmi"]
    index = open_current(sqlite3.connect(db))
    assert index is not None
    searcher = index.index.searcher()
    linked = tantivy.Query.term_query(index.schema, "anchors", "beos")
    hits = searcher.search(linked, 10).hits
    assert len(hits) == 1  # link text of the target, from the other host's unlabeled link
    assert searcher.fast_field_values("id", [hits[0][1]])[0] is not None


def test_lang_filter_stems_and_note(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert urls(db, "lang:de Kinder") == ["gemini://de.test/garten.gmi"]
    assert urls(db, "lang:en Kinder") == []
    assert urls(db, "lang:de week") == []
    assert urls(db, "Gärten") == ["gemini://de.test/garten.gmi"]  # stem of "Garten"
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.setenv("LANG", "en_GB.UTF-8")
    shown = run_main(["search", "Kinder OR week", "--db", str(db)]).stdout
    assert "Unser Beet [de]" in shown and "A week in Paris\n" in shown
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    shown = run_main(["search", "Kinder OR week", "--db", str(db)]).stdout
    assert "Unser Beet\n" in shown and "A week in Paris [en]" in shown


def test_reader_language() -> None:
    assert reader_language({"LANG": "de_AT.UTF-8"}) == "de"
    assert reader_language({"LC_ALL": "C", "LANG": "fr_FR"}) == "fr"
    assert reader_language({}) == "en"


@pytest.mark.parametrize("engine", ["fts5", "tantivy"])
def test_every_result_has_a_title(db: Path, engine: str) -> None:
    conn = sqlite3.connect(db)
    results = search(conn, "beos", 10, engine=engine)
    assert {r.url for r in results} >= {"gemini://os.test/untitled.gmi"}
    assert all(r.title and len(r.title) <= 120 for r in results)
    assert next(r for r in results if r.url.endswith("untitled.gmi")).title == "untitled"


def capsule(db: Path, query: str) -> str:
    with closing(SearchCapsule.of(str(db))) as handler:
        answer = answer_of(
            handler, parse_request(f"gemini://s.test/search?{quote(query)}\r\n".encode())
        )
    return answer.body.decode() if answer.body else answer.meta


def test_the_capsule_reads_the_same_queries(db: Path) -> None:
    dashed = capsule(db, "-haiku beos")
    assert "=> gemini://os.test/beos_notes.gmi" in dashed and "haiku.gmi" not in dashed
    german = capsule(db, "lang:de Kinder")
    assert "=> gemini://de.test/garten.gmi Unser Beet [de]" in german
    assert "en.test" not in german
    assert "=> gemini://en.test/trip.gmi A week in Paris\n" in capsule(db, "eiffel")
