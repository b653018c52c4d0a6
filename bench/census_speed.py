"""``geminibot census`` at the size of Geminispace (issue 59: at most 60 s at 600,000 URLs,
memory bounded; the same output on PostgreSQL), beside the floor any census pays: one
pass over the ``pages`` and ``links`` tables (``count(*)``, ``sum(size)``).

    .venv/bin/python bench/census_speed.py [--urls 600000] [--store-dir DIR] [--postgres]

The store is the synthetic space's (``bench/geminispace``) filled as a perfect crawl of
day 0 would fill it (``search_engines.filled_store``: reused from ``--store-dir`` when
there, else filled, which takes far longer than a census), with what a crawl records
beside its pages added once: each host's policy files and its refused ``/private/``
page (``export_speed.add_policy_and_refusals``), and what the crawl's TLS recorder
keeps: one certificate per host (self-signed EC for most, RSA from a known CA for one
in ten, TLS 1.2 for one in twenty, a few expired or not matching). Every run is a child process, measured alike: wall seconds, CPU seconds,
peak RSS (``VmHWM``). ``census --html`` draws the charts too. With ``--postgres`` the
store is moved into a PostgreSQL cluster of its own (``geminibot db migrate``), its
census taken there and its figures compared with SQLite's (they must be the same).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from machine import cpu_model, measured, migrated  # noqa: E402

from geminibot.census.history import MAX_HISTORY  # noqa: E402

if TYPE_CHECKING:
    from geminibot.census.model import Census

#: The settings key that says the TLS facts were added to a store.
TLS_ADDED = "bench_census_tls"


def floor(db: str) -> None:
    """The floor: one pass over ``pages`` and one over ``links``."""
    conn = sqlite3.connect(db)
    print(conn.execute("SELECT count(*), sum(size) FROM pages").fetchone())
    print(conn.execute("SELECT count(*) FROM links").fetchone())
    conn.close()


def grown_history(data: dict[str, Any], count: int) -> list[Census]:
    """``count`` censuses kept: copies of the census ``data`` (its JSON), a week apart,
    each number grown by 1% a week (oldest first)."""
    from geminibot.census.model import Census

    kept = []
    for i in range(count):
        grown = json.loads(json.dumps(data))
        grown["taken_at"] = data["taken_at"] - (count - i) * 7 * 86_400
        for figure in grown["figures"].values():
            if isinstance(figure["value"], int) and not isinstance(figure["value"], bool):
                figure["value"] = round(figure["value"] * (1 + i / 100))
        kept.append(Census.from_json(grown))
    return kept


def history_report(census_json: str, count: int, out: str) -> None:
    """The report of ``count`` censuses kept (:func:`grown_history`): the most the
    portal's page and ``--html`` draw."""
    from geminibot.census.html import build_report, write_report

    kept = grown_history(json.loads(Path(census_json).read_text()), count)
    report = build_report(kept[-1], kept)
    write_report(report, Path(out))
    print(len(report.charts) + len(report.series))


