"""The crawl's live counters (this run) and a few gauges, for the progress display and
the closing summary."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Progress:
    """Live counters (this run) and a few gauges, for the progress display."""

    started: float
    pages: int = 0
    requests: int = 0
    errors: int = 0
    refused: int = 0
    slow_downs: int = 0
    revisits: int = 0  # finished URLs queued again when the run started (due, or --refresh)
    unchanged: int = 0  # revisited pages found unchanged (not re-indexed)
    gone: int = 0  # URLs that answered 51/52 (out of the index)
    vanished: int = 0  # pages out of the index at the end: their host vanished (freshness)
    queued: int = 0
    hosts_active: int = 0
    hosts_seen: int = 0
    excluded: int = 0
    last_error: str | None = None  # the last request's error, for the closing line
    hosts_skipped: dict[str, str] = field(default_factory=dict)
    elapsed: float = 0.0
    in_flight: int = 0
    #: Requests allowed in flight: ``concurrency``, one per worker.
    in_flight_limit: int = 0
    #: What the crawl waits for when nothing is in flight: (host, seconds until its turn).
    next_request: tuple[str, float] | None = None
    #: Why the crawl ended before its queue was empty ("--max-pages", "--max-time"), if so.
    limit: str | None = None

    @property
    def rate(self) -> float:
        """Pages per second over the whole run (the display shows a recent window)."""
        return self.pages / self.elapsed if self.elapsed > 0 else 0.0
