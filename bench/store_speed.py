"""The SQLite store's CPU per page without the network: the synthetic space's pages put
through :class:`~geminibot.store.crawlstore.SqliteStore` as the crawl loop does (``claim``,
``hold_host``, ``previous``, ``duplicate_of``, ``fetched``), hosts taken in turn, each
call committed (``batch=False``) and batched (``batch=True``, as the crawl loop opens it).

    nice -n 19 .venv/bin/python bench/store_speed.py [--pages 6000] [--hosts 400]
        [--urls 20000] [--cache-kib 2000,65536]

``--cache-kib``: batched again with each of these SQLite page caches (KiB; the store's
default is :data:`~geminibot.store.crawlstore.CACHE_KIB`).

``--index-cost NAME [--rounds N]``: instead, batched runs without and with one of the
schema's indexes (:data:`WEIGHED_INDEXES`), alternating, N of each (default 5): what that
index costs a crawl's store, beside the run-to-run spread. The cost of an index grows with
the table it keeps in order, so give it as many pages as the crawls it is for.

Reports the CPU seconds (``time.process_time``) spent in the store's calls only, per page;
building the answers and extracting the pages is not counted.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from geminispace.space import Space  # noqa: E402
from machine import cpu_model  # noqa: E402

from geminibot.crawl.adapters import FetchResult, adapter_for  # noqa: E402
from geminibot.store.crawlstore import (  # noqa: E402
    CACHE_KIB,
    DecisionRecord,
    FetchedPage,
    FetchRecord,
    HostState,
    Revisit,
    SqliteStore,
)
from geminibot.store.db import connect  # noqa: E402
from geminibot.store.freshness import next_interval  # noqa: E402
from geminibot.urls import host_name, normalise  # noqa: E402

#: The indexes ``--index-cost`` weighs: what they serve (every new database has them).
WEIGHED_INDEXES = {
    "fetches_url": "a URL's last answers (why, /check)",
    "fetches_host_started": "a host's newest requests (why, /check: the longest wait)",
    "links_target": "a page's incoming links (/backlinks, anchor text, authority)",
}


def store_cpu(
    space: Space,
    pages: int,
    db: Path,
    batch: bool,
    cache_kib: int = CACHE_KIB,
    extra_index: str | None = None,
) -> tuple[int, float]:
    """Pages committed and the store's CPU seconds for them (``extra_index``: a
    statement run on the new database first)."""
    conn = connect(db)
    if extra_index is not None:
        conn.execute(extra_index)
        conn.commit()
    now = [1_700_000_000.0]
    store = SqliteStore(conn, lambda: now[0], batch=batch, cache_kib=cache_kib)
    store.seed(space.seeds())
    store.recover()
    hosts = list(store.hosts_with_work())
    done, cpu, turn = 0, 0.0, 0
    while done < pages and hosts:
        host = hosts[turn % len(hosts)]
        turn += 1
        now[0] += 0.01
        started = time.process_time()
        claim = store.claim(host, "bench")
        if claim is not None:
            store.hold_host(host, "bench", claim.url)  # right before its request
        cpu += time.process_time() - started
        if claim is None:
            hosts.remove(host)
            continue
        name = host_name(host)
        answer = space.respond(name, claim.url.split(name, 1)[1] or "/")
        response = FetchResult(answer.status, answer.meta, answer.body)
        extracted = adapter_for(host).extract(claim.url, host, response, now[0])
        state = HostState(now[0], 0.01, now[0], 0)
        record = FetchRecord(claim.url, host, answer.status, answer.meta, None, now[0], 0.01, state)
        links = []
        for raw in extracted.links:
            try:
                links.append((normalise(raw), claim.depth + 1, claim.url))
            except ValueError:
                continue
        interval = next_interval(None, changed=True)
        page = extracted.page
        started = time.process_time()
        store.previous(claim.url)
        if page.content_hash is not None:
            store.duplicate_of(page.content_hash, page.url)
        woken = store.fetched(
            FetchedPage(
                DecisionRecord(claim.url, host, True, "allowed", now[0]),
                record,
                page,
                "indexer",
                links,
                revisit=Revisit(now[0] + interval, interval),
            )
        )
        cpu += time.process_time() - started
        hosts += [h for h in woken if h not in hosts]
        done += 1
    started = time.process_time()
    store.end_run()
    cpu += time.process_time() - started
    conn.close()
    return done, cpu


def cache_sizes(text: str) -> list[int]:
    """``--cache-kib``: positive KiB, comma-separated."""
    try:
        sizes = [int(k) for k in text.split(",") if k.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not KiB numbers: {text!r}") from None
    if any(k <= 0 for k in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive: {text!r}")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=6000)
    parser.add_argument("--hosts", type=int, default=400)
    parser.add_argument("--urls", type=int, default=20_000)
    parser.add_argument(
        "--cache-kib", type=cache_sizes, default=[], help="e.g. 2000,65536 (batched runs)"
    )
    parser.add_argument(
        "--index-cost",
        choices=sorted(WEIGHED_INDEXES),
        metavar="NAME",
        help="batched runs without and with this index, alternating: "
        + "; ".join(f"{name}, {what}" for name, what in sorted(WEIGHED_INDEXES.items())),
    )
    parser.add_argument("--rounds", type=int, default=5, help="runs of each (--index-cost)")
    args = parser.parse_args()
    caches: list[int] = args.cache_kib
    space = Space(args.hosts, args.urls)
    print(f"machine: nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
    print(f"load average: {os.getloadavg()}")
    if args.index_cost:
        compare_index(space, args.pages, args.index_cost, args.rounds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(False, CACHE_KIB), (True, CACHE_KIB)] if not caches else []
        runs += [(True, k) for k in caches]
        for n, (batch, cache) in enumerate(runs):
            db = Path(tmp) / f"{n}.db"
            pages, cpu = store_cpu(space, args.pages, db, batch, cache)
            label = f"batched, cache {cache} KiB" if batch else "each call committed"
            print(f"{label}: {pages} pages, store CPU {1000 * cpu / max(pages, 1):.3f} ms/page")


def compare_index(space: Space, pages: int, name: str, rounds: int) -> None:
    """Batched runs without and with the index ``name``, alternating; each run's store
    CPU and database size per page, then the median, min and max of each side."""
    results: dict[str, list[float]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(rounds):
            for label, figures in results.items():
                db = Path(tmp) / f"{label}-{n}.db"
                drop = f"DROP INDEX {name}" if label == "without" else None
                done, cpu = store_cpu(space, pages, db, True, extra_index=drop)
                figures.append(1000 * cpu / max(done, 1))
                size = db.stat().st_size / max(done, 1)
                print(
                    f"round {n + 1}, {label} {name}: {figures[-1]:.3f} ms/page,"
                    f" database {size:,.0f} bytes/page"
                )
                db.unlink()
    for label, figures in results.items():
        print(
            f"{label} {name}: median {statistics.median(figures):.3f} ms/page,"
            f" min {min(figures):.3f}, max {max(figures):.3f} ({len(figures)} runs)"
        )


if __name__ == "__main__":
    main()