def add_tls_facts(db: Path) -> int:
    """One certificate per host, as the crawl's TLS recorder keeps it (once per store:
    a setting marks it). Returns the rows added."""
    conn = sqlite3.connect(db)
    if conn.execute("SELECT 1 FROM settings WHERE key = ?", (TLS_ADDED,)).fetchone():
        conn.close()
        return 0
    hosts = [h for (h,) in conn.execute("SELECT host FROM hosts ORDER BY host")]
    now = time.time()
    rows = []
    for i, host in enumerate(hosts):
        ca = i % 10 == 0
        rows.append(
            (
                host, f"{i:064x}", f"{i + 1:064x}", "TLSv1.2" if i % 20 == 7 else "TLSv1.3",
                "TLS_AES_256_GCM_SHA384", now - 86_400, now, f"CN={host}",
                "O=Let's Encrypt,CN=R3" if ca else f"CN={host}", host,
                "known-ca" if ca else "self-signed", "RSA" if ca else "EC secp256r1",
                2048 if ca else 256, now - 365 * 86_400,
                now - 86_400 if i % 50 == 3 else now + 3650 * 86_400, i % 40 != 5, 1,
            )
        )  # fmt: skip
    with conn:
        conn.executemany(
            "INSERT INTO tls_history (host, sha256, spki_sha256, tls_version, cipher,"
            " first_seen, last_seen, subject, issuer, sans, trust, key_type, key_bits,"
            " not_before, not_after, name_matches, parsed)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("INSERT INTO settings (key, value) VALUES (?, '1')", (TLS_ADDED,))
    conn.close()
    return len(rows)


def figures(stdout: str) -> dict[str, object]:
    """A census's figures from its JSON (the time it was taken left out)."""
    return dict(json.loads(stdout)["figures"])


def row(label: str, run: dict[str, float]) -> str:
    return f"| {label} | {run['seconds']:.1f} | {run['cpu']:.1f} | {run['peak_mib']:.0f} |"


def postgres_run(db: Path, work: Path) -> tuple[dict[str, float], str, float]:
    """The store moved into a cluster of its own and its census taken there."""
    from postgres_cluster import new_database, running_postgres

    with running_postgres() as cluster:
        url = new_database(cluster)
        moved = migrated(db, url)
        run, out = measured("geminibot", ["census", "--db", url, "--json"], work, "pg")
        return run, out, moved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=600_000, help="URLs of the space")
    parser.add_argument("--store-dir", type=Path, help="where the filled store is kept")
    parser.add_argument("--postgres", action="store_true", help="also on PostgreSQL")
    parser.add_argument("--floor", help=argparse.SUPPRESS)
    parser.add_argument("--history-report", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floor(args.floor)
        return
    if args.history_report:
        census_json, count, out = args.history_report
        history_report(census_json, int(count), out)
        return
    from export_speed import add_policy_and_refusals
    from search_engines import filled_store, space_of

    hosts, space = space_of(args.urls)
    folder = args.store_dir or Path(tempfile.mkdtemp(prefix="census-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    db, made = filled_store(args.urls, folder)
    policies = add_policy_and_refusals(space, db)
    if policies:
        made += f"; {policies:,} policy files and refused URLs added"
    added = add_tls_facts(db)
    if added:
        made += f"; TLS facts of {added:,} hosts added"
    work = Path(tempfile.mkdtemp(prefix="census-run-", dir=folder))
    ours, out = measured("geminibot", ["census", "--db", str(db), "--json"], work, "json")
    html, _ = measured(
        "geminibot", ["census", "--db", str(db), "--html", str(work / "html")], work, "html"
    )
    base, _ = measured("census_speed", ["--floor", str(db)], work, "floor")
    (work / "census.json").write_text(out)
    drawn, drawn_out = measured(
        "census_speed",
        ["--history-report", str(work / "census.json"), str(MAX_HISTORY), str(work / "kept")],
        work,
        "kept",
    )
    charts = len(list((work / "html" / "charts").glob("*.svg")))
    print(
        f"\n### {args.urls:,} URLs ({hosts} hosts); {made}\n\nMachine: nproc "
        f"{os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}, load "
        f"average {os.getloadavg()[0]:.1f} at the end.\n"
    )
    print("| run | seconds | CPU s | peak RSS MiB |\n|---|---:|---:|---:|")
    print(row("`geminibot census --json`", ours))
    print(row(f"`geminibot census --html` ({charts} charts)", html))
    print(row("floor: one pass over pages and links", base))
    print(
        row(
            f"report of {MAX_HISTORY:,} censuses kept ({drawn_out.strip()} charts, "
            "the portal's page at most)",
            drawn,
        )
    )
    if args.postgres:
        pg, pg_out, moved = postgres_run(db, work)
        print(row("`geminibot census --json` on PostgreSQL", pg))
        ours_figures, pg_figures = figures(out), figures(pg_out)
        differ = sorted(k for k in ours_figures if ours_figures[k] != pg_figures.get(k))
        print(
            f"\nPostgreSQL: store moved in {moved:.0f} s (the server's CPU is not in the "
            f"CPU column); figures that differ from SQLite's: {', '.join(differ) or 'none'}."
        )


if __name__ == "__main__":
    main()
