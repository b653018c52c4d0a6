"""``geminibot export`` at the size of Geminispace (issue 59: at most 120 s at 600,000 URLs,
memory bounded), beside a baseline that reads the whole ``pages`` table into memory at
once and writes it as one Parquet file (what a quick script does).

    .venv/bin/python bench/export_speed.py [--urls 600000] [--store-dir DIR] [--postgres]

The store is the synthetic space's (``bench/geminispace``) filled as a perfect crawl of
day 0 would fill it (``search_engines.filled_store``: reused from ``--store-dir`` when
there, else filled, which takes far longer than the export), with what a crawl records
beside its pages (each host's policy files, its ``/private/`` page refused) added once. Both runs are child
processes, measured alike: wall seconds, CPU seconds, peak RSS (``VmHWM``). With
``--postgres`` the store is also moved into a PostgreSQL cluster of its own
(``geminibot db migrate``), exported from there, and the two exports compared file by
file, schema and rows (they must be the same).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from machine import cpu_model, measured, migrated  # noqa: E402

if TYPE_CHECKING:
    from geminispace.space import Space


def baseline(db: Path, out: Path) -> None:
    """The naive way: every row of ``pages`` in memory, then one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    conn = sqlite3.connect(db)
    cursor = conn.execute(
        "SELECT url, host, status, meta, mime, lang, size, content_hash, fetched_at,"
        " redirect_to, duplicate_of, text_indexed, changed_at, gone_at FROM pages"
    )
    names = [d[0] for d in cursor.description]
    rows = cursor.fetchall()
    table = pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
    pq.write_table(table, out / "pages.parquet", compression="zstd")


#: The settings key that says the policy files and refusals were added to a store.
EXTRAS = "bench_export_extras"
POLICY_FILES = ("robots.txt", "robots2.txt", "agents.txt")


def add_policy_and_refusals(space: Space, db: Path) -> int:
    """What a real crawl records beside its pages and a filled store lacks: each host's
    three policy files as the space serves them, and its ``/private/`` page refused by
    them (once per store: a setting marks it). Returns the rows added."""
    conn = sqlite3.connect(db)
    if conn.execute("SELECT 1 FROM settings WHERE key = ?", (EXTRAS,)).fetchone():
        conn.close()
        return 0
    hosts = conn.execute("SELECT host, first_seen FROM hosts ORDER BY host").fetchall()
    files, refused = [], []
    for host, at in hosts:
        i = space.index_of(host)
        for name in POLICY_FILES:
            text = space.policy_file(i, name)
            outcome, status = ("success", 20) if text is not None else ("unavailable", 51)
            body = None if text is None else text.encode()
            files.append((host, name, at, at + 86_400, outcome, f"status {status}", status, body))
        url = f"gemini://{host}/private/secret.gmi"
        refused.append((url, host, "/private/secret.gmi", at, "robots.txt: Disallow: /private/"))
    with conn:
        conn.executemany("INSERT OR IGNORE INTO robots VALUES (?, ?, ?, ?, ?, ?, ?, ?)", files)
        conn.executemany(
            "INSERT OR IGNORE INTO urls (url, host, path, has_query, depth, state, reason,"
            " updated_at) VALUES (?, ?, ?, 0, 1, 'refused', ?, ?)",
            [(u, h, p, r, at) for u, h, p, at, r in refused],
        )
        conn.execute("INSERT INTO settings (key, value) VALUES (?, '1')", (EXTRAS,))
    conn.close()
    return len(files) + len(refused)


def export_run(db: str, out: Path, work: Path, name: str) -> dict[str, object]:
    run, stdout = measured(
        "geminibot", ["export", "--db", db, "--out", str(out), "--json"], work, name
    )
    return {**run, "summary": json.loads(stdout)}


def contents(out: Path) -> dict[str, Any]:
    """Each file's table, its rows in the order of its first two columns (the engines
    may order text differently, so the files are compared as sets of rows)."""
    import pyarrow.parquet as pq

    tables = {}
    for path in sorted(out.glob("*.parquet")):
        table = pq.read_table(path)
        keys = [(name, "ascending") for name in table.column_names[:2]]
        tables[path.name] = table.sort_by(keys) if table.num_rows else table
    return tables


def same_files(one: Path, other: Path) -> list[str]:
    """The files whose schema or rows differ between two exports."""
    a, b = contents(one), contents(other)
    return sorted(
        n for n in a.keys() | b.keys() if n not in a or n not in b or not a[n].equals(b[n])
    )


def postgres_run(db: Path, work: Path) -> dict[str, object]:
    """The store moved into a cluster of its own and exported from there."""
    from postgres_cluster import new_database, running_postgres

    with running_postgres() as cluster:
        url = new_database(cluster)
        moved = migrated(db, url)
        run = export_run(url, work / "out-pg", work, "pg")
        return {**run, "migrate_seconds": moved}


def row(label: str, run: dict[str, object] | dict[str, float], rows: int) -> str:
    seconds, cpu, peak = (float(str(run[k])) for k in ("seconds", "cpu", "peak_mib"))
    return f"| {label} | {rows:,} | {seconds:.1f} | {cpu:.1f} | {peak:.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=600_000, help="URLs of the space")
    parser.add_argument("--store-dir", type=Path, help="where the filled store is kept")
    parser.add_argument("--postgres", action="store_true", help="also from PostgreSQL")
    parser.add_argument("--baseline", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        baseline(*args.baseline)
        return
    from search_engines import filled_store, space_of

    hosts, space = space_of(args.urls)
    folder = args.store_dir or Path(tempfile.mkdtemp(prefix="export-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    db, made = filled_store(args.urls, folder)
    added = add_policy_and_refusals(space, db)
    if added:
        made += f"; {added:,} policy files and refused URLs added"
    work = Path(tempfile.mkdtemp(prefix="export-run-", dir=folder))
    try:
        ours = export_run(str(db), work / "out", work, "export")
        (work / "naive").mkdir()
        naive, _ = measured(
            "export_speed", ["--baseline", str(db), str(work / "naive")], work, "naive"
        )
        summary = ours["summary"]
        assert isinstance(summary, dict)
        files = {f["file"]: f["rows"] for f in summary["files"]}
        print(
            f"\n### {args.urls:,} URLs ({hosts} hosts); {made}\n\nMachine: nproc "
            f"{os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}, load "
            f"average {os.getloadavg()[0]:.1f} at the end.\n"
        )
        print("| run | rows | seconds | CPU s | peak RSS MiB |")
        print("|---|---:|---:|---:|---:|")
        print(row("`geminibot export` (all files)", ours, int(summary["rows"])))
        print(row("naive: `pages` in memory, one file", naive, files["index.parquet"]))
        if args.postgres:
            pg = postgres_run(db, work)
            pg_summary = pg["summary"]
            assert isinstance(pg_summary, dict)
            print(row("`geminibot export` from PostgreSQL", pg, int(pg_summary["rows"])))
            differ = same_files(work / "out", work / "out-pg")
            print(
                f"\nPostgreSQL: store moved in {float(str(pg['migrate_seconds'])):.0f} s "
                "(the server's CPU is not in the CPU column); files whose schema or rows "
                f"differ from SQLite's: {', '.join(differ) or 'none'}."
            )
        print("\n| file | rows | MiB |\n|---|---:|---:|")
        for f in summary["files"]:
            print(f"| {f['file']} | {f['rows']:,} | {f['bytes'] / 2**20:.1f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
