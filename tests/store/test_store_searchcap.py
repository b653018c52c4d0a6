"""``geminibot serve-search`` on both stores (``store`` and ``db`` are parametrised:
SQLite and PostgreSQL): the capsule's handler over the connection and search function
that ``geminibot search`` uses (:func:`geminibot.index.search_cli.reading`) answers
every page alike; the command opens a PostgreSQL ``--db`` as it does a file."""

from __future__ import annotations

import socket
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from commands import answer_of
from test_store import A
from test_store_search import fill

from geminibot.cli import main
from geminibot.gemini.urls import parse_request
from geminibot.searchcap import SearchCapsule
from geminibot.store.crawlstore import CrawlStore

#: The wall-clock time /stats counts its ages at (seconds).
STATS_AT = 1.8e9


def ask(capsule: SearchCapsule, path_query: str) -> tuple[int, str, str]:
    answer = answer_of(capsule, parse_request(f"gemini://search.test{path_query}\r\n".encode()))
    body = answer.read_body().decode("utf-8") if answer.status == 20 else ""
    return answer.status, answer.meta, body


def pages(store: CrawlStore, db: str) -> dict[str, Any]:
    fill(store)
    assert store.check_settings({"role": "indexer", "agent": "mybot"}) is None
    # (/stats's ages counted at one moment for both stores, not at two of the real clock)
    with closing(SearchCapsule.of(db, wall_clock=lambda: STATS_AT)) as capsule:
        return {
            path: ask(capsule, path)
            for path in (
                "/search?crawler",
                "/search/2?crawler",
                "/search?-only",
                f"/backlinks?{A}",
                "/hosts",
                "/hosts/2",
                "/stats",
                "/about",
            )
        }


def test_every_page_answers_alike(store: CrawlStore, db: str) -> None:
    got = pages(store, db)
    status, _, body = got["/search?crawler"]
    assert status == 20 and "Results 1-2:" in body
    assert f"=> {A}crawler Crawlers\na.test · " in body
    assert "⟦crawler⟧" in body.split(f"=> {A}crawler", 1)[1]
    assert "No results from 11 on." in got["/search/2?crawler"][2]
    assert got["/search?-only"][0] == 10 and "nothing to search for" in got["/search?-only"][1]
    backlinks = got[f"/backlinks?{A}"][2]
    assert f"# Links to {A}" in backlinks
    assert backlinks.count("linked as: home") == 3  # the image keeps no link text
    assert f"=> {A}img.png {A}img.png\n=> " in backlinks.replace("\n\n", "\n")
    assert f"=> {A}garden Garden log" in backlinks
    hosts = got["/hosts"][2]
    assert "=> gemini://a.test/ a.test: last seen 1970-01-01 00:00 UTC, 4 pages" in hosts
    assert got["/hosts/2"][0] == 51
    assert "pages      4 (3 with searchable text, 0 duplicates)" in got["/stats"][2]
    assert "User-agent: mybot\nDisallow: /" in got["/about"][2]


def test_both_stores_serve_the_same_pages(tmp_path: Path, pg_db: str) -> None:
    """The same crawl in each store: every page but /stats's timing is byte for byte
    the same (the search order is the same best-first order)."""
    from store_helpers import LIMITS, Clock

    from geminibot.store.crawlstore import SqliteStore
    from geminibot.store.db import connect
    from geminibot.store.pgstore import PgStore

    sqlite_conn = connect(tmp_path / "crawl.db")
    sqlite = pages(SqliteStore(sqlite_conn, Clock(), LIMITS), str(tmp_path / "crawl.db"))
    sqlite_conn.close()
    pg = PgStore(pg_db, Clock(), LIMITS, lease_seconds=30)
    try:
        postgres = pages(pg, pg_db)
    finally:
        pg.close()
    for path, answer in sqlite.items():
        if path != "/search?crawler":  # snippets are cut by each engine its own way
            assert postgres[path] == answer, path
    order = [line for line in sqlite["/search?crawler"][2].splitlines() if line.startswith("=>")]
    assert [
        line for line in postgres["/search?crawler"][2].splitlines() if line.startswith("=>")
    ] == order


def test_cli_serves_a_postgresql_database(
    store: CrawlStore, db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command opens the database, then meets a port in use: the one line and exit 2
    of the SQLite case, so the PostgreSQL store reached the server."""
    fill(store)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["serve-search", "--db", db, "--certs", str(tmp_path / "c"), "--port", str(port)]
        assert main(args) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1 port {port}" in err and len(err.splitlines()) == 1, err
