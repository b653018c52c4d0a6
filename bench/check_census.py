"""What the capsule's census adds to a ``/check`` of a host (issue 59 item 5): the
seconds from question to answer, without and with it, side by side in one run.

A crawl store (SQLite) is filled as a crawl of ``--hosts`` capsules of ``--urls``
URLs in all would leave it: a row of ``urls``, ``pages`` and ``fetches`` per URL (the
fetches interleaved over the hosts, each host's robots.txt fetched first), a robots.txt
and a certificate per host. Then, alternately, ``--rounds`` times for each of the first,
a middle and the last host (the first's robots.txt fetch is the oldest of the log): a
``/check`` answered by a :class:`~geminibot.why.reads.CheckReads` of its own (nothing
kept), without the census (``census_db=None``: today's answer) and with it (``of``), on
the faces' path: read on a worker thread, explained in the worker process. Every
answer is local; nothing leaves the machine.

``--index-cost NAME``: instead, the same ``/check`` (census included) on a copy of the
store without the schema's index ``NAME`` and on the store with it, alternating; and
``why``'s read of the host's newest requests (``lookups.WAITS``) alone, on each.

    .venv/bin/python bench/check_census.py [--hosts 2000] [--urls 600000] [--rounds 5]
        [--index-cost fetches_host_started]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_model

from geminibot.census.host import host_census
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.database import open_database
from geminibot.store.db import connect, transaction
from geminibot.store.lookups import WAITS
from geminibot.store.reads import opened
from geminibot.store.records import TLSRecord
from geminibot.store.sqlite_sql import ENGINE
from geminibot.store.traps import FrontierLimits
from geminibot.why.host import HostAnswer
from geminibot.why.reads import CheckReads
from geminibot.why.records import WAIT_WINDOW

START = 1_790_000_000.0
ROBOTS = b"User-agent: *\nDisallow: /private/\n" + b"".join(
    f"Disallow: /p{i}/\n".encode() for i in range(40)
)
TLS = TLSRecord("h", "TLSv1.3", "TLS_AES_256_GCM_SHA384", "AA", "BB", "CN=h", "CN=h", ("h",),
                "self-signed", "EC secp256r1", 256, 0.0, 4e9, True, True, START)  # fmt: skip


def host(i: int) -> str:
    return f"h{i:05}.space.test"


def fill(db: Path, hosts: int, urls: int) -> None:
    """The store, as described in the module's docstring."""
    conn = connect(db)
    store = SqliteStore(conn, lambda: START, FrontierLimits())
    with transaction(conn):
        conn.executemany(
            "INSERT INTO hosts (host, first_seen) VALUES (?, ?)",
            [(host(h), START) for h in range(hosts)],
        )
        conn.executemany(
            "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason, status,"
            " body) VALUES (?, 'robots.txt', ?, 1e12, 'success', '', 20, ?)",
            [(host(h), START + h, ROBOTS) for h in range(hosts)],
        )
        conn.executemany(
            "INSERT INTO fetches (url, host, status, meta, error, started_at, duration)"
            " VALUES (?, ?, 20, 'text/plain', NULL, ?, 0.1)",
            [(f"gemini://{host(h)}/robots.txt", host(h), START + h) for h in range(hosts)],
        )
    for h in range(hosts):
        store.saw_tls(replace(TLS, host=host(h), sha256=f"{h:064X}"))
    store.flush()
    batch = 50_000
    for first in range(0, urls, batch):
        rows = []
        for n in range(first, min(urls, first + batch)):
            name = host(n % hosts)
            state = ("done", "done", "done", "refused", "failed", "not_found")[n % 6]
            rows.append((f"gemini://{name}/{n}.gmi", name, f"/{n}.gmi", state, n))
        with transaction(conn):
            conn.executemany(
                "INSERT INTO urls (url, host, path, has_query, depth, state, reason,"
                " updated_at) VALUES (?, ?, ?, 0, 1, ?, CASE ? % 6 WHEN 3 THEN 'robots.txt:"
                " disallowed' WHEN 4 THEN 'HeaderTimeout: no header' END, 0)",
                [(u, h, p, s, n) for u, h, p, s, n in rows],
            )
            conn.executemany(
                "INSERT INTO pages (url, host, status, meta, size, fetched_at, title,"
                " text_indexed) VALUES (?, ?, ?, 'text/gemini', 300, ?, 't', ?)",
                [(u, h, 51 if s == "not_found" else 20, START + hosts + n, s == "done")
                 for u, h, _, s, n in rows if s in ("done", "not_found")],
            )  # fmt: skip
            conn.executemany(
                "INSERT INTO fetches (url, host, status, meta, error, started_at, duration)"
                " VALUES (?, ?, 20, 'text/gemini', NULL, ?, 0.1)",
                [(u, h, START + hosts + n) for u, h, _, _, n in rows],
            )
    conn.close()


