"""Link authority on both stores (``store`` and ``db`` are parametrised: SQLite and
PostgreSQL): one TrustRank computation over the graph either store holds, written back
to it, and both searches rank by it; computed again on a schedule (a fake clock) and by
``geminibot index authority``. The case is the link farm of
tests/index/test_index_tantivy.py: five hosts linking only to each other, whose text
alone wins a search, and a good host that a trusted seed links to."""

from __future__ import annotations

import json
from typing import Any

import pytest
from db_rows import reading
from test_store import decision

from geminibot.cli import main
from geminibot.index.authority import compute_authority
from geminibot.index.authority_job import Reach, refresh, schedule, store_reach
from geminibot.index.search_cli import search_function
from geminibot.store.authority import last_computed, write_postgres, write_sqlite
from geminibot.store.crawlstore import CrawlStore, FetchedPage, FetchRecord, HostState
from geminibot.store.database import open_database
from geminibot.store.pages import Link, Page
from geminibot.store.pg import is_postgres

SEED, GOOD = "gemini://seed.test/", "gemini://good.test/"
FARM = [f"gemini://farm{n}.test/" for n in range(5)]


def put(store: CrawlStore, url: str, title: str, text: str, links: list[str]) -> None:
    host = url.split("/")[2]
    assert store.lease_host(host, "me") is not None
    claimed = store.claim(host, "me")
    assert claimed is not None and claimed.url == url
    p = Page(
        url=url,
        host=host,
        status=20,
        meta="text/gemini",
        fetched_at=10.0,
        size=len(text),
        mime="text/gemini",
        content_hash=f"h-{url}",
        title=title,
        text=text,
        links=tuple(Link(t, "casino") for t in links),
    )
    state = HostState(last_end=10.5, last_duration=0.5, not_before=12.0, slow_downs=0)
    record = FetchRecord(url, host, 20, "text/gemini", None, 10.0, 0.5, state)
    store.fetched(FetchedPage(decision(url, host=host), record, p, "indexer", []))


def farm(store: CrawlStore) -> None:
    store.seed([SEED, GOOD, *FARM])
    put(store, SEED, "Seed", "start", [GOOD])
    put(store, GOOD, "Casino guide", "casino history, once", [])
    for url in FARM:
        put(store, url, "casino casino casino", "casino " * 50, [u for u in FARM if u != url])


def writer(db: str) -> Any:
    return write_postgres if is_postgres(db) else write_sqlite


def scores(conn: Any) -> dict[str, float]:
    return {u: float(s) for u, s in conn.execute("SELECT url, score FROM authority").fetchall()}


def test_authority_reorders_search_on_both_stores(store: CrawlStore, db: str) -> None:
    farm(store)
    with reading(db) as (conn, search):
        assert search(conn, "casino", 10)[0].url in FARM  # text alone: the farm wins
        compute_authority(conn, [], None, writer(db))  # plain PageRank: fooled
        plain = scores(conn)
        assert plain[FARM[0]] > plain[GOOD]
        summary = compute_authority(conn, [SEED], None, writer(db))
        assert summary["trusted"] == 1 and summary["links"] == 21 and summary["hosts"] == 7
        trusted = scores(conn)
        assert len(trusted) == 7
        assert trusted[FARM[0]] < 1e-9 and trusted[GOOD] > 1
        assert search(conn, "casino", 10)[0].url == GOOD


def test_search_without_authority_is_text_alone(store: CrawlStore, db: str) -> None:
    from geminibot.index import search
    from geminibot.index.pg_search import search as pg_search

    farm(store)
    with reading(db) as (conn, _):
        compute_authority(conn, [SEED], None, writer(db))
        find = pg_search if is_postgres(db) else search
        assert find(conn, "casino", 10)[0].url == GOOD
        assert find(conn, "casino", 10, authority=False)[0].url in FARM


