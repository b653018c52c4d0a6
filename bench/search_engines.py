"""Search engines side by side: SQLite FTS5 (the store's own index) against tantivy (the
derived top-k index), on the same synthetic Geminispace pages, at several index sizes.

For each size: the space (``bench/geminispace``, hosts scaled as 4,400 per 600,000 URLs)
is written into a geminibot database as a perfect crawl would (text pages, links,
duplicates collapsed), link authority is computed, then

- build time and bytes of each engine's index over the same text (FTS5: a second FTS5
  table filled from the store's text, so its build is timed alone; tantivy:
  ``geminibot.index.tantivy_index.rebuild``, which also gathers link text);
- query latency through ``geminibot.index.search`` (what ``geminibot search`` runs,
  snippets and reads from the store included; no process start-up) for a fixed query mix,
  each query ``--repeats`` times, per engine, with and without link authority.

    .venv/bin/python bench/search_engines.py [--sizes 20000,150000,600000] [--repeats 15]
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
from geminispace.store import fill_store

from geminibot.index import connect, search
from geminibot.index.authority import compute_authority
from geminibot.index.tantivy_index import rebuild

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


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run(pages: int, tmp: Path, repeats: int) -> None:
    hosts = max(MIN_HOSTS, round(pages * HOSTS_PER_URL))
    space = Space(hosts, pages)
    db = tmp / f"space-{pages}.db"
    conn = connect(db)
    t0 = time.perf_counter()
    stored = fill_store(space, conn)
    fill = time.perf_counter() - t0
    text_pages = int(conn.execute("SELECT count(*) FROM pages WHERE text_indexed").fetchone()[0])
    auth = compute_authority(conn)
    fts_s, fts_bytes, content_bytes = fts5_build(conn)
    manifest = rebuild(conn)
    tv_s, tv_bytes = float(manifest["seconds"]), int(manifest["bytes"])  # type: ignore[arg-type]
    print(
        f"\n### {pages:,} URLs ({hosts} hosts): {stored:,} pages stored, {text_pages:,} with "
        f"text, in {fill:.0f} s; authority over {auth['links']:,} host links in "
        f"{auth['seconds']:.1f} s\n"
    )
    print("| engine | build s | index MiB | query median ms | p95 ms | worst ms |")
    print("|---|---:|---:|---:|---:|---:|")
    mix = queries(space)
    per_engine = {}
    for engine, authority in (
        ("fts5", False),
        ("fts5", True),
        ("tantivy", False),
        ("tantivy", True),
    ):
        every, per_query = time_queries(conn, mix, engine, authority, repeats)
        per_engine[(engine, authority)] = per_query
        build, size = (fts_s, fts_bytes) if engine == "fts5" else (tv_s, tv_bytes)
        name = engine + (" + authority" if authority else "")
        print(
            f"| {name} | {build:.1f} | {size / 2**20:.1f} | {statistics.median(every):.1f} "
            f"| {p95(every):.1f} | {max(every):.1f} |"
        )
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
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"machine: nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, tantivy 0.27"
    )
    for pages in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            run(pages, Path(tmp), args.repeats)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
