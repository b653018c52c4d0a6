"""What the crawl store keeps and hands back: a host's politeness state, a request, a
policy decision, a fetched page to commit, a cached policy file, a host lease."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from geminibot.policy import FetchOutcome
from geminibot.store.pages import Page


@dataclass(frozen=True)
class HostState:
    """A host's politeness state as persisted: last request's end and duration, the
    earliest next request (44 back-off) and the count of consecutive slow-downs."""

    last_end: float | None
    last_duration: float
    not_before: float
    slow_downs: int


@dataclass(frozen=True)
class FetchRecord:
    """One request sent (the crawl's access log), with the host's state after it."""

    url: str
    host: str
    status: int | None
    meta: str
    error: str | None
    started: float
    duration: float
    state: HostState

    def host_params(self) -> dict[str, object]:
        """The parameters of :data:`~geminibot.store.statements.HOST_AFTER_FETCH`."""
        s = self.state
        return {
            "last_end": s.last_end,
            "duration": s.last_duration,
            "not_before": s.not_before,
            "slow_downs": s.slow_downs,
            "failed": self.status is None,
            "started": self.started,
            "host": self.host,
        }

    def params(self) -> tuple[object, ...]:
        """The row of :data:`~geminibot.store.statements.LOG_FETCH`."""
        return (
            self.url,
            self.host,
            self.status,
            self.meta,
            self.error,
            self.started,
            self.duration,
        )


@dataclass(frozen=True)
class DecisionRecord:
    """One policy decision about a URL."""

    url: str
    host: str
    allowed: bool
    reason: str
    at: float

    def params(self) -> tuple[object, ...]:
        """The row of :data:`~geminibot.store.statements.LOG_DECISION`."""
        return (self.url, self.host, self.allowed, self.reason, self.at)


@dataclass(frozen=True)
class Revisit:
    """When a finished URL is due again (None: never) and its learned revisit interval
    (see :mod:`geminibot.store.freshness`). Its failed requests in a row are the
    frontier's ``attempts`` (see :mod:`geminibot.store.frontier`)."""

    next_visit: float | None
    interval: float | None = None


class EntryLike(Protocol):
    """What the store keeps of a feed's entry."""

    @property
    def url(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def published(self) -> float: ...


class FeedLike(Protocol):
    """What the store keeps of a feed (:class:`geminibot.feeds.parse.Feed` is one)."""

    @property
    def format(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def author(self) -> str | None: ...
    @property
    def entries(self) -> Sequence[EntryLike]: ...


@dataclass(frozen=True)
class FetchedPage:
    """A fetched URL to commit: its decision, its request, the page for the index (kept as
    ``role`` keeps pages) and its links to queue (url, depth, parent).

    ``unchanged``: the same status and body as last time: only its fetch time is updated
    (nothing re-indexed, no links queued). ``gone``: it answered 52/410: out of the index
    and of the host's live URLs. ``not_found``: it answered 51/404: its URL is
    ``not_found``, asked again later; ``listed``: its last live answer stays in the index
    (the page is not written; see :mod:`geminibot.store.freshness`). ``demote``: the
    canonical URL of the page's body until now, which becomes an alias of this page (see
    ``canonical_key``). ``feed``: the page read as a feed, written with it
    (:mod:`geminibot.store.feedstore`); ``was_feed``: the URL was a feed at its last visit
    (fetched unchanged, the feed's fetch time moves; changed and no longer a feed, or
    written gone or not found, its entries become history)."""

    decision: DecisionRecord
    fetch: FetchRecord
    page: Page
    role: str
    links: Iterable[tuple[str, int, str]]
    revisit: Revisit | None = None
    unchanged: bool = False
    gone: bool = False
    not_found: bool = False
    listed: bool = False
    demote: str | None = None
    feed: FeedLike | None = None
    was_feed: bool = False


@dataclass(frozen=True)
class CachedFile:
    """A policy file's last fetch: its RFC 9309 outcome, body and expiry."""

    host: str
    name: str  # "robots.txt", ...
    outcome: FetchOutcome
    status: int | None
    body: bytes | None
    fetched_at: float
    expires_at: float

    @classmethod
    def of(cls, host: str, name: str, row: Sequence[Any]) -> CachedFile:
        """The file from a row of ``robots`` (outcome, reason, status, body, fetched_at,
        expires_at: :data:`~geminibot.store.statements.POLICY_FILE`'s columns), as either
        engine reads it (PostgreSQL's bytea comes back as memoryview)."""
        kind, reason, status, body, fetched_at, expires_at = row
        outcome = FetchOutcome(kind, reason, None, expires_at - fetched_at)
        body = None if body is None else bytes(body)
        return cls(host, name, outcome, status, body, fetched_at, expires_at)

    @classmethod
    def fresh(
        cls, host: str, name: str, row: Sequence[Any] | None, now: float
    ) -> CachedFile | None:
        """The file of a :data:`~geminibot.store.statements.POLICY_FILE` row (see
        :meth:`of`), if there is one and it is still fresh at ``now``."""
        if row is None or row[5] <= now:
            return None
        return cls.of(host, name, row)

    def params(self) -> dict[str, object]:
        """The parameters of :data:`~geminibot.store.statements.SAVE_POLICY_FILE`."""
        return {
            "host": self.host,
            "name": self.name,
            "fetched_at": self.fetched_at,
            "expires_at": self.expires_at,
            "outcome": self.outcome.kind,
            "reason": self.outcome.reason,
            "status": self.status,
            "body": self.body,
        }


@dataclass(frozen=True)
class Lease:
    """A host leased to this crawl process. ``state``: the politeness state another
    process left it in, when the host changed hands (None: nothing to adopt)."""

    state: HostState | None


@dataclass(frozen=True)
class TLSRecord:
    """A host's TLS version, cipher and certificate facts, seen at ``seen`` (a row of
    ``tls_history``: a new one when any of them changes, else its ``last_seen`` moves)."""

    host: str
    tls_version: str
    cipher: str
    sha256: str
    spki_sha256: str
    subject: str
    issuer: str
    sans: tuple[str, ...]
    trust: str
    key_type: str
    key_bits: int | None
    not_before: float | None
    not_after: float | None
    name_matches: bool
    parsed: bool
    seen: float

    @classmethod
    def of(cls, row: Sequence[Any]) -> TLSRecord:
        """The record of a row of ``tls_history`` read in field order (``seen``: its
        ``last_seen``), as either engine reads it (SQLite's flags are integers)."""
        (host, version, cipher, sha256, spki, subject, issuer, sans, trust, key_type,
         key_bits, not_before, not_after, matches, parsed, seen) = row  # fmt: skip
        return cls(
            host,
            version,
            cipher,
            sha256,
            spki,
            subject,
            issuer,
            tuple(sans.split("\n")) if sans else (),
            trust,
            key_type,
            key_bits,
            not_before,
            not_after,
            bool(matches),
            bool(parsed),
            seen,
        )

    def params(self) -> dict[str, object]:
        """The parameters of :data:`~geminibot.store.statements.SAW_TLS`."""
        return {
            "host": self.host,
            "sha256": self.sha256,
            "tls_version": self.tls_version,
            "cipher": self.cipher,
            "seen": self.seen,
            "spki_sha256": self.spki_sha256,
            "subject": self.subject,
            "issuer": self.issuer,
            "sans": "\n".join(self.sans),
            "trust": self.trust,
            "key_type": self.key_type,
            "key_bits": self.key_bits,
            "not_before": self.not_before,
            "not_after": self.not_after,
            "name_matches": self.name_matches,
            "parsed": self.parsed,
        }
