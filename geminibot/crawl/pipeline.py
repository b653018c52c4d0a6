"""What to commit for an answer: the crawl's item pipeline, as Scrapy has one (pure: no
I/O, no clock; the store's answers and the time are passed in).

For a page fetched, one small step each (:func:`page_item`): whether it is *not found*
(51, 404: asked again later, out of the index once it stays missing: :func:`not_found_item`),
*gone* (52, 410: out of the index), *unchanged* since the last visit (the same status, body and
canonical URL: only its fetch time is updated), a *duplicate* of a page with the same
body (the URL with the smaller :func:`~geminibot.store.freshness.canonical_key` is the
canonical one; the other becomes its alias, and its links are not followed), when it is
due again (:func:`~geminibot.store.freshness.next_interval`), when its content last
changed and when it went away (:func:`changed_and_gone`), and whether its content may
be kept (robots2.txt ``store: no`` or ``session-only``: the index keeps its metadata and
links only, and no WARC record), and whether it is a feed (:func:`page_feed`: read only
where it may be one; its entries' pages are followed as its links are, and a feed is
revisited down to :data:`~geminibot.store.freshness.FEED_MIN_REVISIT`). For a URL refused or failed, when it is asked again
(:func:`refused_revisit`, :func:`failed_revisit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from geminibot.crawl.page import Extracted
from geminibot.crawl.scope import Link
from geminibot.feeds.parse import Feed, read_feed, worth_reading
from geminibot.policy.site_policy import Bot, SitePolicy
from geminibot.store.crawlstore import DecisionRecord, FetchedPage, FetchRecord, Revisit
from geminibot.store.freshness import (
    Visit,
    canonical_key,
    delisted,
    is_gone,
    is_not_found,
    next_interval,
    not_found_delay,
    retry_delay,
)
from geminibot.store.pages import Page
from geminibot.urls import Scheme

#: robots2.txt ``store`` values under which no content may be persisted.
NO_STORE_VALUES = frozenset({"no", "session-only"})


def may_store(policy: SitePolicy, bot: Bot) -> bool:
    """Whether the host's robots2.txt lets ``bot`` keep what it fetched."""
    return policy.usage_map(bot).get("store") not in NO_STORE_VALUES


@dataclass(frozen=True)
class PageAnswer:
    """A page's answer and what the store knows of its URL, for :func:`page_item`."""

    decision: DecisionRecord
    fetch: FetchRecord
    extracted: Extracted
    protocol: Scheme
    previous: Visit | None  # the URL's last visit (None: never visited)
    original: str | None  # the canonical URL of another page with the same body, if any
    keeps_copies: bool  # :func:`may_store`
    role: str
    body: bytes = b""  # the response's body (read as a feed where it may be one)


def page_feed(page: Page, body: bytes, now: float) -> Feed | None:
    """The feed a page fetched at ``now`` is, if it is one: a live page of its own (not an
    alias), of a type and with links that may make a feed (:func:`worth_reading`)."""
    if not 20 <= page.status <= 29 or page.duplicate_of is not None:
        return None
    if not worth_reading(page.mime, page.url, (link.label for link in page.links)):
        return None
    return read_feed(page.url, page.mime, body, now)


