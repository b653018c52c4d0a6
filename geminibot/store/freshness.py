"""When a URL is visited again, and what a revisit found (pure: no I/O, no clock).

The rules (docs/crawl.md, "Keeping the index fresh"):

- A page is revisited on an interval learned from how often it changed: the first visit
  sets :data:`INITIAL_REVISIT`; a revisit that finds the page changed halves the interval,
  one that finds it unchanged doubles it, always within [:data:`MIN_REVISIT`,
  :data:`MAX_REVISIT`]. "Changed" means another status or another body (SHA-256).
  A feed (docs/feeds.md) follows the same rule down to :data:`FEED_MIN_REVISIT`: one
  that keeps changing is read every hour or so, always at its capsule's pace (the
  revisit only queues the URL; the host's politeness decides when it is fetched).
- A URL whose request failed (network, TLS, a cut answer) is retried after
  :data:`RETRY_BASE` x 2^(attempts - 1), at most :data:`MAX_REVISIT`, for
  :data:`MAX_ATTEMPTS` attempts in a row; then it stays ``failed`` and is not retried
  (``crawl --refresh`` tries it once more). The attempts are the frontier's
  ``urls.attempts`` (:mod:`geminibot.store.frontier`): requests since the last answer.
- A URL that answers "not found" or "gone" (Gemini ``51``/``52``, HTTP ``404``/``410``)
  leaves the index and the frontier's live URLs: its state becomes ``gone``.
- A host *vanishes* when every request to it has gone unanswered (network, DNS, TLS: no
  status) for at least :data:`VANISHED_AFTER` and at least :data:`VANISHED_FAILURES`
  requests in a row (``hosts.failures``, since ``hosts.failing_since``; any answer ends
  the run of failures), while some other host answered after its first failure (a crawler
  that lost its own network takes nothing out). At the end of a crawl its pages leave the
  search index (text, title, links; their ``pages`` rows keep status and fetch time, their
  URLs stay in the frontier, retried as before) and their aliases on other hosts are
  queued again (the body finds a canonical URL that answers). A page that answers again
  is indexed again, even with the same body (its hash was cleared with its text).
- The fetch and decision logs keep :data:`LOG_RETENTION_DAYS` days.
"""

from __future__ import annotations

from dataclasses import dataclass

from geminibot.urls import Scheme

DAY = 86_400.0
#: Revisit interval of a page seen once.
INITIAL_REVISIT = 1 * DAY
#: Shortest revisit interval, however often a page changes.
MIN_REVISIT = 6 * 3600.0
#: Shortest revisit interval of a feed, however often it changes.
FEED_MIN_REVISIT = 3600.0
#: Longest revisit interval, however long a page stays the same.
MAX_REVISIT = 32 * DAY
#: First retry of a failed URL; each further failure doubles it (up to MAX_REVISIT).
RETRY_BASE = 3600.0
#: Failed requests in a row after which a URL is no longer retried.
MAX_ATTEMPTS = 5
#: A host unanswered for this long (and VANISHED_FAILURES requests) has vanished.
VANISHED_AFTER = 7 * DAY
#: Unanswered requests in a row a vanished host has had, at least.
VANISHED_FAILURES = 5
#: Days of the ``fetches`` and ``decisions`` logs kept; older rows are pruned when a crawl
#: starts.
LOG_RETENTION_DAYS = 30
#: Statuses saying a URL no longer exists, per protocol.
GONE_STATUSES: dict[Scheme, frozenset[int]] = {
    "gemini": frozenset({51, 52}),
    "http": frozenset({404, 410}),
}


@dataclass(frozen=True)
class Visit:
    """What the store remembers of a URL's last visit."""

    status: int | None
    content_hash: str | None
    duplicate_of: str | None
    interval: float | None  # None: never fetched with this rule (a database from before it)
    attempts: int  # requests since the last answer (urls.attempts): failures in a row
    changed_at: float | None = None  # when its page's content last changed (pages.changed_at)
    gone_at: float | None = None  # when its page went away (pages.gone_at; None: live)
    feed: bool = False  # it was read as a feed (a row in ``feeds``)


def next_interval(previous: float | None, changed: bool, feed: bool = False) -> float:
    """The revisit interval after a visit that found the page (a ``feed``, or not)
    ``changed`` (or not)."""
    if previous is None:
        return INITIAL_REVISIT
    interval = previous / 2 if changed else previous * 2
    return min(MAX_REVISIT, max(FEED_MIN_REVISIT if feed else MIN_REVISIT, interval))


def retry_delay(attempts: int) -> float | None:
    """Seconds before retrying a URL that has now failed ``attempts`` times in a row;
    None when it is not retried any more."""
    if attempts >= MAX_ATTEMPTS:
        return None
    return min(MAX_REVISIT, RETRY_BASE * 2.0 ** max(0, attempts - 1))


def is_gone(protocol: Scheme, status: int | None) -> bool:
    return status is not None and status in GONE_STATUSES[protocol]


def canonical_key(url: str) -> tuple[int, str]:
    """Of several URLs with one body, the canonical one has the smallest key: the
    shortest URL (no query, fewest segments), then the first in code-point order."""
    return len(url), url
