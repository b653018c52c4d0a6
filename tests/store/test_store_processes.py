"""Three ``geminibot crawl`` processes on one PostgreSQL crawl a many-host space served by
``capsule-server`` on loopback; one is killed with -9 mid-run and the crawl completes.

Checked from the server's JSON access log (per connection: host, path, accept time,
duration): every URL of an uninterrupted crawl (run first, in this process, on the same
server: its lines are the log's first) is fetched, nothing else;
none twice unless it was on the wire at the kill; per host, never two requests in flight
at once and never two page requests closer than the robots.txt ``Crawl-delay``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import psycopg
from commands import run_main
from crawl.served_capsules import (
    capsule_server,
    generate,
    log_records,
    logged_in_full,
    requested_urls,
)

HOSTS, PAGES = 6, 36
#: robots.txt Crawl-delay of every host (seconds) and the lease of a crawl process. All
#: hosts share 127.0.0.1, so a process paces its MAX_HOSTS hosts' requests one after
#: another at that address; the lease may run out during such a wait (a loaded machine):
#: the worker then checks it still holds its host before sending (hold_host). The lease
#: outlasts a request and the delay, so a host taken over from the killed process is not
#: asked again sooner than its delay after the request the kill cut.
DELAY, LEASE = 0.25, 3.0
#: How far the server's timestamps may be from the crawler's own (seconds): the server
#: logs when it accepted and when it closed, the crawler paces from its own ends.
SLACK = 0.05
PROCESSES, CONCURRENCY, MAX_HOSTS = 3, 4, 2
#: Bound on each wait of the test (seconds): a crawl, the kill's moment.
DEADLINE = 120.0
#: Seconds between two looks at the access log or the database while waiting (a crawl
#: host's pages are DELAY apart: a look at most every few pages).
POLL = 0.1
POLICY_FILES = ("/robots.txt", "/robots2.txt", "/agents.txt")


def crawl_argv(db: str, seeds: list[str], port: int, max_hosts: int = MAX_HOSTS) -> list[str]:
    argv = ["crawl", *seeds, "--db", db]
    argv += ["--test-range", "--allow-host", "*.test", "--concurrency", str(CONCURRENCY)]
    argv += ["--max-hosts", str(max_hosts)]
    argv += ["--connect-to", f"*.test:1965:127.0.0.1:{port}"]
    if db.startswith("postgresql://"):
        argv += ["--lease-seconds", str(LEASE)]
    return argv


def crawl(db: str, seeds: list[str], port: int, out: Path) -> subprocess.Popen[bytes]:
    """``geminibot crawl`` as a process of its own (one of several on one store)."""
    argv = [sys.executable, "-m", "geminibot", *crawl_argv(db, seeds, port)]
    with out.open("wb") as sink:
        return subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)


def crawled_whole(argv: list[str], db: Path, log: Path) -> int:
    """Run the uninterrupted crawl ``argv`` (on SQLite ``db``) in this process, the first
    on the server of ``log``: the number of the log's lines that are its."""
    whole = run_main(argv, limit=DEADLINE)
    assert whole.returncode == 0, whole.stderr
    return logged_in_full(log, db, DEADLINE)


def committed(db: str) -> Counter[str]:
    with psycopg.connect(db) as conn:
        return Counter(str(u) for (u,) in conn.execute("SELECT url FROM fetches"))


def work_by_holder(db: str) -> dict[str, int]:
    """URLs left (queued or leased) on the hosts each live lease holder has."""
    with psycopg.connect(db) as conn:
        rows = conn.execute(
            "SELECT l.holder, count(u.url) FROM host_leases l JOIN urls u ON u.host = l.host"
            " WHERE l.holder IS NOT NULL AND u.state IN ('queued', 'leased')"
            " AND l.lease_until > extract(epoch FROM clock_timestamp()) GROUP BY l.holder"
        ).fetchall()
    return {str(holder): int(n) for holder, n in rows}


def check_pace(log: Path, since: int) -> None:
    """Per host: no overlap, and page requests at least DELAY apart (end to start), in
    the log's lines from ``since`` on."""
    per_host: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for r in log_records(log, since):
        start = dt.datetime.fromisoformat(str(r["time"])).timestamp()
        per_host[str(r["host"])].append((start, start + float(str(r["duration"])), str(r["path"])))
    for host, visits in per_host.items():
        visits.sort()
        for (_, end, _), (start, _, path) in itertools.pairwise(visits):
            assert start >= end - SLACK, f"{host}: two requests in flight at once ({path})"
            if path not in POLICY_FILES:
                assert start - end >= DELAY - SLACK, f"{host}{path}: {start - end:.3f} s after"


