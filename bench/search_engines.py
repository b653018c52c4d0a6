"""Search engines side by side: SQLite FTS5 (the store's own index) against tantivy (the
derived top-k index), on the same synthetic Geminispace pages, at several index sizes.

For each size: the space (``bench/geminispace``, hosts scaled as 4,400 per 600,000 URLs)
is written into a geminibot database as a perfect crawl would (text pages, links,
duplicates collapsed, URLs and hosts recorded as the crawl records them, so that a crawl
can take the store over: ``bench/freshness.py --from-store``), link authority is
computed, then

- build time and bytes of each engine's index over the same text (FTS5: a second FTS5
  table filled from the store's text, so its build is timed alone; tantivy:
  ``geminibot.index.tantivy_index.rebuild``, which also gathers link text);
- query latency through ``geminibot.index.search`` (what ``geminibot search`` runs,
  snippets and reads from the store included; no process start-up) for a fixed query mix,
  each query ``--repeats`` times, per engine, with and without link authority.

    .venv/bin/python bench/search_engines.py [--sizes 20000,150000,600000] [--repeats 15]
        [--store-dir DIR] [--build-only] [--engines fts5,tantivy]

``--store-dir DIR`` keeps each size's filled store (with its authority) as
``DIR/space-N.db`` and reuses it on later runs: filling 600,000 pages takes most of an
hour on two shared cores, the engines' builds and queries minutes. A store is written
under a ``.partial`` name and renamed once complete, so an interrupted fill is never
reused. ``--build-only`` fills the stores and stops; ``--engines tantivy`` measures one.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from geminispace import Space
from geminispace.store import crawl_ready, fill_store
from machine import cpu_model

from geminibot.index import search
from geminibot.index.authority import compute_authority
from geminibot.index.tantivy_index import rebuild
from geminibot.store.db import connect

#: Hosts per URL of the full Geminispace (4,400 capsules, 600,000 URLs).
HOSTS_PER_URL = 4400 / 600_000
#: Fewest hosts in a space.
MIN_HOSTS = 20
#: FTS5 shadow tables that make up the index proper (content is the stored text).
FTS5_INDEX_TABLES = ("data", "idx", "docsize", "config")


def queries(space: Space) -> list[tuple[str, str]]:
    """(label, query): common, mid-frequency and rare words, a phrase, a prefix, OR."""
    v = space.vocabulary
    return [
        ("most common word", v[0]),
        ("two common words", f"{v[0]} {v[1]}"),
        ("mid-frequency word", v[60]),
        ("rare word", v[3000]),
        ("phrase", f'"{v[0]} {v[1]}"'),
        ("prefix", v[2][:3] + "*"),
        ("either of two", f"{v[60]} OR {v[61]}"),
        ("planted topic", "orrery"),
        ("no match", "zzyzx"),
    ]


def fts5_build(conn: sqlite3.Connection) -> tuple[float, int, int]:
    """Seconds to build an FTS5 index over the store's text; index and content bytes."""
    conn.execute("DROP TABLE IF EXISTS fts_copy")
    conn.execute(
        "CREATE VIRTUAL TABLE fts_copy USING fts5 (title, headings, body, url,"
        " tokenize = 'unicode61 remove_diacritics 2')"
    )
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO fts_copy (rowid, title, headings, body, url)"
        " SELECT rowid, title, headings, body, url FROM pages_fts"
    )
    conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    sizes = dict(
        conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat WHERE name LIKE 'fts_copy%' GROUP BY name"
        ).fetchall()
    )
    index = sum(int(sizes.get(f"fts_copy_{t}", 0)) for t in FTS5_INDEX_TABLES)
    content = int(sizes.get("fts_copy_content", 0))
    conn.execute("DROP TABLE fts_copy")
    return seconds, index, content


def time_queries(
    conn: sqlite3.Connection, mix: list[tuple[str, str]], engine: str, authority: bool, n: int
) -> tuple[list[float], dict[str, float]]:
    """All latencies (ms) and the median per query."""
    every: list[float] = []
    per_query = {}
    for label, query in mix:
        search(conn, query, 10, engine=engine, authority=authority)  # warm the caches
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            search(conn, query, 10, engine=engine, authority=authority)
            times.append((time.perf_counter() - t0) * 1000)
        every += times
        per_query[label] = statistics.median(times)
    return every, per_query


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def space_of(pages: int) -> tuple[int, Space]:
    hosts = max(MIN_HOSTS, round(pages * HOSTS_PER_URL))
    return hosts, Space(hosts, pages)


