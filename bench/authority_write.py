"""How long writing link authority holds SQLite's write lock: one transaction for every
page (the old way, PostgreSQL's way: :func:`geminibot.store.authority.replace_authority`)
against transactions of ``WRITE_CHUNK`` pages (:func:`geminibot.store.authority.
write_sqlite`), on tables shaped like the store's (``pages`` id, url, host; ``authority``
url, score, weight; ``settings``) holding PAGES pages over HOSTS hosts, in a temporary
file. A crawl's write waits as long as the longest transaction (its busy timeout is
``BUSY_TIMEOUT_MS``). The two ways alternate, ROUNDS times each.

    .venv/bin/python bench/authority_write.py [--pages 530000] [--hosts 4400] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from geminibot.store import authority
from geminibot.store import statements as q
from geminibot.store.db import transaction
from geminibot.store.sqlite_sql import ENGINE


def tables(path: Path, pages: int, hosts: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT UNIQUE, host TEXT)")
    conn.execute(
        "CREATE TABLE authority (url TEXT PRIMARY KEY, score REAL NOT NULL,"
        " weight REAL NOT NULL) WITHOUT ROWID"
    )
    conn.execute("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT)")
    with transaction(conn):
        conn.executemany(
            "INSERT INTO pages (url, host) VALUES (?, ?)",
            (
                (f"gemini://h{i % hosts}.space.test/p/{i}.gmi", f"h{i % hosts}.space.test")
                for i in range(pages)
            ),
        )
    return conn


def one_transaction(conn: sqlite3.Connection, ranks: list[tuple[str, float, float]]) -> None:
    with timed(conn):
        conn.execute(ENGINE.sql[q.HOST_RANK_TABLE])
        rows = [{"host": h, "score": s, "weight": w} for h, s, w in ranks]
        conn.executemany(ENGINE.sql[q.ADD_HOST_RANK], rows)
        authority.replace_authority(conn, ENGINE.sql)
        conn.execute(ENGINE.sql[q.DROP_HOST_RANK])


HELD: list[float] = []


@contextmanager
def timed(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    started = time.perf_counter()
    with transaction(conn):
        yield conn
    HELD.append(time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=530_000)
    parser.add_argument("--hosts", type=int, default=4_400)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(1965)
    ranks = [(f"h{h}.space.test", rng.random(), 1.0 + rng.random()) for h in range(args.hosts)]
    authority.transaction = timed  # type: ignore[attr-defined]  # time each chunk
    print(
        f"{args.pages:,} pages over {args.hosts:,} hosts; machine: nproc {os.cpu_count()}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    )
    print("\n| way | round | seconds in all | transactions | longest holds the lock (s) |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        conn = tables(Path(tmp) / "store.db", args.pages, args.hosts)
        ways = (("one transaction", one_transaction), ("chunks", authority.write_sqlite))
        for number in range(1, args.rounds + 1):
            for name, write in ways:
                HELD.clear()
                started = time.perf_counter()
                write(conn, ranks)
                total = time.perf_counter() - started
                print(f"| {name} | {number} | {total:.1f} | {len(HELD)} | {max(HELD):.2f} |")
        conn.close()


if __name__ == "__main__":
    main()
