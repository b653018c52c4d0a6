"""Several crawl processes on one PostgreSQL: pages per second with 1, 2 and 3 processes,
and what each page costs (the figures docs/scaling.md multiplies out).

Side by side in one run, over the same generated capsules served by ``capsule-server``
on loopback (``--test-range``: no delay between requests, so the crawl runs as fast as
the machine lets it, and the costs are per page, not per politeness delay):

- ``geminibot crawl --db crawl.sqlite`` (one process, the embedded default);
- ``geminibot crawl --db postgresql://...`` with 1, 2 and 3 processes on a fresh database
  each time, in a throwaway cluster (``tests/postgres_cluster.py``), each process taking
  its share of the hosts (``--max-hosts``).

Per run: pages/s (pages in the database over the wall time until every process exited),
CPU seconds per page of the crawl processes, of PostgreSQL (every process of the
cluster, from /proc) and of the capsule server, transactions per page and WAL bytes per
page (``pg_stat_database``, ``pg_current_wal_lsn``). The resource that takes the most
CPU per page while the machine's cores are all busy is the bottleneck.

    .venv/bin/python bench/pg_crawl.py [--hosts 48] [--pages 1500] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "crawl"))
sys.path.insert(0, str(ROOT / "tests"))

from postgres_cluster import running_postgres  # noqa: E402
from served_capsules import capsule_server, generate  # noqa: E402

#: Bound on one run (seconds).
RUN_TIMEOUT = 900.0
#: Lines of a failed crawl process's messages shown.
ERROR_LINES = 20
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_of(pids: list[int], children: bool = False) -> float:
    """User + system CPU seconds of these processes so far (0 for those gone), with
    those of their children that have ended if ``children``."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
        if children:
            total += (int(fields[13]) + int(fields[14])) / TICKS
    return total


def postgres_cpu(port: int) -> float:
    """CPU seconds of the cluster listening on ``port``: its postmaster, the processes it
    runs now, and those it has reaped (each connection's backend)."""
    postmaster = server_pid(port)
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == postmaster:
                children.append(int(entry.name))
    return cpu_of([postmaster], children=True) + cpu_of(children)


def pg_port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", maxsplit=1)[0])


def server_pid(port: int) -> int:
    out = subprocess.run(
        ["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, check=False
    ).stdout
    return int(out.split("pid=")[1].split(",")[0]) if "pid=" in out else 0


def pg_counters(url: str) -> tuple[int, int, int]:
    """Transactions committed, WAL position and size of the database."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname ="
            " current_database()), pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,"
            " pg_database_size(current_database())"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def fetch_span(db: str) -> float:
    """Seconds from the first request's start to the last one's end (the crawl's own
    log): the rate while crawling, without start-up, nor the wait of processes that ran
    out of hosts before the others (they stay to take over a dead one's hosts)."""
    sql = "SELECT min(started_at), max(started_at + duration) FROM fetches"
    if db.startswith("postgresql://"):
        with psycopg.connect(db) as conn:
            row = conn.execute(sql).fetchone()
    else:
        with sqlite3.connect(db) as lite:
            row = lite.execute(sql).fetchone()
    assert row is not None
    return float(row[1] - row[0])


def crawl(
    db: str, seeds: list[str], port: int, processes: int, args: argparse.Namespace
) -> dict[str, float]:
    argv = [sys.executable, "-m", "geminibot", "crawl", *seeds, "--db", db, "--json"]
    argv += ["--test-range", "--allow-host", "*.test", "--concurrency", str(args.concurrency)]
    argv += ["--connect-to", f"*.test:1965:127.0.0.1:{port}"]
    if processes > 1:
        argv += ["--max-hosts", str(-(-args.hosts // processes))]
    shared = db.startswith("postgresql://")
    before = pg_counters(db) if shared else (0, 0, 0)
    pg_before = postgres_cpu(pg_port(db)) if shared else 0.0
    server = server_pid(port)
    server_before = cpu_of([server])
    start = time.monotonic()
    usage = 0.0
    pages = 0
    with contextlib.ExitStack() as files:
        # each process's messages in a file (a pipe left unread could fill and stall it)
        errors = [files.enter_context(tempfile.TemporaryFile()) for _ in range(processes)]
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err) for err in errors]
        for proc, err in zip(procs, errors, strict=True):
            _, status, rusage = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                err.seek(0)
                tail = err.read().decode(errors="replace").splitlines()[-ERROR_LINES:]
                raise SystemExit("a crawl failed:\n" + "\n".join(tail))
            usage += rusage.ru_utime + rusage.ru_stime
            assert proc.stdout is not None
            pages += int(json.loads(proc.stdout.read().decode())["pages"])
            proc.returncode = 0
    wall = time.monotonic() - start
    span = fetch_span(db)
    after = pg_counters(db) if shared else (0, 0, 0)
    result = {
        "pages": pages,
        "seconds": wall,
        "crawl_seconds": span,
        "pages_per_s": pages / span,
        "crawl_cpu_ms_per_page": 1000 * usage / pages,
        "server_cpu_ms_per_page": 1000 * (cpu_of([server]) - server_before) / pages,
    }
    if shared:
        result["pg_cpu_ms_per_page"] = 1000 * (postgres_cpu(pg_port(db)) - pg_before) / pages
        result["transactions_per_page"] = (after[0] - before[0]) / pages
        result["wal_bytes_per_page"] = (after[1] - before[1]) / pages
        result["db_bytes_per_page"] = (after[2] - before[2]) / pages
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=48)
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    print(flush=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(f"space: {args.hosts} hosts, {args.pages} pages; --concurrency {args.concurrency}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        seeds = generate(tmp / "capsules", args.hosts, args.pages)
        rows: list[tuple[str, dict[str, float]]] = []
        with running_postgres() as cluster, capsule_server(tmp / "capsules", tmp / "certs") as port:
            rows.append(("sqlite, 1 process", crawl(str(tmp / "c.db"), seeds, port, 1, args)))
            with psycopg.connect(cluster, autocommit=True) as admin:
                for n in (1, 2, 3):
                    admin.execute(f"CREATE DATABASE bench{n}".encode())
                    url = cluster.rsplit("/", 1)[0] + f"/bench{n}"
                    rows.append(
                        (
                            f"postgresql, {n} process{'es' if n > 1 else ''}",
                            crawl(url, seeds, port, n, args),
                        )
                    )
    print(
        f"{'run':<24}{'pages':>6}{'pages/s':>9}{'crawl':>8}{'pg':>7}{'server':>8}"
        f"{'tx':>6}{'WAL B':>8}{'db B':>8}"
    )
    print(f"{'':<24}{'':>6}{'':>9}{'ms CPU per page':>23}{'per page':>14}")
    for name, r in rows:
        print(
            f"{name:<24}{r['pages']:>6.0f}{r['pages_per_s']:>9.1f}"
            f"{r['crawl_cpu_ms_per_page']:>8.2f}{r.get('pg_cpu_ms_per_page', 0):>7.2f}"
            f"{r['server_cpu_ms_per_page']:>8.2f}{r.get('transactions_per_page', 0):>6.1f}"
            f"{r.get('wal_bytes_per_page', 0):>8.0f}{r.get('db_bytes_per_page', 0):>8.0f}"
        )
    print(json.dumps(dict(rows)))


if __name__ == "__main__":
    main()