def filled_store(pages: int, folder: Path) -> tuple[Path, str]:
    """``folder/space-N.db`` filled with the space and its authority (reused when there);
    and a line saying how it was made."""
    db = folder / f"space-{pages}.db"
    if db.exists():
        return db, f"store reused from {db}"
    _, space = space_of(pages)
    partial = folder / f"space-{pages}.db.partial"
    for stale in folder.glob(partial.name + "*"):
        stale.unlink()
    conn = connect(partial)
    t0 = time.perf_counter()
    stored = fill_store(space, conn)
    crawl_ready(conn, time.time())
    fill = time.perf_counter() - t0
    auth = compute_authority(conn)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    partial.rename(db)
    return db, (
        f"{stored:,} pages stored in {fill:.0f} s; authority over {auth['links']:,} "
        f"host links in {auth['seconds']:.1f} s"
    )


def run(pages: int, folder: Path, repeats: int, engines: list[str]) -> None:
    hosts, space = space_of(pages)
    db, made = filled_store(pages, folder)
    conn = connect(db)
    text_pages = int(conn.execute("SELECT count(*) FROM pages WHERE text_indexed").fetchone()[0])
    fts_s, fts_bytes, content_bytes = fts5_build(conn) if "fts5" in engines else (0.0, 0, 0)
    tv_s, tv_bytes = 0.0, 0
    if "tantivy" in engines:
        manifest = rebuild(conn)
        tv_s, tv_bytes = float(manifest["seconds"]), int(manifest["bytes"])  # type: ignore[arg-type]
    print(f"\n### {pages:,} URLs ({hosts} hosts): {text_pages:,} pages with text; {made}\n")
    print("| engine | build s | index MiB | query median ms | p95 ms | worst ms |")
    print("|---|---:|---:|---:|---:|---:|")
    mix = queries(space)
    per_engine = {}
    for engine, authority in (
        (engine, authority) for engine in engines for authority in (False, True)
    ):
        every, per_query = time_queries(conn, mix, engine, authority, repeats)
        per_engine[(engine, authority)] = per_query
        build, size = (fts_s, fts_bytes) if engine == "fts5" else (tv_s, tv_bytes)
        name = engine + (" + authority" if authority else "")
        print(
            f"| {name} | {build:.1f} | {size / 2**20:.1f} | {statistics.median(every):.1f} "
            f"| {p95(every):.1f} | {max(every):.1f} |"
        )
    if content_bytes:
        print(
            f"\nFTS5 stored text (both engines read snippets from it): {content_bytes / 2**20:.1f} MiB"
        )
    print("\n| query | " + " | ".join(f"{e}{' +a' if a else ''} ms" for e, a in per_engine) + " |")
    print("|---|" + "---:|" * len(per_engine))
    for label, query in mix:
        cells = " | ".join(f"{per_engine[k][label]:.1f}" for k in per_engine)
        print(f"| {label} `{query}` | {cells} |")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,150000,600000", help="URLs per space")
    parser.add_argument("--repeats", type=int, default=15, help="runs of each query")
    parser.add_argument("--store-dir", type=Path, help="keep and reuse filled stores here")
    parser.add_argument("--build-only", action="store_true", help="fill the stores, stop")
    parser.add_argument("--engines", default="fts5,tantivy", help="fts5, tantivy or both")
    args = parser.parse_args()
    engines = args.engines.split(",")
    if not engines or not set(engines) <= {"fts5", "tantivy"}:
        parser.error("--engines: fts5, tantivy or both")
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.build_only and args.store_dir is None:
        parser.error("--build-only needs --store-dir")
    if args.store_dir is not None:
        args.store_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"machine: nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, tantivy 0.27"
    )
    for pages in sizes:
        if args.build_only:
            print(pages, filled_store(pages, args.store_dir)[1], flush=True)
        elif args.store_dir is not None:
            run(pages, args.store_dir, args.repeats, engines)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                run(pages, Path(tmp), args.repeats, engines)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
