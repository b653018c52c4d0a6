"""A page's language (geminibot.index.languages) and how the index uses it: decided at
build and by an updater alike, its stems searched, ``lang:CODE`` kept to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from pages import gemtext_page

from geminibot.index import search
from geminibot.index.languages import MIN_DETECT_CHARS, detect, page_language, primary
from geminibot.index.query import QueryMalformed, parse_query
from geminibot.index.tantivy_index import open_current, rebuild
from geminibot.index.updater import IndexUpdater
from geminibot.store.db import connect, transaction
from geminibot.store.pages import store_page

GERMAN = (
    "Im Frühling haben wir den Garten hinter dem Haus umgegraben und neue Beete angelegt. "
    "Die Kinder haben Kartoffeln, Bohnen und Sonnenblumen gepflanzt, und jeden Abend "
    "wird gegossen, damit die Pflanzen im Sommer gut wachsen können. "
)
FRENCH = (
    "Nous avons passé la semaine à marcher le long du fleuve, à manger du pain et du "
    "fromage dans de petits cafés, et chaque soir nous montions quelque part en hauteur "
    "pour regarder les lumières de la ville endormie. "
)


def test_primary_subtag_and_mime_first() -> None:
    assert primary("de-CH") == "de" and primary("EN_gb") == "en"
    assert primary("") is None and primary("x1") is None and primary(None) is None
    assert page_language("fr-CA,en", GERMAN) == "fr"  # the MIME type says so
    assert page_language(None, GERMAN) == "de"
    assert page_language(None, FRENCH) == "fr"


def test_too_short_a_text_has_no_language() -> None:
    assert detect("Garten " * ((MIN_DETECT_CHARS - 1) // 7)) is None


def test_query_lang() -> None:
    assert parse_query("lang:DE-at garten").lang == "de"
    assert parse_query("garten lang:fr").lang == "fr"
    with pytest.raises(QueryMalformed, match="not -lang:"):  # one language is kept
        parse_query("garten -lang:fr")
    assert parse_query("language: garten").lang is None


def put(conn: sqlite3.Connection, url: str, text: str, lang: str | None = None) -> None:
    with transaction(conn):
        store_page(conn, gemtext_page(url, "", text, lang=lang), "indexer")


def urls(conn: sqlite3.Connection, query: str) -> list[str]:
    return [r.url for r in search(conn, query, limit=10, engine="tantivy")]


def test_an_updater_decides_languages_as_a_rebuild_does(tmp_path: Path) -> None:
    conn = connect(tmp_path / "crawl.db")
    put(conn, "gemini://de.test/", GERMAN)
    rebuild(conn)
    index = open_current(conn)
    assert index is not None and index.languages == ("de",)
    with IndexUpdater(conn) as updater:
        put(conn, "gemini://fr.test/", FRENCH)
        put(conn, "gemini://tagged.test/", "Gärten " * 5, lang="de")  # short, but tagged
        assert updater.step() == 2
    index = open_current(conn)
    assert index is not None and set(index.languages) == {"de", "fr"}
    assert urls(conn, "lang:fr fromage") == ["gemini://fr.test/"]
    assert urls(conn, "lang:de fromage") == []
    assert sorted(urls(conn, "lang:de Garten")) == ["gemini://de.test/", "gemini://tagged.test/"]
    assert [r.lang for r in search(conn, "fromage", 10)] == ["fr"]  # detected, shown
