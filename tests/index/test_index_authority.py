"""Link authority computed again and applied to search without a rebuild: new weights
reorder the results while no document of the tantivy index is added or removed; a page
the updater adds has its host's current weight; ``index status`` says when authority was
computed and whether search applies it; the schedule fires at its interval (fake clock);
``geminibot index authority`` once and its errors."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from commands import run_main
from pages import gemtext_page

from geminibot.index import search
from geminibot.index.authority import compute_authority
from geminibot.index.authority_job import (
    FIRST_PASS_POLL,
    GROWTH,
    IDLE_RETRY,
    POLL_SHARE,
    READY_SHARE,
    Reach,
    refresh,
    schedule,
    store_reach,
)
from geminibot.index.tantivy_index import (
    apply_weights,
    index_dir,
    open_current,
    rebuild,
    status,
)
from geminibot.index.updater import IndexUpdater
from geminibot.index.weights import WEIGHTS_FILE, HostWeights, host_key, read_weights
from geminibot.store.authority import last_computed
from geminibot.store.database import open_database
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Link, store_page


def put(conn: sqlite3.Connection, url: str, text: str, links: tuple[str, ...] = ()) -> None:
    with transaction(conn):
        page = gemtext_page(url, "", text, links=tuple(Link(t, "") for t in links))
        store_page(conn, page, "indexer")


@pytest.fixture
def db(tmp_path: Path) -> sqlite3.Connection:
    """kettle: a.test's page says it most; b.test's less, but three hosts link to b.test."""
    conn = connect(tmp_path / "crawl.db")
    put(conn, "gemini://a.test/", "kettle kettle kettle steam")
    put(conn, "gemini://b.test/", "kettle kettle steam steam")
    for n in range(3):
        put(conn, f"gemini://fan{n}.test/", "a fan page", ("gemini://b.test/",))
    return conn


def refresh_on(conn: sqlite3.Connection) -> dict[str, object] | None:
    """:func:`refresh` (plain PageRank) on the database of ``conn``."""
    with open_database(str(conn.execute("PRAGMA database_list").fetchone()[2])) as database:
        return refresh(database, [])


def urls(conn: sqlite3.Connection, query: str = "kettle") -> list[str]:
    return [r.url for r in search(conn, query, engine="tantivy")]


def index_files(conn: sqlite3.Connection) -> dict[str, bytes]:
    """The tantivy index's own files (its segments and meta.json, which records every
    commit's opstamp): equal before and after means no document was added or deleted."""
    folder = index_dir(Path(str(conn.execute("PRAGMA database_list").fetchone()[2])))
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != WEIGHTS_FILE
    }


def test_new_weights_reorder_results_without_touching_the_text_index(
    db: sqlite3.Connection,
) -> None:
    rebuild(db)  # no authority yet: text alone
    assert urls(db) == ["gemini://a.test/", "gemini://b.test/"]
    opened = open_current(db)
    before = index_files(db)
    summary = refresh_on(db)  # plain PageRank: b.test is linked, a.test is not
    assert summary is not None and summary["applied_to"] == "search index"
    assert urls(db) == ["gemini://b.test/", "gemini://a.test/"]
    assert index_files(db) == before  # not one document re-added: same commit, same files
    assert open_current(db) is opened  # the same open index, reading the newest weights
    # Weights that change again apply again, both ways.
    with transaction(db):
        db.execute("UPDATE authority SET weight = 1.0")
        db.execute("UPDATE authority SET weight = 4.0 WHERE url = 'gemini://a.test/'")
    assert urls(db) == ["gemini://b.test/", "gemini://a.test/"]  # not applied yet
    assert apply_weights(db) == 5
    assert urls(db) == ["gemini://a.test/", "gemini://b.test/"]
    assert index_files(db) == before


def test_a_page_the_updater_adds_has_its_hosts_current_weight(db: sqlite3.Connection) -> None:
    rebuild(db)
    refresh_on(db)
    put(db, "gemini://b.test/more.gmi", "kettle kettle steam steam")
    with IndexUpdater(db) as updater:
        assert updater.catch_up() == 1
    assert urls(db)[:2] == ["gemini://b.test/", "gemini://b.test/more.gmi"]
    # A host the last computation did not know weighs 1.0, as a host without links.
    put(db, "gemini://new.test/", "kettle kettle steam steam")
    with IndexUpdater(db) as updater:
        updater.catch_up()
    assert urls(db)[-1] == "gemini://new.test/"
    assert search(db, "kettle", engine="tantivy", authority=False)[1].url != "gemini://new.test/"


