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
- A URL that answers "gone" (Gemini ``52``, HTTP ``410``) leaves the index and the
  frontier's live URLs: its state becomes ``gone``, and it is not asked again (but by
  ``geminibot recheck``).
- A URL that answers "not found" (Gemini ``51``, HTTP ``404``: it may come back) is
  ``not_found``: asked again after :data:`NOT_FOUND_FIRST`, the interval doubling at each
  not-found answer in a row (``urls.misses``, since ``urls.missing_since``) up to
  :data:`NOT_FOUND_MAX`, for as long as it stays missing. A page that was in the index
  stays there with its last answer until it has stayed missing: at its
  :data:`NOT_FOUND_DELIST_MISSES`-th not-found answer in a row, and
  :data:`NOT_FOUND_DELIST_AFTER` after the first (:func:`delisted`); then it leaves the
  index. A link to it found again (on a page new or changed) makes it due at most
  :data:`NOT_FOUND_FIRST` after its last answer. A first crawl's broken links are
  ``not_found``, not ``gone``. Any other answer ends the run of misses.
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
#: Statuses saying a URL is gone for good, per protocol.
GONE_STATUSES: dict[Scheme, frozenset[int]] = {
    "gemini": frozenset({52}),
    "http": frozenset({410}),
}
#: Statuses saying a URL is not found (it may come back), per protocol.
NOT_FOUND_STATUSES: dict[Scheme, frozenset[int]] = {
    "gemini": frozenset({51}),
    "http": frozenset({404}),
}
#: Interval before a URL that answered "not found" once is asked again.
NOT_FOUND_FIRST = 1 * DAY
#: Longest interval between two asks of a URL that stays not found.
NOT_FOUND_MAX = 32 * DAY
#: Not-found answers in a row after which a page leaves the index (and at least
#: NOT_FOUND_DELIST_AFTER after the first).
NOT_FOUND_DELIST_MISSES = 3
#: Seconds from a page's first not-found answer in a row before it may leave the index.
NOT_FOUND_DELIST_AFTER = 3 * DAY


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
    misses: int = 0  # its not-found answers in a row (urls.misses)
    missing_since: float | None = None  # the first of them (urls.missing_since)
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
    """Whether ``status`` says the URL is gone for good (52, 410)."""
    return status is not None and status in GONE_STATUSES[protocol]


def is_not_found(protocol: Scheme, status: int | None) -> bool:
    """Whether ``status`` says the URL is not found (51, 404)."""
    return status is not None and status in NOT_FOUND_STATUSES[protocol]


def not_found_delay(misses: int) -> float:
    """Seconds before asking again a URL that has now answered "not found" ``misses``
    times in a row: :data:`NOT_FOUND_FIRST`, doubled at each further one, at most
    :data:`NOT_FOUND_MAX`."""
    return min(NOT_FOUND_MAX, NOT_FOUND_FIRST * 2.0 ** max(0, min(misses, 64) - 1))


def delisted(misses: int, since: float, now: float) -> bool:
    """Whether a page not found ``misses`` times in a row, the first at ``since``, has
    stayed missing long enough to leave the index at ``now``."""
    return misses >= NOT_FOUND_DELIST_MISSES and now - since >= NOT_FOUND_DELIST_AFTER


def canonical_key(url: str) -> tuple[int, str]:
    """Of several URLs with one body, the canonical one has the smallest key: the
    shortest URL (no query, fewest segments), then the first in code-point order."""
    return len(url), url
