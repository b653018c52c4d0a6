"""The frontier and visited set (table ``urls``): one row per normalised URL the crawl ever
met, ``queued``, ``leased`` (claimed), ``done``, ``refused``, ``failed``, ``not_found``
(51/404: asked again later), ``gone`` (52/410) or ``trapped``; a finished URL is queued
again when it is due for a revisit (:mod:`geminibot.store.freshness`), or made due at once
by ``geminibot recheck`` (:mod:`geminibot.store.recheck`); a link met again to a
``not_found`` URL makes it due sooner (:func:`linked_again`).

:class:`Frontier` admits URLs in batches, written once for both engines: the hosts a batch
touches are locked in host order first (PostgreSQL; SQLite has one writer), so the trap
bounds of :mod:`geminibot.store.traps` are counted exactly across processes and no two
transactions deadlock. What holds, each by its tests: a ``kill -9`` leaves only ``leased``
rows to repair (``tests/store/test_store_frontier.py``, ``tests/crawl/test_crawl_kill.py``);
a URL left leased after :data:`MAX_URL_ATTEMPTS` is given up as ``failed``
(``tests/store/test_store_attempts.py``); a trapped URL is recorded with a refusing
decision, alike on both engines (``tests/store/test_store_traps.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from geminibot.store import statements as q
from geminibot.store import traps
from geminibot.store.freshness import NOT_FOUND_FIRST
from geminibot.store.statements import Engine
from geminibot.store.traps import CAP_REASON, FrontierLimits, trap_decision, trap_reason
from geminibot.urls import URL, host_key, host_of, parse_url

__all__ = ["MAX_URL_ATTEMPTS", "Claim", "Frontier", "host_key"]

#: Attempts at one URL (requests sent) cut short (by a crash, or an error while processing
#: it) before the URL is given up and recorded failed.
MAX_URL_ATTEMPTS = 3

#: Links to admit: (URL, depth, parent).
Links = Iterable[tuple[str, int, str | None]]


@dataclass(frozen=True)
class Claim:
    """A URL a worker holds the lease on."""

    url: str
    host: str
    depth: int


def give_up_params(now: float, **params: object) -> dict[str, object]:
    """The parameters of a :func:`~geminibot.store.statements.give_up` statement at
    ``now`` (with its scope's): URLs given up after :data:`MAX_URL_ATTEMPTS`."""
    return {**params, "now": now, "max": MAX_URL_ATTEMPTS}


def linked_again(url: str, now: float) -> dict[str, object]:
    """The parameters of :data:`~geminibot.store.statements.LINKED_AGAIN`: a link to the
    not-found ``url`` found again at ``now``."""
    return {"url": url, "now": now, "after": NOT_FOUND_FIRST}


def count_deep(paths: Iterable[Sequence[object]]) -> int:
    """The deep URLs (:func:`geminibot.store.traps.is_deep`) among rows of
    :data:`~geminibot.store.statements.DEEP_PATHS`."""
    return sum(traps.is_deep(str(row[0])) for row in paths)


def utc_date(timestamp: float) -> date:
    """The UTC date of a crawl clock's epoch seconds (the calendar trap's "today")."""
    return datetime.fromtimestamp(timestamp, UTC).date()


@dataclass
class _Counts:
    """A host's live URLs (``urls_total``) and deep URLs (``deep_urls``, None: not counted
    yet) while a batch is admitted (its row locked), and the counts it was read with."""

    total: int
    deep: int | None

    def __post_init__(self) -> None:
        self.was = (self.total, self.deep)

    def queued(self, path: str) -> None:
        """One more live URL, at ``path``."""
        self.total += 1
        if self.deep is not None and traps.is_deep(path):
            self.deep += 1


def _capped(known: tuple[str, str | None]) -> bool:
    """Whether a URL's (state, reason) says the per-host cap trapped it."""
    state, reason = known
    return state == "trapped" and str(reason).endswith(CAP_REASON)


def _wakes(known: tuple[str, str | None]) -> bool:
    """Whether a link met again changes a known URL: one the per-host cap trapped (queued
    again if its host has room), one not found (due sooner)."""
    return known[0] == "not_found" or _capped(known)


@dataclass
class Batch:
    """URLs on their way into the frontier (:meth:`Frontier.prepare`)."""

    #: What happened to each URL met, by normalised URL (the known ones first).
    result: dict[str, str] = field(default_factory=dict)
    #: The URLs to admit (not known, or trapped by the per-host cap), normalised.
    new: dict[str, tuple[URL, int, str | None]] = field(default_factory=dict)
    #: Their hosts' counts, the rows locked.
    counts: dict[str, _Counts] = field(default_factory=dict)
    #: Those of them the table holds, with their state and reason.
    known: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    #: The hosts that got newly queued URLs, with how many (:meth:`Frontier.admit`).
    woken: Counter[str] = field(default_factory=Counter)


class Frontier:
    """Admission of URLs into the ``urls`` table on one engine (``engine``'s statements;
    ``array`` turns a list into the engine's list parameter; ``exclusive``: one process
    writes the database, as on SQLite); ``clock`` gives wall-clock seconds."""

    def __init__(
        self,
        engine: Engine,
        array: Callable[[list[str]], object],
        clock: Callable[[], float],
        limits: FrontierLimits,
        *,
        exclusive: bool = False,
    ) -> None:
        self.sql = engine.sql
        self.array = array
        self.exclusive = exclusive
        self.clock = clock
        self.limits = limits

    def lock_hosts(self, conn: Any, hosts: Iterable[str]) -> dict[str, _Counts]:
        """Create the missing ``hosts`` rows and lock them all, in host order, until the
        transaction ends (:data:`~geminibot.store.statements.LOCK_HOSTS`); each one's
        counts. (``exclusive``: no other process writes, so only the missing rows are
        made, after the others are read.)"""
        ordered = sorted(set(hosts))
        now = self.clock()
        if not self.exclusive:
            conn.cursor().executemany(self.sql[q.ADD_HOST], [(host, now) for host in ordered])
        rows = conn.execute(self.sql[q.LOCK_HOSTS], {"hosts": self.array(ordered)}).fetchall()
        counts = {str(host): _Counts(int(total), deep) for host, total, deep in rows}
        missing = [(host, now) for host in ordered if host not in counts]
        if missing:
            conn.cursor().executemany(self.sql[q.ADD_HOST], missing)
            counts.update((host, _Counts(0, None)) for host, _ in missing)
        return counts

    def add(self, conn: Any, links: Links) -> dict[str, str]:
        """Put URLs in the frontier, in the caller's transaction (:meth:`prepare`, then
        :meth:`admit`). What happened to each, by normalised URL: ``"queued"``,
        ``"known"`` or ``"trapped: <bound>"``."""
        return self.admit(conn, self.prepare(conn, links))

    def prepare(self, conn: Any, links: Links, also: str | None = None) -> Batch:
        """The first half of :meth:`add`, before anything else is written in the
        transaction: the URLs the table holds as given are known without being parsed
        (most links of a page are); the others are normalised, and their hosts (with
        ``also``, the page's own) created and locked in host order, and only then looked
        up again (another process may have added one meanwhile; unless ``exclusive``)."""
        given: dict[str, tuple[int, str | None]] = {}
        for url, depth, parent in links:
            given.setdefault(url, (depth, parent))
        batch = Batch()
        known = self._states(conn, list(given)) if given else {}
        for url, (depth, parent) in given.items():
            if url in known and not _wakes(known[url]):
                batch.result.setdefault(url, "known")
                continue
            parsed = parse_url(url)
            batch.new.setdefault(str(parsed), (parsed, depth, parent))
        if batch.new:
            hosts = [host_of(parsed) for parsed, _, _ in batch.new.values()]
            batch.counts = self.lock_hosts(conn, [*hosts, *([also] if also else [])])
            if self.exclusive:  # (what was read holds: look up only the names not given)
                batch.known = {name: known[name] for name in batch.new if name in known}
                unseen = [name for name in batch.new if name not in given]
                batch.known.update(self._states(conn, unseen) if unseen else {})
            else:
                batch.known = self._states(conn, list(batch.new))
        return batch

    def admit(self, conn: Any, batch: Batch) -> dict[str, str]:
        """The second half of :meth:`add`: the trap bounds applied to the new URLs in the
        order met, a URL trapped by the per-host cap queued again once its host has room."""
        result, counts, known = batch.result, batch.counts, batch.known
        if not batch.new:
            return result
        now = self.clock()
        today = utc_date(now)
        queries: dict[tuple[str, str], int] = {}
        rows: list[tuple[Any, ...]] = []  # (ADD_URL's parameters)
        for url, (parsed, depth, parent) in batch.new.items():
            host, path, has_query = host_of(parsed), parsed.path, parsed.query is not None
            if has_query and (host, path) not in queries:
                queries[(host, path)] = self._count(conn, q.QUERIES_ON_PATH, host=host, path=path)
            host_counts = counts[host]
            if url in known:
                what = self._met_again(conn, url, known[url], host_counts.total, now)
            else:
                near = traps.calendar_neighbours(parsed, today)
                reason = trap_reason(
                    self.limits,
                    parsed,
                    depth,
                    host_counts.total,
                    queries.get((host, path)),
                    today=today,
                    deep_on_host=self._deep(conn, host, host_counts, path),
                    known=self._held(conn, near) | (near & result.keys()) if near else (),
                )
                what = "queued" if reason is None else f"trapped: {reason}"
                state = "trapped" if reason else "queued"
                rows.append((url, host, path, has_query, depth, parent, state, reason, now))
            result[url] = what
            if what == "queued":
                batch.woken[host] += 1
                host_counts.queued(path)
                if has_query:
                    queries[(host, path)] += 1
        self._insert(conn, rows, now)
        for host in sorted(counts):
            one = counts[host]
            if (one.total, one.deep) != one.was:
                params = {"total": one.total, "deep": one.deep, "host": host}
                conn.execute(self.sql[q.SET_HOST_COUNTS], params)
        return result

    def _count(self, conn: Any, statement: Any, **params: object) -> int:
        row = conn.execute(self.sql[statement], params).fetchone()
        return int(row[0]) if row else 0

    def _states(self, conn: Any, urls: list[str]) -> dict[str, tuple[str, str | None]]:
        """The state and reason of those of ``urls`` the table holds."""
        rows = conn.execute(self.sql[q.URL_STATES], {"urls": self.array(urls)}).fetchall()
        return {str(r[0]): (str(r[1]), r[2]) for r in rows}

    def _held(self, conn: Any, urls: Iterable[str]) -> set[str]:
        """Those of ``urls`` the frontier holds (in any state)."""
        return set(self._states(conn, list(urls)))

    def _deep(self, conn: Any, host: str, counts: _Counts, path: str) -> int | None:
        """The host's deep URLs not trapped, counted from its rows the first time (None:
        ``path`` is not deep, and they are not counted)."""
        if not traps.is_deep(path):
            return None
        if counts.deep is None:
            counts.deep = count_deep(conn.execute(self.sql[q.DEEP_PATHS], {"host": host}))
        return counts.deep

    def _insert(self, conn: Any, rows: list[tuple[Any, ...]], now: float) -> None:
        """Insert new ``urls`` rows (:data:`~geminibot.store.statements.ADD_URL`'s
        parameters) in the order met, and each trapped one's refusing decision."""
        if rows:
            conn.cursor().executemany(self.sql[q.ADD_URL], rows)
        trapped = [
            (url, host, False, trap_decision(reason), now)  # (LOG_DECISION's row)
            for url, host, _, _, _, _, _, reason, _ in rows
            if reason
        ]
        if trapped:
            conn.cursor().executemany(self.sql[q.LOG_DECISION], trapped)

    def _met_again(
        self, conn: Any, url: str, known: tuple[str, str | None], host_total: int, now: float
    ) -> str:
        """A known URL met again: ``queued`` again if the per-host cap trapped it and its
        host has room now (the cap counts live URLs); otherwise ``known`` (one not found
        made due sooner)."""
        if known[0] == "not_found":
            conn.execute(self.sql[q.LINKED_AGAIN], linked_again(url, now))
        if not _capped(known) or host_total >= self.limits.max_urls_per_host:
            return "known"
        conn.execute(self.sql[q.REQUEUE_CAPPED], {"now": now, "url": url})
        return "queued"
