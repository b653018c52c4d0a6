"""The crawl's defaults fit a real round trip, and its memory does not grow with the
hosts that have work (issue 15 item 2)."""

from pathlib import Path

import trio
from crawl_fakes import FakeSite, generated_site

from geminibot.cli import build_parser
from geminibot.crawl.crawler import (
    DEFAULT_CONCURRENCY,
    WORKERS_PER_SLOT,
    Crawler,
    CrawlOptions,
    Response,
)
from geminibot.index import connect


def test_default_concurrency_is_128() -> None:
    """16 in flight cap a crawl at about 71 requests/s at a 100 ms round trip."""
    assert DEFAULT_CONCURRENCY == 128
    assert CrawlOptions().concurrency == 128
    args = build_parser().parse_args(["crawl", "--db", "x.db", "gemini://a.test/"])
    assert args.concurrency == 128


async def test_host_workers_bounded_per_request_slot(
    tmp_path: Path, autojump_clock: object
) -> None:
    """A waiting worker holds its host's policy and a claimed URL: at most
    WORKERS_PER_SLOT workers per request slot, the other hosts wait in the ready queue
    (every host is still crawled)."""
    hosts = 3 * WORKERS_PER_SLOT
    site = FakeSite(generated_site(hosts, 3), latency=1.0)
    crawler = Crawler(
        connect(tmp_path / "c.db"),
        site.fetch,
        CrawlOptions(test_range=True, concurrency=1),
        wall_clock=lambda: 1.7e9 + trio.current_time(),
    )
    workers: list[int] = []
    leased: list[int] = []

    async def fetch(url: str, **kw: object) -> Response:
        workers.append(len(crawler._running))
        leased.append(len(crawler.store.leased()))
        return await site.fetch(url, **kw)

    crawler.fetch = fetch
    crawler.seed([f"gemini://h{h}.test/" for h in range(hosts)])
    await crawler.run()
    assert max(workers) == WORKERS_PER_SLOT
    assert max(leased) <= WORKERS_PER_SLOT
    assert crawler.store.queued() == 0  # every host crawled to the end
    assert {url.split("/")[2] for url in site.urls()} == {f"h{h}.test" for h in range(hosts)}
