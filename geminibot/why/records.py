"""What the crawl database holds about one URL or one host: the only I/O of
:mod:`geminibot.why`. Every read is bounded (the last :data:`HISTORY` answers, the first
:data:`LINKERS` pages linking to a URL, ...) and written once for both stores, as the
stores' own statements are (:mod:`geminibot.store.statements`): text with named
parameters (:mod:`geminibot.store.lookups`), compiled for the database's engine
(:class:`geminibot.store.database.Database`) on first use.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from geminibot.crawl.runrecord import RUN_OPTIONS, RunOptions
from geminibot.crawl.settings import DEFAULT_AGENT
from geminibot.policy.outcomes import FetchOutcome, Kind
from geminibot.policy.site_policy import Fetched
from geminibot.store import lookups
from geminibot.store.database import Database
from geminibot.urls import host_url

if TYPE_CHECKING:
    from geminibot.store.statements import Statement

#: Answers to a URL shown (its last requests, newest first).
HISTORY = 5
#: Pages shown that link to a URL.
LINKERS = 10
#: URLs shown that are duplicates of a URL.
ALIASES = 10
#: A host's requests read for the longest wait sat out between two of them (the newest).
WAIT_WINDOW = 2_000


@dataclass(frozen=True)
class UrlRow:
    """The URL's row of the frontier."""

    id: int
    state: str
    reason: str | None
    depth: int
    parent: str | None
    updated_at: float
    next_visit: float | None
    attempts: int
    misses: int = 0  # "not found" answers in a row
    missing_since: float | None = None  # the first of them


@dataclass(frozen=True)
class PageRow:
    """The URL's row of the index: its last answer."""

    status: int
    meta: str
    mime: str | None
    fetched_at: float
    duplicate_of: str | None
    redirect_to: str | None
    text_indexed: bool
    title: str


@dataclass(frozen=True)
class FetchRow:
    """One request of the crawl's access log."""

    url: str
    status: int | None
    meta: str
    error: str | None
    started: float
    duration: float


@dataclass(frozen=True)
class PolicyFileRow:
    """A policy file as the crawl last fetched it."""

    name: str
    outcome: str
    reason: str
    status: int | None
    body: bytes | None
    fetched_at: float
    expires_at: float

    def fetched(self) -> Fetched:
        """The file as the policy core reads it."""
        seconds = self.expires_at - self.fetched_at
        kind = cast(Kind, self.outcome)
        return Fetched(FetchOutcome(kind, self.reason, None, seconds), self.body)


@dataclass(frozen=True)
class HostRow:
    """The host's politeness state and whether the last run skipped it."""

    last_fetch_at: float | None
    last_duration: float | None
    not_before: float
    slow_downs: int
    skipped_reason: str | None


@dataclass(frozen=True)
class Settings:
    """Who crawled: role and product token, and the last run's options (None: the run did
    not record them)."""

    role: str = "indexer"
    agent: str = DEFAULT_AGENT
    run: RunOptions | None = None


@dataclass(frozen=True)
class UrlRecords:
    """Everything the crawl recorded about a URL (``url`` normalised, ``host`` its key)."""

    url: str
    host: str
    settings: Settings
    row: UrlRow | None = None
    page: PageRow | None = None
    history: tuple[FetchRow, ...] = ()
    aliases: tuple[str, ...] = ()
    linked_from: tuple[str, ...] = ()
    host_row: HostRow | None = None
    files: tuple[PolicyFileRow, ...] = ()
    #: The page kept in the index instead, when this one is a duplicate.
    kept: PageRow | None = None
    #: URLs of the host queued before this one (when it is queued).
    queued_before: int = 0
    #: The host's robots.txt's last answer (when the URL is queued).
    robots_answer: FetchRow | None = None


@dataclass(frozen=True)
class HostRecords:
    """Everything the crawl recorded about a host (``host`` its key)."""

    host: str
    settings: Settings
    host_row: HostRow | None = None
    files: tuple[PolicyFileRow, ...] = ()
    states: dict[str, int] = field(default_factory=dict)
    pages: int = 0
    searchable: int = 0
    duplicates: int = 0
    longest_wait: float | None = None
    #: The web side of the host (``https://HOST``) as the crawl saw it: its key and files.
    web_host: str | None = None
    web_files: tuple[PolicyFileRow, ...] = ()