def page_item(
    answer: PageAnswer, now: float, follow: Callable[[Sequence[str]], list[Link]]
) -> FetchedPage:
    """What to commit for a fetched page (``follow``: the links of it the crawl takes)."""
    page, links = answer.extracted.page, answer.extracted.links
    previous, original = answer.previous, answer.original
    if is_not_found(answer.protocol, page.status):
        return not_found_item(answer, now)
    gone = is_gone(answer.protocol, page.status)
    unchanged = (
        not gone
        and previous is not None
        and previous.status == page.status
        and previous.content_hash == page.content_hash
        and previous.duplicate_of == original
    )
    demote = None
    if original is not None and not unchanged:
        if canonical_key(page.url) < canonical_key(original):
            demote = original  # this URL is the better name of the body
        else:
            page, links = replace(page, duplicate_of=original, links=()), ()
    feed = None if unchanged or gone else page_feed(page, answer.body, now)
    was_feed = previous is not None and bool(previous.feed)
    if feed is not None:
        links = tuple(dict.fromkeys((*links, *(entry.url for entry in feed.entries))))
    interval = next_interval(
        previous.interval if previous else None,
        changed=not unchanged,
        feed=feed is not None or (unchanged and was_feed),
    )
    changed_at, gone_at = changed_and_gone(previous, page, gone, now)
    page = replace(page, changed_at=changed_at, gone_at=gone_at)
    if not answer.keeps_copies:
        # robots2.txt store: no / session-only: nothing of the content is persisted; the
        # index keeps the page's metadata and links only (and the archive no record).
        page = replace(page, title="", headings=(), text=None)
    return FetchedPage(
        answer.decision,
        answer.fetch,
        page,
        answer.role,
        () if unchanged or gone else follow(links),
        revisit=Revisit(None, previous.interval if previous else None)
        if gone
        else Revisit(now + interval, interval),
        unchanged=unchanged,
        gone=gone,
        demote=demote,
        feed=feed if answer.keeps_copies else None,
        was_feed=was_feed,
    )


def not_found_item(answer: PageAnswer, now: float) -> FetchedPage:
    """What to commit for a "not found" answer (51, 404): the URL is asked again after
    :func:`~geminibot.store.freshness.not_found_delay`; a page in the index keeps its last
    live answer there until it has stayed missing
    (:func:`~geminibot.store.freshness.delisted`), then the answer replaces it (out of
    the index, gone at ``now``); a URL never live (a broken link) is stored as the answer
    it gave, never counted gone."""
    page, previous = answer.extracted.page, answer.previous
    misses = (previous.misses if previous else 0) + 1
    since = now if previous is None or previous.missing_since is None else previous.missing_since
    live = (
        previous is not None
        and previous.status is not None
        and previous.gone_at is None
        and not is_not_found(answer.protocol, previous.status)
        and not is_gone(answer.protocol, previous.status)
    )
    listed = live and not delisted(misses, since, now)
    same = (
        previous is not None
        and previous.status == page.status
        and previous.content_hash == page.content_hash
    )
    if previous is not None and previous.status is not None:
        # (a page that stayed missing leaves the index now: it went away now)
        gone_at = now if live else previous.gone_at
        page = replace(page, changed_at=previous.changed_at, gone_at=gone_at)
    delay = not_found_delay(misses)
    return FetchedPage(
        answer.decision,
        answer.fetch,
        page,
        answer.role,
        (),
        revisit=Revisit(now + delay, previous.interval if previous else None),
        unchanged=same and not live,
        not_found=True,
        listed=listed,
    )


def changed_and_gone(
    previous: Visit | None, page: Page, gone: bool, now: float
) -> tuple[float | None, float | None]:
    """When the page's content last changed and when it went away, after this fetch at
    ``now``: a page that answers again changed now if its status or body differs from the
    last one stored (a first fetch is no change), and is live; a page gone keeps its last
    change and the time it first went away."""
    if previous is None or previous.status is None:  # no page stored before
        return None, now if gone else None
    if gone:
        return previous.changed_at, now if previous.gone_at is None else previous.gone_at
    same = previous.status == page.status and previous.content_hash == page.content_hash
    return previous.changed_at if same else now, None


def refused_revisit(previous: Visit | None, now: float) -> Revisit:
    """A URL the site policy refused is asked again when its interval says (a policy
    file may change its mind)."""
    interval = next_interval(previous.interval if previous else None, changed=False)
    return Revisit(now + interval, interval)


def failed_revisit(previous: Visit | None, now: float) -> Revisit:
    """A URL whose request failed is retried with back-off, a bounded number of times (the
    claim counted this attempt: see :mod:`geminibot.store.frontier`)."""
    delay = retry_delay(previous.attempts if previous else 1)
    return Revisit(None if delay is None else now + delay, previous.interval if previous else None)
