"""Seconds from ``geminibot recheck`` to searchable, with ``geminibot serve`` running on
real capsules (issue 56, point 5).

    .venv/bin/python bench/recheck.py /work/shared/real-capsules [--capsules 29]
        [--pages 10] [--seed 56] [--work DIR]

1. Copies the capsules (``CORPUS/capsules/HOST/``, the first ``--capsules`` of them; the
   copy is the benchmark's, in a temporary folder, never the repository) and serves them
   with ``capsule-server`` on loopback (its rate limit raised: this measures the service,
   not the server's limit).
2. Starts ``geminibot serve`` on them (the crawl that keeps going, the index updater; no
   search capsule, metrics or link authority: they are not what is measured) and waits
   until its crawl sleeps after its first run and the index has caught up.
3. For ``--pages`` gemtext pages the crawl indexed, one capsule each, in turn (each after a
   random wait of up to DUE_POLL, so the rechecks fall anywhere in the crawl's look
   cycle): appends a paragraph with a word found nowhere else to the page's file, runs ``geminibot recheck
   URL --db DB`` (the command, its start-up included) and polls the search (every 0.25 s,
   ``geminibot.index.search`` on a connection of its own: the search capsule's code) until
   the word finds the page. Reports each page's seconds from the command's start to its
   re-fetch (``pages.fetched_at``) and to searchable; beside them, the baseline: when the
   crawl would have asked for the page again without the recheck (``urls.next_visit``,
   its revisit interval).
4. Then one capsule as a host (``recheck HOST``): one page of it changed, the seconds until
   that page is searchable and until every page of the host has been fetched again (at
   the capsule's pace: one request at a time).

Prints one JSON object. Loopback only; every wait is bounded (``--deadline`` seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from machine import cpu_model
from real_search import BIN
from service_bench import fetched_at, file_of, one, real_service, searchable, wait, work_folder

from geminibot.store.recheck import DUE_POLL


def recheck(db: Path, target: str) -> float:
    """Runs ``geminibot recheck TARGET``; returns when it started (monotonic)."""
    started = time.monotonic()
    subprocess.run(
        [str(BIN / "geminibot"), "recheck", target, "--db", str(db)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return started


def pick(db: Path, capsules: Path, count: int, seed: int) -> list[str]:
    """``count`` searchable gemtext pages whose file is in the copy, one capsule each."""
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT url, host FROM pages WHERE text_indexed AND mime = 'text/gemini'"
        " AND duplicate_of IS NULL ORDER BY url"
    ).fetchall()
    conn.close()
    by_host: dict[str, list[str]] = {}
    for url, host in rows:
        if "?" not in url and file_of(capsules, url).is_file():
            by_host.setdefault(host, []).append(url)
    rng = random.Random(seed)
    hosts = sorted(by_host)
    rng.shuffle(hosts)
    return [rng.choice(by_host[h]) for h in hosts[:count]]


def change(capsules: Path, url: str, word: str) -> None:
    with file_of(capsules, url).open("a", encoding="utf-8") as f:
        f.write(f"\n{word} appears here since the recheck benchmark\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="the real-capsules folder")
    parser.add_argument("--capsules", type=int, default=29, help="how many (first by name)")
    parser.add_argument("--pages", type=int, default=10, help="pages rechecked one by one")
    parser.add_argument("--seed", type=int, default=56)
    parser.add_argument("--deadline", type=float, default=1800.0, help="bound on each wait (s)")
    parser.add_argument("--work", type=Path, help="keep the work here (else a temporary one)")
    args = parser.parse_args()
    with work_folder(args.work, "recheck-bench-") as work:
        print(json.dumps(run(args, work), indent=2))


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    with real_service(args.corpus, args.capsules, work, args.deadline) as real:
        db = real.db
        (pages,) = one(db, "SELECT count(*) FROM pages")
        result: dict[str, Any] = {
            "machine": f"nproc {os.cpu_count()}, {cpu_model()}, load {os.getloadavg()[0]:.1f}",
            "capsules": len(real.hosts),
            "first_crawl_seconds": round(real.first_crawl_seconds, 1),
            "pages": pages,
        }
        result["pages_rechecked"] = one_by_one(args, db, real.capsules)
        result["host_rechecked"] = a_host(args, db, real.capsules)
        result["load_at_end"] = round(os.getloadavg()[0], 1)
        return result


def one_by_one(args: argparse.Namespace, db: Path, capsules: Path) -> dict[str, Any]:
    rows = []
    phase = random.Random(args.seed)
    for n, url in enumerate(pick(db, capsules, args.pages, args.seed)):
        # Each recheck at a random moment of the crawl's look cycle, not right after the
        # look that took the previous one (which would make every wait the longest).
        time.sleep(phase.uniform(0, DUE_POLL))
        word = f"zqrecheck{n}x"
        (next_visit,) = one(db, "SELECT next_visit FROM urls WHERE url = ?", url)
        before = fetched_at(db, url)
        change(capsules, url, word)
        wall = time.time()
        started = recheck(db, url)
        wait(lambda url=url, before=before: fetched_at(db, url) > before, url, args.deadline)
        fetched = time.monotonic() - started
        wait(lambda url=url, word=word: searchable(db, word, url), url, args.deadline)
        rows.append(
            {
                "url": url,
                "to_fetched": round(fetched, 2),
                "to_searchable": round(time.monotonic() - started, 2),
                "without_recheck_hours": round((next_visit - wall) / 3600, 1),
            }
        )
    searchable_s = [r["to_searchable"] for r in rows]
    return {
        "pages": rows,
        "to_searchable_median": statistics.median(searchable_s),
        "to_searchable_max": max(searchable_s),
        "to_fetched_median": statistics.median(r["to_fetched"] for r in rows),
        "without_recheck_hours_median": statistics.median(r["without_recheck_hours"] for r in rows),
    }


def a_host(args: argparse.Namespace, db: Path, capsules: Path) -> dict[str, Any]:
    """The capsule of median size among those with a searchable page: one page changed,
    the host rechecked."""
    conn = sqlite3.connect(db)
    sizes = conn.execute(
        "SELECT host, count(*) FROM urls WHERE state = 'done' GROUP BY host ORDER BY 2, 1"
    ).fetchall()
    conn.close()
    host = sizes[len(sizes) // 2][0]
    (url,) = pick_on(db, capsules, host)
    word = "zqrecheckhostx"
    change(capsules, url, word)
    wall = time.time()
    started = recheck(db, host)
    found = wait(lambda: searchable(db, word, url), url, args.deadline)
    (done,) = one(db, "SELECT count(*) FROM urls WHERE host = ? AND state = 'done'", host)
    every = wait(
        lambda: (
            one(
                db,
                "SELECT count(*) FROM urls u JOIN pages p ON p.url = u.url WHERE u.host = ?"
                " AND u.state IN ('done', 'not_found', 'refused') AND p.fetched_at < ?",
                host,
                wall,
            )[0]
            == 0
        ),
        f"every page of {host} fetched again",
        args.deadline,
    )
    return {
        "host": host,
        "pages_done": done,
        "changed_page_searchable": round(found, 2),
        "all_fetched_again": round(time.monotonic() - started, 2),
        "all_fetched_after_searchable": round(every, 2),
    }


def pick_on(db: Path, capsules: Path, host: str) -> list[str]:
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT url FROM pages WHERE host = ? AND text_indexed AND mime = 'text/gemini'"
        " AND duplicate_of IS NULL ORDER BY url",
        (host,),
    ).fetchall()
    conn.close()
    urls = [str(r[0]) for r in rows if "?" not in r[0] and file_of(capsules, r[0]).is_file()]
    return urls[len(urls) // 2 : len(urls) // 2 + 1]


if __name__ == "__main__":
    sys.exit(main())
