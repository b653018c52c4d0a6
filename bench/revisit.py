"""A second day of the synthetic Geminispace: a revisit beside a crawl from scratch.

    .venv/bin/python bench/revisit.py [--hosts 12] [--urls 1200] [--change-rate 0.1]
        [--max-host-urls 200]

Serves the space on loopback (``bench/geminispace``), crawls day 0 with ``geminibot crawl``,
then day 1 two ways, side by side: ``crawl --refresh`` on the day-0 database (a revisit:
every page fetched again, only changed bodies re-indexed) and a crawl of day 1 into a new
database (what a crawler without revisits does). Reports seconds, requests, pages
re-indexed against the pages the space says changed, and database bytes. Every crawl is
bounded by ``--test-range`` (loopback only) and :data:`CRAWL_LIMIT` seconds.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from geminispace import Space, SpaceServer, serving
from geminispace.space import DOMAIN

#: Longest one crawl may take (seconds).
CRAWL_LIMIT = 1800.0
#: Default --max-host-urls: keeps the maze and calendar hosts from dominating the run.
MAX_HOST_URLS = 200


async def crawl(
    server: SpaceServer, db: Path, cap: int, *extra: str
) -> tuple[dict[str, Any], float]:
    space = server.space
    seeds = [f"gemini://{space.host(i)}/" for i in range(space.hosts)]
    argv = [sys.executable, "-m", "geminibot", "crawl", *seeds, "--db", str(db), *extra]
    argv += ["--test-range", "--allow-host", f"*.{DOMAIN}", "--json"]
    argv += ["--max-host-urls", str(cap), "--concurrency", "64"]
    argv += ["--connect-to", f"*.{DOMAIN}:1965:127.0.0.1:{server.port}"]
    started = time.monotonic()
    with trio.fail_after(CRAWL_LIMIT):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr.decode())
    return json.loads(done.stdout), time.monotonic() - started


def page_ids(db: Path) -> dict[str, tuple[int, str | None]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT url, id, content_hash FROM pages WHERE status = 20")
        return {url: (row_id, digest) for url, row_id, digest in rows}


def size(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


async def run(space: Space, cap: int) -> dict[str, Any]:
    server = SpaceServer(space)
    with tempfile.TemporaryDirectory() as tmp:
        revisit_db, fresh_db = Path(tmp) / "revisit.db", Path(tmp) / "fresh.db"
        async with serving(server):
            day0, t0 = await crawl(server, revisit_db, cap)
            before, bytes0 = page_ids(revisit_db), size(revisit_db)
            server.day = 1
            again, t1 = await crawl(server, revisit_db, cap, "--refresh")
            scratch, t2 = await crawl(server, fresh_db, cap)
        after = page_ids(revisit_db)
        changed = 0
        for url in before:
            host, _, path = url.removeprefix("gemini://").partition("/")
            i = space.index_of(host)
            if i is not None and path.startswith("p/") and path[2:-4].isdigit():
                changed += space.changed(i, int(path[2:-4]), 1)
        reindexed = sum(1 for u, v in before.items() if u in after and after[u][0] != v[0])
        return {
            "hosts": space.hosts,
            "urls": space.urls,
            "change_rate": space.change_rate,
            "max_host_urls": cap,
            "day0": {"seconds": round(t0, 1), "requests": day0["requests"], "bytes": bytes0},
            "day1_refresh": {
                "seconds": round(t1, 1),
                "requests": again["requests"],
                "pages_fetched": again["pages"],
                "unchanged": again["unchanged"],
                "reindexed": reindexed,
                "changed_in_space": changed,
                "bytes_added": size(revisit_db) - bytes0,
            },
            "day1_from_scratch": {
                "seconds": round(t2, 1),
                "requests": scratch["requests"],
                "pages_indexed": scratch["pages"],
                "bytes": size(fresh_db),
            },
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=12)
    parser.add_argument("--urls", type=int, default=1200)
    parser.add_argument("--max-host-urls", type=int, default=MAX_HOST_URLS)
    parser.add_argument("--change-rate", type=float, default=0.1)
    args = parser.parse_args()
    space = Space(args.hosts, args.urls, change_rate=args.change_rate, slow_seconds=0.05)
    print(json.dumps(trio.run(run, space, args.max_host_urls), indent=2))


if __name__ == "__main__":
    main()
