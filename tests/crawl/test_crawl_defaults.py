"""The crawl's defaults fit a real round trip (issue 15 item 2)."""

from geminibot.cli import build_parser
from geminibot.crawl.crawler import DEFAULT_CONCURRENCY, CrawlOptions


def test_default_concurrency_is_128() -> None:
    """16 in flight cap a crawl at about 71 requests/s at a 100 ms round trip."""
    assert DEFAULT_CONCURRENCY == 128
    assert CrawlOptions().concurrency == 128
    args = build_parser().parse_args(["crawl", "--db", "x.db", "gemini://a.test/"])
    assert args.concurrency == 128
