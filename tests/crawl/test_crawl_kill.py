"""kill -9 at random moments, resume, compare with an uninterrupted crawl.

The crawl runs in a subprocess against a scripted site whose access log is written as
each request arrives. After every kill the test notes which requests were on the wire
(received by the site, not committed to the database): those, and only those, may be
received again after the restart, once per kill that caught them.
"""

import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from geminibot.index import search

SCRIPT = Path(__file__).with_name("crawl_fakes.py")
#: Bounds on the kill loop (each run is a fraction of a second).
MAX_KILLS = 8
RUN_TIMEOUT = 60.0


def run_crawl(db: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(SCRIPT), str(db), str(log)])


def lines(log: Path) -> int:
    return log.read_bytes().count(b"\n") if log.exists() else 0


def committed(db: Path) -> Counter[str]:
    conn = sqlite3.connect(db)
    try:
        return Counter(u for (u,) in conn.execute("SELECT url FROM fetches"))
    finally:
        conn.close()


def index_of(db: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT p.url, p.status, p.mime, p.size, p.content_hash, p.title, p.duplicate_of,"
            " p.redirect_to, (SELECT group_concat(target, ' ') FROM links WHERE page_id = p.id),"
            " f.body FROM pages p LEFT JOIN pages_fts f ON f.rowid = p.id ORDER BY p.url"
        ).fetchall()
    finally:
        conn.close()


def test_kill_nine_and_resume(tmp_path: Path) -> None:
    rng = random.Random(20261123)
    whole_db, whole_log = tmp_path / "whole.db", tmp_path / "whole.log"
    assert run_crawl(whole_db, whole_log).wait(RUN_TIMEOUT) == 0
    expected = whole_log.read_text().split()
    assert len(expected) == len(set(expected)) > 90

    db, log = tmp_path / "killed.db", tmp_path / "killed.log"
    allowed_repeats: Counter[str] = Counter()
    kills = 0
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        before = lines(log)
        proc = run_crawl(db, log)
        if kills < MAX_KILLS:
            # a random point: after a random number of new requests, plus a random instant
            target = before + rng.randint(1, 15)
            while lines(log) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.03))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                received = Counter(log.read_text().split())
                on_the_wire = received - committed(db)
                allowed_repeats.update(on_the_wire.keys())
                continue
        assert proc.wait(RUN_TIMEOUT) == 0
        break
    assert kills >= MAX_KILLS - 1, "the crawl finished before it could be killed enough times"

    got = Counter(log.read_text().split())
    assert set(got) == set(expected)  # no URL lost
    for url, n in got.items():  # none fetched twice, unless it was on the wire at a kill
        assert n <= 1 + allowed_repeats[url], url
    assert index_of(db) == index_of(whole_db)  # the same index
    conn = sqlite3.connect(db)
    assert sorted(r.url for r in search(conn, "word7")) == sorted(
        r.url for r in search(sqlite3.connect(whole_db), "word7")
    )
    assert conn.execute("SELECT count(*) FROM urls WHERE state = 'leased'").fetchone()[0] == 0