async def answered(db: str, target: str, census: bool) -> tuple[float, HostAnswer]:
    checks = CheckReads.of(db) if census else CheckReads(partial(opened, db))
    try:
        started = time.perf_counter()
        answer = await checks.answer(target, START + 1e6)
        took = time.perf_counter() - started
    finally:
        checks.reads.close()
    assert isinstance(answer, HostAnswer) and (answer.census is not None) == census
    return took, answer


def waits_read(db: Path, target: str) -> float:
    """Seconds of ``why``'s read of ``target``'s newest requests, alone."""
    conn = sqlite3.connect(db)
    try:
        started = time.perf_counter()
        conn.execute(ENGINE.sql[WAITS], {"host": target, "limit": WAIT_WINDOW}).fetchall()
        return time.perf_counter() - started
    finally:
        conn.close()


def compare_index(db: Path, name: str, targets: tuple[str, ...], rounds: int) -> None:
    """``/check`` (census included) and the read of a host's newest requests, on a copy of
    ``db`` without the index ``name`` and on ``db``, alternating ``rounds`` times."""
    without = db.with_name("without.db")
    shutil.copyfile(db, without)
    with sqlite3.connect(without) as conn:
        conn.execute(f"DROP INDEX {name}")
    stores = {"without": without, "with": db}
    trio.run(answered, str(db), targets[0], True)  # the worker process started
    print(f"{'host':<20} {'index':<8} {'/check p50 / max s':>20} {'WAITS read p50 / max s':>24}")
    for target in targets:
        checks: dict[str, list[float]] = {label: [] for label in stores}
        reads: dict[str, list[float]] = {label: [] for label in stores}
        for _ in range(rounds):
            for label, path in stores.items():
                checks[label].append(trio.run(answered, str(path), target, True)[0])
                reads[label].append(waits_read(path, target))
        for label in stores:
            c, r = checks[label], reads[label]
            print(f"{target:<20} {label:<8} {statistics.median(c):>11.3f} / {max(c):.3f}"
                  f" {statistics.median(r):>15.4f} / {max(r):.4f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--urls", type=int, default=600_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--index-cost",
        metavar="NAME",
        help="instead: /check without and with this index of the schema, alternating",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "crawl.db"
        began = time.perf_counter()
        fill(db, args.hosts, args.urls)
        print(f"store: {args.hosts} hosts, {args.urls:,} URLs, filled in "
              f"{time.perf_counter() - began:.0f} s", flush=True)  # fmt: skip
        targets = (host(0), host(args.hosts // 2), host(args.hosts - 1))
        if args.index_cost:
            compare_index(db, args.index_cost, targets, args.rounds)
            print(f"{cpu_model()}, nproc {os.cpu_count()}, load average "
                  f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
            return
        with open_database(str(db)) as database:  # the routine alone, in this process
            for target in targets:
                began = time.perf_counter()
                host_census(database, target, START + 1e6)
                print(f"host_census({target}): {time.perf_counter() - began:.3f} s")
        trio.run(answered, str(db), targets[0], False)  # the worker process started
        print(f"{'host':<20} {'without census p50 / max s':>28} {'with census p50 / max s':>26}")
        for target in targets:
            times: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.rounds):
                for census in (False, True):
                    times[census].append(trio.run(answered, str(db), target, census)[0])
            old, new = times[False], times[True]
            print(f"{target:<20} {statistics.median(old):>19.3f} / {max(old):.3f}"
                  f" {statistics.median(new):>17.3f} / {max(new):.3f}")  # fmt: skip
    print(f"{cpu_model()}, nproc {os.cpu_count()}, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip


if __name__ == "__main__":
    main()