def test_cli_rebuild_trusts_the_seeds(
    store: CrawlStore, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    farm(store)
    with reading(db) as (conn, _):
        conn.execute("UPDATE urls SET depth = 1 WHERE url <> 'gemini://seed.test/'")
        if not is_postgres(db):
            conn.commit()
    assert main(["index", "rebuild", "--db", db, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["hosts"] == 7 and summary["trusted_hosts"] == 1
    assert main(["search", "casino", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"   {GOOD}"


@pytest.mark.parametrize("action", ["status", "update"])
def test_pg_has_no_tantivy_index_in_one_clear_line(
    action: str, pg_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", action, "--db", pg_db]) == 2
    err = capsys.readouterr().err
    assert "no tantivy index" in err and "GIN index" in err and len(err.splitlines()) == 1, err


def test_authority_is_computed_again_at_its_interval_on_both_stores(
    store: CrawlStore, db: str
) -> None:
    farm(store)
    now = [5000.0]
    runs: list[tuple[float, float | None]] = []

    def job() -> bool:
        done = refresh(database, [SEED]) is not None
        runs.append((now[0], last_computed(database)))
        return done

    def wait(seconds: float) -> None:
        now[0] += seconds

    with open_database(db) as database:
        conn, search = database.connection, search_function(database)
        assert last_computed(conn) is None
        assert search(conn, "casino", 10)[0].url in FARM
        schedule(job, 600.0, None, lambda: len(runs) == 3, wait, lambda: now[0])
        assert [at for at, _ in runs] == [5000.0, 5600.0, 6200.0]
        stamps = [stamp for _, stamp in runs]
        assert all(stamp is not None for stamp in stamps)
        assert sorted(set(stamps)) == stamps  # each run wrote the store again
        assert search(conn, "casino", 10)[0].url == GOOD


def test_cli_authority_on_both_stores(
    store: CrawlStore, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    farm(store)
    assert main(["index", "authority", "--db", db, "--trust", SEED, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["hosts"] == 7 and summary["trusted_hosts"] == 1
    assert summary["applied_to"] == ("postgresql" if is_postgres(db) else "no search index yet")
    assert main(["search", "casino", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"   {GOOD}"


def test_a_scheduled_run_that_fails_says_so_and_a_lost_connection_ends_it(
    store: CrawlStore, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    import psycopg

    from geminibot.cliutil import CommandError
    from geminibot.index.cli import scheduled_run

    farm(store)
    args = argparse.Namespace(db=db, trust=[], trust_all=True, json=True)
    with open_database(db) as database:
        conn = database.connection
        assert scheduled_run(args, database)
        assert json.loads(capsys.readouterr().out)["hosts"] == 7
        if database.sqlite is not None:
            conn.execute("ALTER TABLE links RENAME TO links_away")  # a statement fails
            assert scheduled_run(args, database)  # reported; the next run is at the interval
            assert "no such table: links" in json.loads(capsys.readouterr().out)["error"]
            conn.execute("ALTER TABLE links_away RENAME TO links")
            return
        with psycopg.connect(db, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(CommandError, match="connection lost") as lost:
            scheduled_run(args, database)
        assert lost.value.exit_code == 1
        assert "error" in json.loads(capsys.readouterr().out)


def test_the_crawls_first_pass_is_read_alike_from_both_stores(store: CrawlStore, db: str) -> None:
    """The schedule's :class:`Reach` of either store: hosts known, those with a URL still
    waiting for its first visit, pages, and the pages the last computation ranked."""
    store.seed([SEED, GOOD])
    put(store, SEED, "Seed", "start", [GOOD])
    with open_database(db) as database:
        reach = store_reach(database, True)
        assert (reach.hosts, reach.waiting_hosts, reach.pages, reach.ranked) == (2, 1, 1, 0)
        assert not reach.first_pass_over()
        database.rollback()
    put(store, GOOD, "Casino guide", "casino history, once", [])
    with open_database(db) as database:
        assert store_reach(database, True).first_pass_over()
        refresh(database, [SEED])
        assert store_reach(database, False) == Reach(2, 2)