def test_status_says_when_authority_was_computed_and_whether_search_applies_it(
    db: sqlite3.Connection, tmp_path: Path
) -> None:
    rebuild(db)
    assert status(db)["authority"] == {
        "computed_at": None,
        "applied_at": None,
        "hosts": 0,
        "current": False,
    }
    refresh_on(db)
    state = status(db)["authority"]
    assert isinstance(state, dict)
    assert state["current"] and state["hosts"] == 5
    assert state["computed_at"] == state["applied_at"] == last_computed(db)
    compute_authority(db, [])  # into the store only: search still applies the older one
    state = status(db)["authority"]
    assert isinstance(state, dict) and not state["current"]
    assert state["computed_at"] != state["applied_at"]
    done = run_main(["index", "status", "--db", str(tmp_path / "crawl.db")])
    assert done.returncode == 0
    assert "link authority: computed" in done.stdout
    assert "search applies the one of" in done.stdout


def test_the_schedule_fires_at_its_interval_on_a_fake_clock() -> None:
    now = [1000.0]
    ran: list[float] = []

    def wait(seconds: float) -> None:
        now[0] += seconds

    def job(result: bool = True) -> bool:
        ran.append(now[0])
        return result

    def after(count: int) -> object:
        return lambda: len(ran) >= count

    assert schedule(job, 3600.0, None, after(3), wait, lambda: now[0]) == 3
    assert ran == [1000.0, 4600.0, 8200.0]  # never computed: at once, then each hour
    ran.clear()
    schedule(job, 3600.0, now[0] - 600.0, after(2), wait, lambda: now[0])
    assert ran == [8200.0 + 3000.0, 8200.0 + 6600.0]  # due an hour after the last one
    ran.clear()
    start = now[0]
    schedule(lambda: job(False), 3600.0, None, after(2), wait, lambda: now[0])
    assert ran == [start, start + IDLE_RETRY]  # nothing to do yet: tried again sooner
    ran.clear()
    start = now[0]
    schedule(job, 3600.0, start + 1e6, after(1), wait, lambda: now[0])
    assert ran == [start + 3600.0]  # a last time in the future waits one interval only


def test_the_first_computation_waits_for_the_crawls_first_pass() -> None:
    """Never computed: not while hosts the crawl knows still wait for their first visit
    (the first hosts fetched would rank high until the next run), asked each
    FIRST_PASS_POLL on a fake clock; then on schedule, and at the next look (each
    IDLE_RETRY) when the store grows GROWTH-fold."""
    now = [0.0]
    ran: list[float] = []
    store = {"hosts": 29, "waiting": 28, "pages": 10, "ranked": 0}
    asked: list[bool] = []

    def reach(first: bool) -> Reach:
        asked.append(first)
        if not first:
            return Reach(store["pages"], store["ranked"])
        return Reach(store["pages"], store["ranked"], store["hosts"], store["waiting"])

    def wait(seconds: float) -> None:
        now[0] += seconds
        if now[0] >= 300.0 and store["waiting"] > 1:  # round all but one host of 29
            store["waiting"], store["pages"] = 1, 400

    def job() -> bool:
        ran.append(now[0])
        store["ranked"] = store["pages"]
        if len(ran) == 2:  # the crawl takes in a capsule four times the store's size
            store["pages"] *= int(GROWTH)
        return True

    schedule(job, 3600.0, None, lambda: len(ran) >= 3, wait, lambda: now[0], reach)
    assert ran[0] == 300.0  # 28 of 29 hosts: past READY_SHARE, not before
    assert ran[1] == 3900.0  # then at its interval
    assert ran[2] == 3900.0 + IDLE_RETRY  # grown fourfold: at the next look, not an hour on
    polls = int(300.0 / FIRST_PASS_POLL) + 1
    assert asked[:polls] == [True] * polls and not any(asked[polls:])  # until the first only


def test_a_slow_look_at_the_first_pass_is_made_less_often() -> None:
    """A look that takes 1 s (a large store's scan of its queue) is made every 20 s, so
    that the looks take POLL_SHARE of the time at most; the first look, which pays for
    the process's start (statements compiled, caches cold), does not count."""
    now = [0.0]
    looks: list[float] = []

    def reach(first: bool) -> Reach:
        looks.append(now[0])
        now[0] += 1.0
        return Reach(10, 0, 10, 5)

    def wait(seconds: float) -> None:
        now[0] += seconds

    schedule(lambda: True, 3600.0, None, lambda: len(looks) >= 3, wait, lambda: now[0], reach)
    assert looks == [0.0, 6.0, 27.0] and POLL_SHARE == 0.05 and FIRST_PASS_POLL == 5.0


