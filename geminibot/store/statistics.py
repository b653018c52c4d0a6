"""What a crawl database holds, counted, and its URLs listed: the reads of ``geminibot
stats``, the search capsule's ``/stats`` and the service's metrics
(:mod:`geminibot.index.stats` and :mod:`geminibot.index.freshness` make figures of
them). Written once for both engines (compiled per engine, as
:mod:`geminibot.store.statements`' are); each read takes an open
:class:`~geminibot.store.database.Database`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from geminibot.store.traps import TRAP_REASON_PREFIX
from geminibot.store.whatsnew import feed_formats

if TYPE_CHECKING:
    from geminibot.store.database import Database

#: A refusal by the site's policy, as SQL over ``decisions``: not a trap bound's.
_POLICY_REFUSAL = f"NOT allowed AND reason NOT LIKE '{TRAP_REASON_PREFIX}%'"

#: The database's totals, by name, each one query of a statement that reads them all.
_TOTALS = (
    ("hosts", "SELECT count(*) FROM hosts"),
    ("hosts_skipped", "SELECT count(*) FROM hosts WHERE skipped_reason IS NOT NULL"),
    ("pages", "SELECT count(*) FROM pages"),
    ("pages_with_text", "SELECT count(*) FROM pages WHERE text_indexed"),
    ("duplicates", "SELECT count(*) FROM pages WHERE duplicate_of IS NOT NULL"),
    ("links", "SELECT count(*) FROM links"),
    ("bytes", "SELECT coalesce(sum(size), 0) FROM pages"),
    ("requests", "SELECT count(*) FROM fetches"),
    ("refusals", f"SELECT count(DISTINCT url) FROM decisions WHERE {_POLICY_REFUSAL}"),
    (
        "trap_refusals",
        f"SELECT count(DISTINCT url) FROM decisions WHERE NOT allowed AND NOT ({_POLICY_REFUSAL})",
    ),
)
TOTALS = sa.text("SELECT " + ", ".join(f"({sql})" for _, sql in _TOTALS))

#: Counts by a key, most first (then by key), by name.
BREAKDOWNS = {
    "status": sa.text(
        "SELECT coalesce(CAST(status AS TEXT), 'error'), count(*) FROM fetches"
        " GROUP BY 1 ORDER BY 2 DESC, 1"
    ),
    "mime": sa.text(
        "SELECT mime, count(*) FROM pages WHERE mime IS NOT NULL GROUP BY mime ORDER BY 2 DESC, 1"
    ),
    "robots": sa.text("SELECT name || ' ' || outcome, count(*) FROM robots GROUP BY 1 ORDER BY 1"),
    "frontier": sa.text("SELECT state, count(*) FROM urls GROUP BY 1 ORDER BY 2 DESC, 1"),
    "traps": sa.text(
        "SELECT reason, count(*) FROM urls WHERE state = 'trapped' GROUP BY 1 ORDER BY 2 DESC, 1"
    ),
}
#: The hosts with the most URLs refused by their policy, at most ``:limit``.
REFUSALS_BY_HOST = sa.text(
    f"SELECT host, count(DISTINCT url) FROM decisions WHERE {_POLICY_REFUSAL}"
    " GROUP BY host ORDER BY 2 DESC, 1 LIMIT :limit"
)

#: The live pages (their URL ``done``), and those of them past their revisit time.
_LIVE = " FROM pages p JOIN urls u ON u.url = p.url WHERE u.state = 'done'"
LIVE_PAGES = sa.text(
    "SELECT count(*), coalesce(sum(CASE WHEN u.next_visit < :now THEN 1 ELSE 0 END), 0)" + _LIVE
)
#: The age at ``:now`` of the ``:offset``-th freshest live page (0: the freshest).
LIVE_AGE = sa.text(
    f"SELECT :now - p.fetched_at{_LIVE} ORDER BY p.fetched_at DESC LIMIT 1 OFFSET :offset"
)
#: Pages fetched, changed and gone since ``:since``, and URLs not found since then.
RECENT = sa.text(
    "SELECT (SELECT count(*) FROM pages WHERE fetched_at >= :since),"
    " (SELECT count(*) FROM pages WHERE changed_at >= :since),"
    " (SELECT count(*) FROM pages WHERE gone_at >= :since),"
    " (SELECT count(*) FROM urls WHERE state = 'not_found' AND missing_since >= :since)"
)


def totals(database: Database) -> dict[str, int]:
    """The database's totals: hosts (and those skipped for now), pages (with searchable
    text, duplicates), links, bytes, requests, URLs refused by policy and by trap bounds."""
    row = database.run(TOTALS).fetchone()
    return {name: int(n) for (name, _), n in zip(_TOTALS, row, strict=True)}


def breakdowns(database: Database, top_hosts: int) -> dict[str, dict[str, int]]:
    """Counts by key: requests by status, pages by MIME type, policy files by outcome,
    URLs by state, trapped URLs by bound, feeds by format, and the ``top_hosts`` hosts
    with the most refusals."""

    def counts(statement: sa.TextClause, **params: object) -> dict[str, int]:
        return {str(k): int(v) for k, v in database.run(statement, **params).fetchall()}

    found = {name: counts(statement) for name, statement in BREAKDOWNS.items()}
    found["feeds"] = feed_formats(database)
    found["refusals_by_host"] = counts(REFUSALS_BY_HOST, limit=top_hosts)
    return found


def age_counts(database: Database, now: float, bounds: Sequence[float]) -> list[int]:
    """Pages by the time from their last fetch to ``now``: how many under each of the
    ``bounds`` (seconds, increasing) and not under the one before, then the rest."""
    params: dict[str, object] = {"now": now}
    case = ""
    for n, bound in enumerate(bounds):
        params[f"b{n}"] = bound
        case += f" WHEN :now - fetched_at < :b{n} THEN {n}"
    sql = f"SELECT CASE{case} ELSE {len(bounds)} END, count(*) FROM pages GROUP BY 1"
    ages = [0] * (len(bounds) + 1)
    for bucket, n in database.query(sql, params).fetchall():
        ages[int(bucket)] = int(n)
    return ages


def live_pages(database: Database, now: float) -> tuple[int, int]:
    """The live pages, and how many of them are past their revisit time at ``now``."""
    live, past = database.run(LIVE_PAGES, now=now).fetchone()
    return int(live), int(past)


def live_age(database: Database, now: float, offset: int) -> float | None:
    """The age at ``now`` of the ``offset``-th freshest live page (None: no such page)."""
    row = database.run(LIVE_AGE, now=now, offset=offset).fetchone()
    return None if row is None else float(row[0])


def recent(database: Database, since: float) -> tuple[int, int, int, int]:
    """Pages fetched, changed and gone since ``since``, and URLs that began to answer
    "not found" since then."""
    fetched, changed, gone, not_found = database.run(RECENT, since=since).fetchone()
    return int(fetched), int(changed), int(gone), int(not_found)


def url_rows(
    database: Database,
    *,
    state: str | None = None,
    statuses: tuple[int, int] | None = None,
    host_like: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[Any]:
    """The crawl's URLs in the order they were found (url, host, state, status, reason),
    in ``state``, their answer's status between ``statuses`` (both included), their host
    key, or the host name of a web origin, matching the LIKE pattern ``host_like``
    (escaped with ``\\``); at most ``limit`` from ``offset``."""
    where = ""
    params: dict[str, object] = {"limit": limit, "offset": offset}
    if state is not None:
        where += " AND u.state = :state"
        params["state"] = state
    if statuses is not None:
        where += " AND p.status BETWEEN :low AND :high"
        params["low"], params["high"] = statuses
    if host_like is not None:
        like = " LIKE :like ESCAPE '\\'"
        where += f" AND (u.host{like} OR u.host LIKE '%://' || :like ESCAPE '\\')"
        params["like"] = host_like
    limited = "" if limit is None else " LIMIT :limit OFFSET :offset"
    sql = (
        "SELECT u.url, u.host, u.state, p.status, u.reason FROM urls u"
        f" LEFT JOIN pages p ON p.url = u.url WHERE true{where} ORDER BY u.id{limited}"
    )
    return list(database.query(sql, params).fetchall())
