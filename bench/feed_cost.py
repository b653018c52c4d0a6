"""What reading feeds adds to the crawl's CPU per page (issue 57): the crawl's item
pipeline (``page_item``) over the same extracted pages with feed reading and without it
(``page_feed`` replaced by one returning None), alternated, ``--rounds`` of each; and the
cost of reading a feed page itself.

    nice -n 10 .venv/bin/python bench/feed_cost.py [--hosts 400] [--urls 20000]
        [--pages 5000] [--rounds 5] [--capsules ../shared/real-capsules/capsules]

The pages are the synthetic space's (``bench/geminispace``: mostly no feed, the common
case, where only a scan of the link labels is added; one host in ten has a gemlog whose
index is a gemsub feed) and, with ``--capsules``, every
``.gmi`` file of a folder of real capsules (several gemlog indexes among them: gemsub
feeds, read in full). Only the pipeline is timed (``time.process_time``), not extraction:
the crawl's whole CPU per page is ``bench/space_crawl.py``'s figure, to compare with.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from geminispace.space import Space  # noqa: E402
from machine import cpu_model  # noqa: E402

from geminibot.crawl import pipeline  # noqa: E402
from geminibot.crawl.page import extract  # noqa: E402
from geminibot.crawl.pipeline import PageAnswer, page_item  # noqa: E402
from geminibot.store.crawlstore import DecisionRecord, FetchRecord, HostState  # noqa: E402

NOW = 1_750_000_000.0
GMI = "text/gemini; charset=utf-8"


def space_pages(hosts: int, urls: int, pages: int) -> list[tuple[str, str, bytes]]:
    """The first ``pages`` answers of the synthetic space, breadth first from its seeds:
    (URL, meta, body)."""
    space = Space(hosts, urls)
    queue, seen, out = list(space.seeds()), set(space.seeds()), []
    while queue and len(out) < pages:
        url = queue.pop(0)
        host = url.split("/")[2]
        answer = space.respond(host, "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/")
        out.append((url, answer.meta, answer.body))
        extracted = extract(url, host, answer.status, answer.meta, answer.body, NOW)
        for link in extracted.links:
            if link not in seen and link.startswith("gemini://"):
                seen.add(link)
                queue.append(link)
    return out


def capsule_pages(folder: Path) -> list[tuple[str, str, bytes]]:
    """Every ``.gmi`` file of the capsules in ``folder`` (one folder per host)."""
    out = []
    for path in sorted(folder.rglob("*.gmi")):
        host = path.relative_to(folder).parts[0]
        rel = "/".join(path.relative_to(folder / host).parts)
        out.append((f"gemini://{host}/{rel}", GMI, path.read_bytes()))
    return out


def answers(pages: list[tuple[str, str, bytes]]) -> list[PageAnswer]:
    made = []
    for url, meta, body in pages:
        host = url.split("/")[2]
        extracted = extract(url, host, 20, meta, body, NOW)
        decision = DecisionRecord(url, host, True, "allowed", NOW)
        fetch = FetchRecord(url, host, 20, meta, None, NOW, 0.1, HostState(NOW, 0.1, 0, 0))
        made.append(
            PageAnswer(decision, fetch, extracted, "gemini", None, None, True, "indexer", body)
        )
    return made


def pipeline_cpu(items: list[PageAnswer], feeds: bool) -> float:
    """CPU seconds of ``page_item`` over ``items`` (``feeds``: feed reading as it is)."""
    real = pipeline.page_feed
    if not feeds:
        pipeline.page_feed = lambda page, body, now: None  # type: ignore[assignment]
    try:
        started = time.process_time()
        for item in items:
            page_item(item, NOW, lambda links: [])
        return time.process_time() - started
    finally:
        pipeline.page_feed = real


def alternated(items: list[PageAnswer], rounds: int) -> dict[str, float]:
    """Median µs per page without and with feed reading, ``rounds`` runs of each,
    alternated (the machine is shared: each run sees the same noise as its neighbour)."""
    runs: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for feeds in (False, True):
            runs[feeds].append(pipeline_cpu(items, feeds))
    per_page: Callable[[list[float]], float] = lambda xs: 1e6 * statistics.median(xs) / len(items)  # noqa: E731
    without, with_feeds = per_page(runs[False]), per_page(runs[True])
    return {"pages": len(items), "without_us": without, "with_us": with_feeds,
            "added_us": with_feeds - without}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=400)
    parser.add_argument("--urls", type=int, default=20_000)
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--capsules", type=Path, help="a folder of real capsules")
    args = parser.parse_args()
    print(f"machine: nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
    sets = {"synthetic space": space_pages(args.hosts, args.urls, args.pages)}
    if args.capsules is not None:
        sets["real capsules"] = capsule_pages(args.capsules)
    for name, pages in sets.items():
        items = answers(pages)
        feeds = sum(1 for item in items if pipeline.page_feed(item.extracted.page, item.body, NOW))
        got = alternated(items, args.rounds)
        print(
            f"{name}: {got['pages']} pages ({feeds} feeds): page_item "
            f"{got['without_us']:.1f} µs/page without feed reading, "
            f"{got['with_us']:.1f} µs/page with it (+{got['added_us']:.1f} µs)"
        )


if __name__ == "__main__":
    main()