def test_reach_read_from_a_store(db: sqlite3.Connection, tmp_path: Path) -> None:
    """The hosts known (``hosts``) and those with a URL queued that was never visited
    (``next_visit`` is NULL until the first visit)."""
    with transaction(db):
        for n in range(10):
            db.execute("INSERT INTO hosts (host, first_seen) VALUES (?, 0)", (f"h{n}.test",))
        for url, host, visit in (
            ("gemini://h0.test/new", "h0.test", None),
            ("gemini://h1.test/new", "h1.test", None),
            ("gemini://h1.test/two", "h1.test", None),
            ("gemini://h2.test/again", "h2.test", 5.0),  # a revisit: not a first pass
        ):
            db.execute(
                "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at,"
                " next_visit) VALUES (?, ?, '/', 0, 0, 'queued', 0, ?)",
                (url, host, visit),
            )
    with open_database(str(tmp_path / "crawl.db")) as database:
        reach = store_reach(database, True)
        assert (reach.hosts, reach.waiting_hosts, reach.pages, reach.ranked) == (10, 2, 5, 0)
        assert not reach.first_pass_over()  # 8 of 10 < READY_SHARE
        assert Reach(5, 0, 10, 1).first_pass_over() and READY_SHARE == 0.9
        assert store_reach(database, False) == Reach(5, 0)
        compute_authority(db)
        ranked = store_reach(database, False)
        assert ranked.ranked == 5 and not ranked.grown()


def test_host_weights_follow_the_file_as_it_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / WEIGHTS_FILE
    weights = HostWeights(path)
    assert weights.current() is None
    path.write_text(json.dumps({"format": 1, "computed_at": 5.0, "hosts": {"a.test": 2.0}}))
    first = weights.current()
    assert first is not None and first.of(host_key("a.test")) == 2.0
    assert first.of(host_key("b.test")) == 1.0
    assert weights.current() is first  # unchanged: not read again
    part = tmp_path / "part"
    part.write_text(json.dumps({"format": 1, "computed_at": 6.0, "hosts": {"a.test": 3.0}}))
    part.replace(path)
    second = weights.current()
    assert second is not None and second.of(host_key("a.test")) == 3.0
    for damaged in ("{", "[]", '{"format": 99}', '{"format": 1, "hosts": {"a": "x"}}'):
        path.write_text(damaged)
        assert read_weights(path) is None and weights.current() is None


def test_cli_authority_once(db: sqlite3.Connection, tmp_path: Path) -> None:
    path = str(tmp_path / "crawl.db")
    done = run_main(["index", "authority", "--db", path, "--trust-all", "--json"])
    assert done.returncode == 0
    summary = json.loads(done.stdout)
    assert summary["hosts"] == 5 and summary["applied_to"] == "no search index yet"
    rebuild(db)
    done = run_main(["index", "authority", "--db", path, "--trust-all"])
    assert done.returncode == 0 and "applied to search index" in done.stdout
    assert len(done.stdout.splitlines()) == 1
    assert urls(db)[0] == "gemini://b.test/"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--every", "0"], "0 must be a number above 0"),
        (["--every", "nan"], "nan must be a number above 0"),
        (["--trust", "gemini://a.test/", "--trust-all"], "exclude each other"),
    ],
)
def test_cli_authority_errors_are_one_line(
    db: sqlite3.Connection, tmp_path: Path, args: list[str], message: str
) -> None:
    done = run_main(["index", "authority", "--db", str(tmp_path / "crawl.db"), *args])
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_cli_authority_of_an_empty_store_says_so(tmp_path: Path) -> None:
    connect(tmp_path / "empty.db").close()
    done = run_main(["index", "authority", "--db", str(tmp_path / "empty.db")])
    assert done.returncode == 1 and "no pages with text to rank yet" in done.stderr


def test_sqlite_writes_authority_in_chunks_and_drops_the_rows_of_pages_gone(
    db: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geminibot.store import authority

    compute_authority(db, [])
    whole = dict(db.execute("SELECT url, weight FROM authority").fetchall())
    with transaction(db):
        db.execute("INSERT INTO authority VALUES ('gemini://gone.test/', 9.0, 9.0)")
        db.execute("UPDATE authority SET weight = 0.5")
    monkeypatch.setattr(authority, "WRITE_CHUNK", 2)  # 5 pages: three transactions
    compute_authority(db, [])
    assert dict(db.execute("SELECT url, weight FROM authority").fetchall()) == whole
    assert not db.in_transaction
    assert db.execute("SELECT count(*) FROM temp.sqlite_master").fetchone()[0] == 0
