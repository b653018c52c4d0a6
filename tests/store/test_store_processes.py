"""Three ``geminibot crawl`` processes on one PostgreSQL crawl a many-host space served by
``capsule-server`` on loopback; one is killed with -9 mid-run and the crawl completes.

Checked from the server's JSON access log (per connection: host, path, accept time,
duration): every URL of an uninterrupted one-process crawl is fetched, nothing else;
none twice unless it was on the wire at the kill; per host, never two requests in flight
at once and never two page requests closer than the robots.txt ``Crawl-delay``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import psycopg
from crawl.served_capsules import capsule_server, generate

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
#: Seconds between two looks at the access log or the database while waiting.
POLL = 0.02
POLICY_FILES = ("/robots.txt", "/robots2.txt", "/agents.txt")


def crawl(db: str, seeds: list[str], port: int, out: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "geminibot", "crawl", *seeds, "--db", db]
    argv += ["--test-range", "--allow-host", "*.test", "--concurrency", str(CONCURRENCY)]
    argv += ["--max-hosts", str(MAX_HOSTS)]
    argv += ["--connect-to", f"*.test:1965:127.0.0.1:{port}"]
    if db.startswith("postgresql://"):
        argv += ["--lease-seconds", str(LEASE)]
    with out.open("wb") as sink:
        return subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)


def log_records(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("host") and record.get("path"):
            out.append(record)
    return out


def requests(log: Path) -> list[str]:
    return [f"gemini://{r['host']}{r['path']}" for r in log_records(log)]


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


def check_pace(log: Path) -> None:
    """Per host: no overlap, and page requests at least DELAY apart (end to start)."""
    per_host: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for r in log_records(log):
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
    whole_log, log = tmp_path / "whole.log", tmp_path / "shared.log"
    capsules, certs = tmp_path / "capsules", tmp_path / "certs"
    # What one uninterrupted process fetches, crawled at the same time on a server of its own.
    with (
        capsule_server(capsules, certs, whole_log) as whole_port,
        capsule_server(capsules, certs, log) as port,
    ):
        whole = crawl(str(tmp_path / "whole.db"), seeds, whole_port, tmp_path / "whole.out")
        outs = [tmp_path / f"crawl{n}.out" for n in range(PROCESSES)]
        procs = [crawl(pg_db, seeds, port, out) for out in outs]
        victim = procs[0]
        mark = f":{victim.pid}"
        deadline = time.monotonic() + DEADLINE
        # Mid-run: a third of the pages asked for, and the victim holding hosts with work.
        while len(requests(log)) < PAGES // 3 or not any(
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
        assert whole.wait(DEADLINE) == 0
    expected = requests(whole_log)
    assert len(expected) == len(set(expected)) > PAGES

    got = Counter(requests(log))
    assert set(got) == set(expected), "\n".join(
        o.read_text() for o in outs[1:]
    )  # the crawl completed: nothing lost, nothing else
    # Every request the survivors made is committed (page, failure, policy file or log):
    # the requests never committed are those the kill cut.
    on_the_wire = got - committed(pg_db)
    assert len(on_the_wire) <= CONCURRENCY, on_the_wire
    for url, n in got.items():  # none twice, unless on the wire at the kill
        assert n <= 1 + on_the_wire[url], url
    check_pace(log)
    with psycopg.connect(pg_db) as conn:
        left = conn.execute("SELECT count(*) FROM urls WHERE state IN ('queued', 'leased')")
        assert left.fetchone() == (0,)


def test_max_hosts_one_process_still_crawls_every_host(tmp_path: Path) -> None:
    """With --max-hosts 1 a lone process works on one host at a time and comes back for
    the hosts it left out, on either store (here SQLite: no other process to leave them to)."""
    seeds = generate(tmp_path / "capsules", 3, 24)
    whole_log, log = tmp_path / "whole.log", tmp_path / "capped.log"
    with capsule_server(tmp_path / "capsules", tmp_path / "certs", whole_log) as port:
        assert (
            crawl(str(tmp_path / "whole.db"), seeds, port, tmp_path / "w.out").wait(DEADLINE) == 0
        )
    argv = [sys.executable, "-m", "geminibot", "crawl", *seeds, "--db", str(tmp_path / "c.db")]
    argv += ["--test-range", "--allow-host", "*.test", "--max-hosts", "1"]
    with capsule_server(tmp_path / "capsules", tmp_path / "certs", log) as port:
        argv += ["--connect-to", f"*.test:1965:127.0.0.1:{port}"]
        done = subprocess.run(argv, capture_output=True, timeout=DEADLINE, check=False)
        assert done.returncode == 0, done.stderr
    assert sorted(requests(log)) == sorted(requests(whole_log))
    visits = []
    for r in log_records(log):
        start = dt.datetime.fromisoformat(str(r["time"])).timestamp()
        visits.append((start, start + float(str(r["duration"]))))
    visits.sort()
    for (_, end), (start, _) in itertools.pairwise(visits):  # one host, one request at a time
        assert start >= end - SLACK
