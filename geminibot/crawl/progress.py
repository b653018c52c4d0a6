"""The crawl's live counters (this run) and a few gauges, for the progress display and
the closing summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from geminibot.cliutil import counted, human_duration, wrapped
from geminibot.store.freshness import DAY, VANISHED_AFTER

if TYPE_CHECKING:
    from geminibot.crawl.warc import WarcArchive


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
    gone: int = 0  # URLs that answered 52/410 (out of the index)
    not_found: int = 0  # URLs that answered 51/404 (asked again later)
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
    #: The newest URL id the run looked at for URLs others queued (``poll_due``): a
    #: continuous crawl's sleep takes a newer one at once (a ``/submit`` as the run ended).
    newest_url: int = 0

    @property
    def rate(self) -> float:
        """Pages per second over the whole run (the display shows a recent window)."""
        return self.pages / self.elapsed if self.elapsed > 0 else 0.0


def summary(p: Progress, db: str, interrupted: bool, archive: WarcArchive | None) -> dict[str, Any]:
    """The closing summary for a script (``--json``)."""
    return {
        "db": str(db),
        "pages": p.pages,
        "requests": p.requests,
        "refused": p.refused,
        "excluded": p.excluded,
        "errors": p.errors,
        "last_error": p.last_error,
        "slow_downs": p.slow_downs,
        "revisits": p.revisits,
        "unchanged": p.unchanged,
        "gone": p.gone,
        "not_found": p.not_found,
        "vanished": p.vanished,
        "queued": p.queued,
        "hosts": p.hosts_seen,
        "hosts_skipped": p.hosts_skipped,
        "seconds": round(p.elapsed, 3),
        "pages_per_second": round(p.rate, 2),
        "interrupted": interrupted,
        "stopped_at": p.limit,
        "warc": str(archive.path) if archive is not None else None,
    }


def summary_lines(
    p: Progress, db: str, interrupted: bool, archive: WarcArchive | None
) -> list[str]:
    """The closing summary for a person: one fact a line, each within 80 columns but for
    the counts' digits and the database's name (the hosts' names and reasons servers gave
    are escaped, and wrapped: a Gemini server's reason is 1024 bytes at most)."""
    lines = [
        f"crawled {counted(p.pages, 'page')} ({counted(p.requests, 'request')}) in "
        f"{human_duration(p.elapsed)}, {p.rate:.1f} pages/s",
        f"{p.refused} refused by policy, {counted(p.errors, 'error')}, "
        f"{counted(p.slow_downs, 'slow-down')} obeyed",
    ]
    if p.revisits:
        lines.append(
            f"revisited: {counted(p.revisits, 'URL')} due again, "
            f"{counted(p.unchanged, 'page')} unchanged "
            "(not re-indexed)"
        )
    if p.not_found or p.gone:
        lines.append(
            f"not found (51/404): {counted(p.not_found, 'URL')}, asked again later; "
            f"gone (52/410): {counted(p.gone, 'URL')}"
        )
    if p.vanished:
        lines.append(
            f"vanished hosts: {counted(p.vanished, 'page')} out of the index (no answer for "
            f"{VANISHED_AFTER / DAY:g} days)"
        )
    if p.excluded:
        lines.append(f"excluded by --exclude: {counted(p.excluded, 'URL')}")
    for host, reason in sorted(p.hosts_skipped.items()):
        lines += wrapped(f"skipped for now: {host}: {reason}", "", "  ")
    if archive is not None:
        lines.append(f"WARC: {archive.path} ({counted(archive.records, 'record')})")
    if interrupted:
        lines.append(f"stopped: {counted(p.queued, 'URL')} queued; run the same command to resume")
    elif p.limit:
        lines.append(f"stopped at {p.limit}: {counted(p.queued, 'URL')} queued; run again to go on")
    elif p.queued:
        lines.append(f"{counted(p.queued, 'URL')} left in the queue (hosts skipped for now)")
    lines.append(f"index: {db}  (geminibot search QUERY --db {db})")
    return lines
