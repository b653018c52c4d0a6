"""kill -9 at random points, resume, compare with an uninterrupted crawl.

``geminibot crawl`` runs as a subprocess against the capsule server over generated
capsules, the server on a thread of this process (``capsule_server_thread``: the test is
about the crawl's process, not the server's); the server's access log counts the
requests. The uninterrupted crawl runs first, in this process (``commands.run_main``), on
the same server: the log's first lines are its; so does the run after the last kill. Each kill lands after a random number of new
requests plus a random instant. After every kill
the test notes which requests were on the wire or in the crawl's open batch of writes (in
the server's log, not yet committed to the crawl database: see
:class:`geminibot.store.crawlstore.SqliteStore`): those, and only those, may be received again
after the restart, once per kill that caught them. At the end: every URL of the uninterrupted crawl was
fetched, nothing else, nothing twice beyond that allowance, and the index is the same.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from commands import run_main
from loopback import open_connections, wait_connections_closed
from served_capsules import capsule_server_thread, generate, logged_in_full, requested_urls

from geminibot.store.crawlstore import BATCH_URLS

#: Kills per test (the first lands in the first run's open batch, the others in runs that
#: commit each claim), and a bound on each crawl (seconds).
KILLS = 4
DEADLINE = 90.0
#: Seconds the server may take to close (and log) the connections a kill cut.
SETTLE_LIMIT = 30.0
HOSTS, PAGES = 3, 60
#: Requests the crawl keeps in flight at once: the most one kill can cut off mid-way.
CONCURRENCY = 2
#: Seconds between two looks at the server's log while a run goes to its kill (each reads
#: and parses the whole log; the kill's moment is random anyway: a pause of up to 0.05 s
#: follows).
POLL = 0.02


def crawl_argv(db: Path, seeds: list[str], port: int) -> list[str]:
    argv = ["crawl", *seeds, "--db", str(db)]
    argv += ["--test-range", "--allow-host", "*.test", "--concurrency", str(CONCURRENCY)]
    return [*argv, "--connect-to", f"*.test:1965:127.0.0.1:{port}"]


def start_crawl(db: Path, seeds: list[str], port: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "geminibot", *crawl_argv(db, seeds, port)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def settled(log: Path, port: int) -> None:
    """Wait until the server has closed, and so logged, every connection of the killed
    crawl: none still open, and its log the same size on two looks."""
    deadline = time.monotonic() + SETTLE_LIMIT
    size = -1
    while time.monotonic() < deadline:
        wait_connections_closed(port, SETTLE_LIMIT)
        now = log.stat().st_size if log.exists() else 0
        if now == size and not open_connections(port):
            return
        size = now
        time.sleep(0.05)
    raise RuntimeError(f"the server's log still grew after {SETTLE_LIMIT:g} s")


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
            " (SELECT group_concat(target, ' ') FROM links WHERE page_id = p.id), f.body,"
            " (SELECT state FROM urls WHERE url = p.url)"
            " FROM pages p LEFT JOIN pages_fts f ON f.rowid = p.id ORDER BY p.url"
        ).fetchall()
    finally:
        conn.close()


def frontier_of(db: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT url, state FROM urls ORDER BY url").fetchall()
    finally:
        conn.close()


def test_kill_nine_and_resume(tmp_path: Path) -> None:
    rng = random.Random(20261123)
    seeds = generate(tmp_path / "capsules", HOSTS, PAGES)
    log = tmp_path / "served.log"
    whole_db, db = tmp_path / "whole.db", tmp_path / "killed.db"
    allowed_repeats: Counter[str] = Counter()
    kills = 0
    with capsule_server_thread(tmp_path / "capsules", tmp_path / "certs", log=log) as port:
        whole = run_main(crawl_argv(whole_db, seeds, port), limit=DEADLINE)
        assert whole.returncode == 0, whole.stderr
        start = logged_in_full(log, whole_db, DEADLINE)
        expected = requested_urls(log)
        assert len(expected) == len(set(expected)) > PAGES
        assert Counter(expected) == committed(whole_db)  # each request is a fetch logged
        while kills < KILLS:
            before = len(requested_urls(log, start))
            proc = start_crawl(db, seeds, port)
            target, started = before + rng.randint(1, 15), time.monotonic()
            while len(requested_urls(log, start)) < target and proc.poll() is None:
                assert time.monotonic() - started < DEADLINE, "the crawl made no progress"
                time.sleep(POLL)
            time.sleep(rng.uniform(0, 0.05))
            if proc.poll() is not None:
                break  # it finished first: the last run below says so
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            settled(log, port)  # the server has logged the connections the kill cut
            on_the_wire = Counter(requested_urls(log, start)) - committed(db)
            allowed_repeats.update(on_the_wire.keys())
        assert kills == KILLS, "the crawl finished before it could be killed enough times"
        last = run_main(crawl_argv(db, seeds, port), limit=DEADLINE)  # killed no more
        assert last.returncode == 0, last.stderr

    got = Counter(requested_urls(log, start))
    assert set(got) == set(expected)  # no URL lost, nothing else fetched
    for url, n in got.items():  # none fetched twice, unless it was on the wire at a kill
        assert n <= 1 + allowed_repeats[url], url
    # each kill cuts what was in flight and the open batch (the first run's at most: a run
    # after a kill commits each claim's batch before its request, see SqliteStore)
    assert sum(got.values()) - len(got) <= KILLS * CONCURRENCY + BATCH_URLS
    assert index_of(db) == index_of(whole_db)  # the same index
    assert frontier_of(db) == frontier_of(whole_db)  # and the same frontier
