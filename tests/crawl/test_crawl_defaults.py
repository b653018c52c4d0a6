"""The crawl's defaults fit a real round trip, and its requests in flight are bounded by
its workers."""

from pathlib import Path

import trio
from crawl_fakes import FakeSite, generated_site
from crawlers import sqlite_crawler

from geminibot.cli import build_parser
from geminibot.crawl.settings import DEFAULT_CONCURRENCY, CrawlOptions
from geminibot.store.db import connect


def test_default_concurrency_is_128() -> None:
    """16 in flight cap a crawl at about 71 requests/s at a 100 ms round trip."""
    assert DEFAULT_CONCURRENCY == 128
    assert CrawlOptions().concurrency == 128
    args = build_parser().parse_args(["crawl", "--db", "x.db", "gemini://a.test/"])
    assert args.concurrency == 128


async def test_requests_in_flight_are_bounded_by_the_concurrency(
    tmp_path: Path, autojump_clock: object
) -> None:
    """--concurrency 3: three workers, so at most three requests in flight, however many
    hosts have work; every host is still crawled to the end."""
    hosts = 12
    site = FakeSite(generated_site(hosts, 3), latency=1.0)
    crawler = sqlite_crawler(
        connect(tmp_path / "c.db"),
        site.fetch,
        CrawlOptions(test_range=True, concurrency=3),
        wall_clock=lambda: 1.7e9 + trio.current_time(),
    )
    crawler.seed([f"gemini://h{h}.test/" for h in range(hosts)])
    await crawler.run()
    assert site.max_in_flight == 3
    assert site.max_in_flight_per_host == 1
    assert crawler.store.queued() == 0  # every host crawled to the end
    assert {url.split("/")[2] for url in site.urls()} == {f"h{h}.test" for h in range(hosts)}