def test_three_processes_one_killed(tmp_path: Path, pg_db: str) -> None:
    seeds = generate(tmp_path / "capsules", HOSTS, PAGES)
    for robots in (tmp_path / "capsules").glob("*/robots.txt"):
        robots.write_text(robots.read_text() + f"Crawl-delay: {DELAY}\n")
    log = tmp_path / "served.log"
    with capsule_server(tmp_path / "capsules", tmp_path / "certs", log) as port:
        # What one uninterrupted crawl fetches: the log's first lines. It works on every
        # host at once, their Crawl-delay waits side by side (what is fetched does not
        # depend on how many hosts a process takes at a time).
        whole_db = tmp_path / "whole.db"
        whole = crawl_argv(str(whole_db), seeds, port, max_hosts=HOSTS)
        start = crawled_whole(whole, whole_db, log)
        outs = [tmp_path / f"crawl{n}.out" for n in range(PROCESSES)]
        procs = [crawl(pg_db, seeds, port, out) for out in outs]
        victim = procs[0]
        mark = f":{victim.pid}"
        deadline = time.monotonic() + DEADLINE
        # Mid-run: a third of the pages asked for, and the victim holding hosts with work.
        while len(requested_urls(log, start)) < PAGES // 3 or not any(
            holder.endswith(mark) for holder in work_by_holder(pg_db)
        ):
            assert victim.poll() is None, "the crawl ended before the kill"
            assert time.monotonic() < deadline, "no kill mid-run"
            time.sleep(POLL)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        # Its hosts go on only once its leases expire and another process takes them.
        held = work_by_holder(pg_db)
        assert any(holder.endswith(mark) for holder in held), held
        for proc, out in zip(procs[1:], outs[1:], strict=True):
            assert proc.wait(DEADLINE) == 0, out.read_text()
    expected = requested_urls(log, 0, start)
    assert len(expected) == len(set(expected)) > PAGES

    got = Counter(requested_urls(log, start))
    assert set(got) == set(expected), "\n".join(
        o.read_text() for o in outs[1:]
    )  # the crawl completed: nothing lost, nothing else
    # Every request the survivors made is committed (page, failure, policy file or log):
    # the requests never committed are those the kill cut.
    on_the_wire = got - committed(pg_db)
    assert len(on_the_wire) <= CONCURRENCY, on_the_wire
    for url, n in got.items():  # none twice, unless on the wire at the kill
        assert n <= 1 + on_the_wire[url], url
    check_pace(log, start)
    with psycopg.connect(pg_db) as conn:
        left = conn.execute("SELECT count(*) FROM urls WHERE state IN ('queued', 'leased')")
        assert left.fetchone() == (0,)


def test_max_hosts_one_process_still_crawls_every_host(tmp_path: Path) -> None:
    """With --max-hosts 1 a lone process works on one host at a time and comes back for
    the hosts it left out, on either store (here SQLite: no other process to leave them to)."""
    seeds = generate(tmp_path / "capsules", 3, 24)
    log = tmp_path / "served.log"
    with capsule_server(tmp_path / "capsules", tmp_path / "certs", log) as port:
        whole_db = tmp_path / "whole.db"
        start = crawled_whole(crawl_argv(str(whole_db), seeds, port), whole_db, log)
        argv = ["crawl", *seeds, "--db", str(tmp_path / "c.db"), "--test-range"]
        argv += ["--allow-host", "*.test", "--max-hosts", "1"]
        argv += ["--connect-to", f"*.test:1965:127.0.0.1:{port}"]
        capped = run_main(argv, limit=DEADLINE)
        assert capped.returncode == 0, capped.stderr
    assert sorted(requested_urls(log, start)) == sorted(requested_urls(log, 0, start))
    visits = []
    for r in log_records(log, start):
        start_time = dt.datetime.fromisoformat(str(r["time"])).timestamp()
        visits.append((start_time, start_time + float(str(r["duration"]))))
    visits.sort()
    for (_, end), (begin, _) in itertools.pairwise(visits):  # one host, one request at a time
        assert begin >= end - SLACK
