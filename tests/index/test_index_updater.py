"""The derived index following the store: changes applied in small commits, searched at
once, safe to apply twice (catch-up after a crash), checked by ``index status --verify``."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from commands import run_main
from pages import gemtext_page

from geminibot.index import search
from geminibot.index import updater as updater_module
from geminibot.index.tantivy_index import (
    FOLLOW_GRACE,
    IndexUnavailable,
    db_path_of,
    index_dir,
    is_followed,
    open_current,
    read_manifest,
    rebuild,
    status,
    write_manifest,
)
from geminibot.index.updater import COMMIT_PAGES, IndexUpdater, follow, verify
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Link, store_page


def put(
    conn: sqlite3.Connection, url: str, title: str, text: str, links: tuple[Link, ...] = ()
) -> None:
    with transaction(conn):
        store_page(conn, gemtext_page(url, title, text, links=links), "indexer")


def urls(conn: sqlite3.Connection, query: str) -> list[str]:
    return [r.url for r in search(conn, query, limit=50, engine="tantivy")]


@pytest.fixture
def db(tmp_path: Path) -> sqlite3.Connection:
    conn = connect(tmp_path / "crawl.db")
    put(conn, "gemini://a.test/kettle.gmi", "Kettles", "a copper kettle whistles")
    put(
        conn,
        "gemini://b.test/",
        "Links",
        "links",
        (Link("gemini://a.test/kettle.gmi", "teapot lore"),),
    )
    put(conn, "gemini://c.test/orbit.gmi", "Orbits", "an orbit of the moon")
    return conn


def test_a_transaction_of_new_pages_is_logged_and_writes_one_text_segment(
    tmp_path: Path,
) -> None:
    """The change log is written without an insert trigger: a trigger's savepoint would make
    FTS5 write a segment per page instead of one per transaction."""
    conn = connect(tmp_path / "crawl.db")
    with transaction(conn):
        for i in range(20):
            page = gemtext_page(f"gemini://a.test/{i}.gmi", f"Page {i}", f"word{i} text")
            store_page(conn, page, "indexer")
    assert conn.execute("SELECT count(*) FROM index_changes").fetchone()[0] == 20
    segments = conn.execute("SELECT count(DISTINCT segid) FROM pages_fts_idx").fetchone()[0]
    assert segments == 1


def test_an_updater_builds_the_missing_index_then_applies_each_change(
    db: sqlite3.Connection,
) -> None:
    with IndexUpdater(db) as updater:
        assert status(db)["current"] is True
        assert urls(db, "kettle") == ["gemini://a.test/kettle.gmi"]  # searched: cached
        put(db, "gemini://a.test/kettle.gmi", "Kettles", "a brass samovar hums")
        put(db, "gemini://d.test/new.gmi", "New", "a sextant arrives")
        assert status(db)["pending"] == 3  # replaced (out, in), added
        assert updater.step() == 3
        # The same process's search reads the new commit without reopening anything.
        assert urls(db, "samovar") == ["gemini://a.test/kettle.gmi"]
        assert urls(db, "copper") == []
        assert urls(db, "sextant") == ["gemini://d.test/new.gmi"]
        # The link text from b.test came along with the page's new copy.
        assert urls(db, "teapot") == ["gemini://a.test/kettle.gmi"]
        assert updater.step() == 0
    assert db.execute("SELECT count(*) FROM index_changes").fetchone()[0] == 0  # forgotten
    assert verify(db)["agree"] is True


def test_gone_and_delisted_pages_leave_the_index(db: sqlite3.Connection) -> None:
    with IndexUpdater(db) as updater:
        with transaction(db):
            db.execute("DELETE FROM pages WHERE url = 'gemini://c.test/orbit.gmi'")
            db.execute(
                "UPDATE pages SET text_indexed = 0, title = '' WHERE url = ?",
                ("gemini://a.test/kettle.gmi",),
            )
            db.execute("DELETE FROM pages_fts WHERE rowid = 1")
        assert updater.step() == 2
        assert urls(db, "orbit") == [] and urls(db, "kettle") == []
    check = verify(db)
    assert check["agree"] is True and check["index_pages"] == 1


def test_changes_arrive_in_commits_of_at_most_commit_pages(db: sqlite3.Connection) -> None:
    with IndexUpdater(db) as updater:
        with transaction(db):
            for n in range(COMMIT_PAGES + 5):
                store_page(db, gemtext_page(f"gemini://e.test/{n}", "", f"lichen {n}"), "indexer")
        assert updater.step() == COMMIT_PAGES
        assert status(db)["pending"] == 5
        assert updater.catch_up() == 5
    assert verify(db)["agree"] is True


def test_applying_changes_again_after_a_crash_loses_and_doubles_nothing(
    db: sqlite3.Connection, tmp_path: Path
) -> None:
    """A crash between the index's commit and its manifest: the next start applies the same
    changes again from the recorded one, and the index ends as the store is."""
    folder = index_dir(tmp_path / "crawl.db")
    with IndexUpdater(db) as updater:
        before = json.loads((folder / "manifest.json").read_text())
        put(db, "gemini://a.test/kettle.gmi", "Kettles", "a brass samovar hums")
        with transaction(db):
            db.execute("DELETE FROM pages WHERE url = 'gemini://c.test/orbit.gmi'")
        # The log rows stay (the crash came before forgetting them): keep a copy.
        log = db.execute("SELECT seq, page_id FROM index_changes").fetchall()
        assert updater.step() == 3
    write_manifest(folder, before)
    with transaction(db):
        db.executemany("INSERT INTO index_changes (seq, page_id) VALUES (?, ?)", log)
    assert verify(db)["agree"] is False  # pending again
    with IndexUpdater(db) as updater:
        assert updater.catch_up() == 3
    check = verify(db)
    assert check == {**check, "agree": True, "duplicated": 0}
    assert urls(db, "teapot") == ["gemini://a.test/kettle.gmi"]


def test_verify_finds_what_differs(db: sqlite3.Connection, tmp_path: Path) -> None:
    rebuild(db)
    with transaction(db):  # behind the change log's back
        db.execute("DROP TRIGGER pages_text_removed")
    put(db, "gemini://a.test/kettle.gmi", "Kettles", "unlogged")  # a new id, the old gone
    with transaction(db):
        db.execute("DELETE FROM index_changes")  # the insertion unlogged too
    check = verify(db)
    assert check["agree"] is False
    assert check["missing_count"] == 1 and check["extra_count"] == 1  # the old copy's id
    done = run_main(["index", "status", "--db", str(tmp_path / "crawl.db"), "--verify"])
    assert done.returncode == 1
    assert "1 page in the store, not the index" in done.stdout
    rebuild(db)  # the repair
    assert verify(db)["agree"] is True


def test_one_writer_at_a_time(db: sqlite3.Connection) -> None:
    with IndexUpdater(db), pytest.raises(IndexUnavailable, match="another process"):
        rebuild(db)
    rebuild(db)  # free again


def test_a_lagging_index_is_searched_while_followed_only(db: sqlite3.Connection) -> None:
    with IndexUpdater(db) as updater:
        put(db, "gemini://d.test/new.gmi", "New", "a sextant arrives")
        assert open_current(db) is None  # built, never committed to by an updater
        put(db, "gemini://d.test/other.gmi", "Other", "an almanac")
        updater.step()
        put(db, "gemini://d.test/third.gmi", "Third", "a lichen")
        assert status(db)["pending"] == 1 and status(db)["following"] is True
        assert open_current(db) is not None


def test_follow_applies_until_stopped(db: sqlite3.Connection) -> None:
    stop = threading.Event()
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:
            put(db, "gemini://d.test/new.gmi", "New", "a sextant arrives")
        else:
            stop.set()

    with IndexUpdater(db) as updater:
        assert follow(updater, stop.is_set, wait, 0.5) == 1
    assert waits == [0.5, 0.5]
    assert urls(db, "sextant") == ["gemini://d.test/new.gmi"]


def test_the_update_command_catches_up_and_stops_on_sigterm(
    db: sqlite3.Connection, tmp_path: Path
) -> None:
    path = str(tmp_path / "crawl.db")
    done = run_main(["index", "update", "--db", path, "--json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pages"] == 3
    put(db, "gemini://d.test/new.gmi", "New", "a sextant arrives")
    follower = subprocess.Popen(
        [sys.executable, "-m", "geminibot", "index", "update", "--db", path, "--follow", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(1200):  # it applies the page, then waits (a minute at most)
            if not status(db)["pending"] or follower.poll() is not None:
                break
            threading.Event().wait(0.05)
    finally:
        os.kill(follower.pid, signal.SIGTERM)
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert json.loads(out)["applied"] == 1
    done = run_main(["index", "status", "--db", path, "--verify", "--json"])
    assert done.returncode == 0 and json.loads(done.stdout)["verify"]["agree"] is True


def test_an_idle_updater_still_says_it_follows(
    db: sqlite3.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing to apply, the updater beats (every HEARTBEAT): a change arriving after
    a long quiet spell finds the index still searched, not FTS5, until its commit."""
    monkeypatch.setattr(updater_module, "HEARTBEAT", 0.0)
    folder = index_dir(tmp_path / "crawl.db")
    with IndexUpdater(db) as updater:
        quiet = {**updater.manifest, "updated_at": time.time() - 10 * FOLLOW_GRACE}
        write_manifest(folder, quiet)
        updater.manifest = quiet
        waits: list[float] = []
        follow(updater, lambda: bool(waits), waits.append)
        put(db, "gemini://d.test/new.gmi", "New", "a sextant arrives")
        assert status(db)["pending"] == 1
        assert open_current(db) is not None  # followed: the lag lasts until the commit


