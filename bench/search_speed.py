"""Search latency on an index the size of a full crawl.

Builds a geminibot index of PAGES generated text/gemini pages (a vocabulary of common and
rare words, Zipf-like, ~300 words a page) in a temporary SQLite file, then times
``geminibot.index.search`` for single words, several words, a phrase, a prefix and a word
that matches nothing. Issue 6 asks for results "in well under a second".

    .venv/bin/python bench/search_speed.py [--pages N] [--tantivy] [--repeats N]

With ``--tantivy``, link authority is computed (plain PageRank over the pages' 40 hosts)
and the tantivy index built before timing, so that the times are the tantivy search with
its re-rank by authority; the table then also shows the 95th percentile.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from geminibot.index import search
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Page, store_page

QUERIES = (
    "gemini",
    "capsule protocol",
    '"tiny internet"',
    "astro*",
    "zyxwvutsrq",
    "garden OR orbit",
)
#: Each query is run this many times; the table shows the median and the worst.
REPEATS = 20


def vocabulary(rng: random.Random) -> list[str]:
    common = ["gemini", "capsule", "protocol", "server", "client", "page", "link", "text"]
    common += ["tiny", "internet", "astronomy", "astrolabe", "garden", "orbit"]
    rare = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
        for _ in range(20_000)
    ]
    return [*common, *rare]


def build(path: Path, pages: int) -> float:
    rng = random.Random(1965)
    words = vocabulary(rng)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    conn = connect(path)
    started = time.perf_counter()
    batch = 500
    for start in range(0, pages, batch):
        with transaction(conn):
            for i in range(start, min(start + batch, pages)):
                body = " ".join(rng.choices(words, weights, k=300))
                host = f"host{i % 40}.test"
                store_page(
                    conn,
                    Page(
                        url=f"gemini://{host}/page/{i}.gmi",
                        host=host,
                        status=20,
                        meta="text/gemini",
                        fetched_at=1.8e9 + i,
                        size=len(body),
                        mime="text/gemini",
                        title=f"Page {i} {rng.choice(words)}",
                        headings=(rng.choice(words),),
                        text=body,
                    ),
                    "indexer",
                )
    conn.close()
    return time.perf_counter() - started


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20, method="inclusive")[-1] if len(times) > 1 else times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000, help="pages in the index")
    parser.add_argument(
        "--tantivy", action="store_true", help="time the tantivy index, authority applied"
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each query")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "index.sqlite"
        seconds = build(db, args.pages)
        size = db.stat().st_size + sum(p.stat().st_size for p in Path(tmp).glob("*-wal"))
        conn = connect(db, create=False)
        if args.tantivy:
            from geminibot.index.authority import compute_authority
            from geminibot.index.tantivy_index import rebuild

            compute_authority(conn, [])
            rebuild(conn)
        print(
            f"Index: {args.pages:,} pages, {size / 2**20:.0f} MiB, built in {seconds:.1f} s. "
            f"Machine: nproc {os.cpu_count()}, Python {platform.python_version()}."
        )
        engine = "tantivy" if args.tantivy else "fts5"
        print(
            f"\n| query | results (limit 10) | median ms | p95 ms | worst ms (of {args.repeats}) |"
        )
        print("|---|---:|---:|---:|---:|")
        every: list[float] = []
        for query in QUERIES:
            times = []
            found = 0
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                found = len(search(conn, query, limit=10, engine=engine))
                times.append((time.perf_counter() - t0) * 1000)
            every += times
            print(
                f"| `{query}` | {found} | {statistics.median(times):.1f} | {p95(times):.1f}"
                f" | {max(times):.1f} |"
            )
        print(f"| all | | {statistics.median(every):.1f} | {p95(every):.1f} | {max(every):.1f} |")
        conn.close()


if __name__ == "__main__":
    main()