class Reader:
    """Reads the records from a crawl database of either engine."""

    def __init__(self, database: Database) -> None:
        self.conn = database
        self.sql = database.sql

    def _rows(self, statement: Statement, **params: object) -> list[Any]:
        return list(self.conn.execute(self.sql[statement], params).fetchall())

    def _one(self, statement: Statement, **params: object) -> Any:
        return self.conn.execute(self.sql[statement], params).fetchone()

    def settings(self) -> Settings:
        get = self.conn.setting
        return Settings(
            get("role") or "indexer",
            get("agent") or DEFAULT_AGENT,
            RunOptions.from_json(get(RUN_OPTIONS)),
        )

    def host_row(self, host: str) -> HostRow | None:
        row = self._one(lookups.HOST_ROW, host=host)
        return None if row is None else HostRow(row[0], row[1], row[2], int(row[3]), row[4])

    def files(self, host: str) -> tuple[PolicyFileRow, ...]:
        return tuple(
            PolicyFileRow(
                str(r[0]), str(r[1]), str(r[2]), r[3], None if r[4] is None else bytes(r[4]), *r[5:]
            )
            for r in self._rows(lookups.FILE_ROWS, host=host)
        )

    def page(self, url: str) -> PageRow | None:
        r = self._one(lookups.PAGE_ROW, url=url)
        if r is None:
            return None
        return PageRow(int(r[0]), str(r[1]), r[2], float(r[3]), r[4], r[5], bool(r[6]), str(r[7]))

    def url(self, url: str, host: str, raw: str | None = None) -> UrlRecords:
        """The records of a normalised ``url`` on ``host`` (``raw``: the URL as given,
        which a page may link to as it is)."""
        r = self._one(lookups.URL_ROW, url=url)
        row = (
            None
            if r is None
            else UrlRow(
                int(r[0]), str(r[1]), r[2], int(r[3]), r[4], r[5], r[6], int(r[7]), int(r[8]), r[9]
            )
        )
        page = self.page(url)
        kept = self.page(page.duplicate_of) if page and page.duplicate_of else None
        linkers = {str(x[0]) for x in self._rows(lookups.LINKER_ROWS, url=url, limit=LINKERS)}
        if raw is not None and raw != url:
            linkers.update(
                str(x[0]) for x in self._rows(lookups.LINKER_ROWS, url=raw, limit=LINKERS)
            )
        before, robots = 0, None
        if row is not None and row.state == "queued":
            before = int(self._one(lookups.QUEUED_BEFORE, host=host, id=row.id)[0])
            last = self._one(lookups.LAST_FETCH, url=host_url(host, "/robots.txt"))
            robots = None if last is None else FetchRow(str(last[0]), *last[1:])
        return UrlRecords(
            url,
            host,
            self.settings(),
            row,
            page,
            tuple(
                FetchRow(str(f[0]), *f[1:])
                for f in self._rows(lookups.HISTORY_ROWS, url=url, limit=HISTORY)
            ),
            tuple(str(a[0]) for a in self._rows(lookups.ALIAS_ROWS, url=url, limit=ALIASES)),
            tuple(sorted(linkers)[:LINKERS]),
            self.host_row(host),
            self.files(host),
            kept,
            before,
            robots,
        )

    def host(self, host: str) -> HostRecords:
        # The frontier's statements (SQLAlchemy): imported by the first host asked about.
        from geminibot.store import statements as q

        pages, searchable, duplicates = self._one(lookups.PAGE_COUNTS, host=host)
        web_host = web_files = None
        if "://" not in host:
            for key in (f"https://{host}", f"http://{host}"):
                files = self.files(key)
                if files:
                    web_host, web_files = key, files
                    break
        return HostRecords(
            host,
            self.settings(),
            self.host_row(host),
            self.files(host),
            {str(s): int(n) for s, n in self._rows(q.HOST_STATES_OF, host=host)},
            int(pages),
            int(searchable),
            int(duplicates),
            longest_wait(self._rows(lookups.WAITS, host=host, limit=WAIT_WINDOW)),
            web_host,
            web_files or (),
        )


def longest_wait(rows: list[Any]) -> float | None:
    """The longest time between the end of one request and the start of the next, of
    (started_at, duration) rows newest first; None with fewer than two."""
    ordered = sorted((float(s), float(d)) for s, d in rows)
    gaps = [b[0] - (a[0] + a[1]) for a, b in itertools.pairwise(ordered)]
    return max(gaps) if gaps else None
