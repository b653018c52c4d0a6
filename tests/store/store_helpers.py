"""What the store tests share: a settable clock and tight trap bounds."""

from __future__ import annotations

from geminibot.crawl.frontier import Limits


class Clock:
    """A settable clock for the store (the crawl's wall-clock seconds)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


LIMITS = Limits(max_depth=3, max_url_length=60, max_queries_per_path=2, max_urls_per_host=6)