def test_an_updater_says_it_follows_as_it_starts(db: sqlite3.Connection) -> None:
    """After a rebuild (whose manifest says nobody follows), the first change logged while
    the updater starts keeps searches on the index until its commit, not FTS5."""
    rebuild(db)
    assert not is_followed(read_manifest(index_dir(db_path_of(db))) or {}, time.time())
    with IndexUpdater(db) as updater:
        put(db, "gemini://d.test/new.gmi", "New", "a sextant arrives")
        assert open_current(db) is None  # behind, and nobody follows yet
        seen = []

        def stopping() -> bool:  # asked once it has started, before a step: stopped
            seen.append((status(db)["pending"], open_current(db) is not None))
            return True

        follow(updater, stopping, lambda _: None)
        assert seen == [(1, True)]
        assert status(db)["pending"] == 0  # a stop applies what the store committed


def test_a_store_locked_by_a_writer_does_not_stop_the_updater(
    db: sqlite3.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crawl holding the store's write lock past the busy timeout: the change is applied
    and recorded all the same; the log's applied rows are deleted at a later step."""
    with IndexUpdater(db) as updater:
        put(db, "gemini://d.test/new.gmi", "New", "a sextant arrives")
        writer = sqlite3.connect(tmp_path / "crawl.db", timeout=0)
        writer.execute("BEGIN IMMEDIATE")  # as a crawl's batch of writes does
        db.execute("PRAGMA busy_timeout = 10")
        try:
            assert updater.step() == 1
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        assert urls(db, "sextant") == ["gemini://d.test/new.gmi"]
        assert db.execute("SELECT count(*) FROM index_changes").fetchone()[0] == 1  # kept
        put(db, "gemini://d.test/other.gmi", "Other", "an almanac")
        assert updater.step() == 1
    assert db.execute("SELECT count(*) FROM index_changes").fetchone()[0] == 0
    assert verify(db)["agree"] is True


def test_status_says_an_updater_runs_from_its_lock_not_the_manifests_age(
    db: sqlite3.Connection, tmp_path: Path
) -> None:
    """While an updater holds the index, pending changes are "being applied"; once it is
    gone, its commit a moment ago does not make one up: no updater runs, and searches go
    to FTS5 when the grace after its last commit ends."""
    path = str(tmp_path / "crawl.db")
    with IndexUpdater(db) as updater:
        updater.beat()
        put(db, "gemini://d.test/new.gmi", "New", "a sextant arrives")
        held = run_main(["index", "status", "--db", path])
        assert "1 change pending, an updater is applying them" in held.stdout
        assert status(db)["following"] is True
    assert is_followed(read_manifest(index_dir(tmp_path / "crawl.db")) or {}, time.time())
    gone = run_main(["index", "status", "--db", path])
    assert gone.returncode == 1
    assert "(1 change pending, no updater runs): searches use FTS5 in" in gone.stdout
    assert status(db)["following"] is False
    assert 0 < float(str(status(db)["index_searched_for"])) <= FOLLOW_GRACE
    with IndexUpdater(db) as updater:
        updater.catch_up()
        put(db, "gemini://d.test/other.gmi", "Other", "an almanac")
        put(db, "gemini://d.test/third.gmi", "Third", "a lichen")
        assert "2 changes pending, an updater" in run_main(["index", "status", "--db", path]).stdout
