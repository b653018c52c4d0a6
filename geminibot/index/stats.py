"""What a crawl database holds, in numbers: hosts, pages, statuses, MIME types, robots
outcomes, policy refusals, and the state of the frontier."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from geminibot.cliutil import LINE_WIDTH, clipped, counted, terminal_safe
from geminibot.index.freshness import format_freshness, freshness
from geminibot.store.traps import TRAP_REASON_PREFIX

if TYPE_CHECKING:
    from geminibot.store.database import Database

#: Longest list of per-host refusal counts reported.
TOP_REFUSING_HOSTS = 10
#: The index's age distribution: (label, upper bound in seconds since the page was last
#: fetched), the last bucket open-ended.
AGE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("under 1 day", 86_400.0),
    ("1-7 days", 7 * 86_400.0),
    ("7-30 days", 30 * 86_400.0),
    ("over 30 days", float("inf")),
)
#: A refusal by the site's policy, as SQL over ``decisions``: not a trap bound's.
_POLICY_REFUSAL = f"NOT allowed AND reason NOT LIKE '{TRAP_REASON_PREFIX}%'"

#: The states a URL of the frontier can be in (``stats --urls --status``).
URL_STATES = ("queued", "leased", "done", "refused", "failed", "not_found", "gone", "trapped")


@dataclass(frozen=True)
class ListedUrl:
    """One URL of the crawl: its frontier state, its answer's status (when fetched) and
    the reason of a refusal, failure or trap."""

    url: str
    host: str
    state: str
    status: int | None
    reason: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.url,
            "host": self.host,
            "state": self.state,
            "status": self.status,
            "reason": self.reason,
        }


def status_filter(status: str | None) -> tuple[str, dict[str, str | int]]:
    """SQL (`` AND ...``, named parameters) for ``--status``: a frontier state
    (``failed``), a status code (``51``) or a class of them (``5x``); raises ValueError
    for anything else."""
    if status is None:
        return "", {}
    text = status.strip().lower()
    if text in URL_STATES:
        return " AND u.state = :state", {"state": text}
    if len(text) in (2, 3) and text.isdigit():
        return " AND p.status = :status", {"status": int(text)}
    if len(text) == 2 and text[0].isdigit() and text[1] == "x":
        low = int(text[0]) * 10
        return " AND p.status BETWEEN :low AND :high", {"low": low, "high": low + 9}
    raise ValueError(
        f"--status {status!r}: expected a state ({', '.join(URL_STATES)}), a status (51, 404) "
        "or a class of them (5x)"
    )


def host_like(pattern: str) -> str:
    """The LIKE pattern (escaped with ``\\``) of a shell pattern (``*`` and ``?``) on
    host keys."""
    text = pattern.strip().lower().replace("\\", "\\\\")
    text = text.replace("%", "\\%").replace("_", "\\_")
    return text.replace("*", "%").replace("?", "_")


def list_urls(
    database: Database,
    *,
    status: str | None = None,
    host: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[ListedUrl]:
    """The crawl's URLs in the order they were found, filtered by ``status`` (see
    :func:`status_filter`) and ``host`` (a shell pattern: the key itself, or the host
    name of a web origin)."""
    by_status, params = status_filter(status)
    by_host = ""
    if host is not None:
        like = " LIKE :like ESCAPE '\\'"
        by_host = f" AND (u.host{like} OR u.host LIKE '%://' || :like ESCAPE '\\')"
        params["like"] = host_like(host)
    limited = "" if limit is None else " LIMIT :limit OFFSET :offset"
    sql = (
        "SELECT u.url, u.host, u.state, p.status, u.reason FROM urls u"
        f" LEFT JOIN pages p ON p.url = u.url WHERE true{by_status}{by_host}"
        f" ORDER BY u.id{limited}"
    )
    rows = database.query(sql, {**params, "limit": limit, "offset": offset}).fetchall()
    return [ListedUrl(str(r[0]), str(r[1]), str(r[2]), r[3], r[4]) for r in rows]


class Connection(Protocol):
    """What the statistics need of a connection: an sqlite3 or a psycopg one (the same SQL
    runs on both)."""

    def execute(self, query: Any, /) -> Any: ...


def _counts(conn: Connection, sql: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in conn.execute(sql).fetchall()}


def age_distribution(conn: Connection, now: float) -> dict[str, int]:
    """Pages by the time since they were last fetched (:data:`AGE_BUCKETS`)."""
    ages = {label: 0 for label, _ in AGE_BUCKETS}
    bounds = [b for _, b in AGE_BUCKETS[:-1]]
    # numbers written into the SQL (floats, ours): the same text runs on SQLite and psycopg
    case = " ".join(f"WHEN {now!r} - fetched_at < {b!r} THEN {i}" for i, b in enumerate(bounds))
    rows = conn.execute(
        f"SELECT CASE {case} ELSE {len(bounds)} END, count(*) FROM pages GROUP BY 1"
    ).fetchall()
    for bucket, n in rows:
        ages[AGE_BUCKETS[int(bucket)][0]] = int(n)
    return ages


def stats(conn: Connection, now: float | None = None, lag: int | None = None) -> dict[str, Any]:
    """A JSON-ready summary of the database (page ages counted at ``now``, by default
    the current time; ``lag``: the search index's, when known)."""
    one = conn.execute
    at = time.time() if now is None else now
    return {
        "hosts": int(one("SELECT count(*) FROM hosts").fetchone()[0]),
        "hosts_skipped": int(
            one("SELECT count(*) FROM hosts WHERE skipped_reason IS NOT NULL").fetchone()[0]
        ),
        "pages": int(one("SELECT count(*) FROM pages").fetchone()[0]),
        "pages_with_text": int(one("SELECT count(*) FROM pages WHERE text_indexed").fetchone()[0]),
        "duplicates": int(
            one("SELECT count(*) FROM pages WHERE duplicate_of IS NOT NULL").fetchone()[0]
        ),
        "links": int(one("SELECT count(*) FROM links").fetchone()[0]),
        "age": age_distribution(conn, at),
        "freshness": freshness(conn, at, lag),
        "bytes": int(one("SELECT coalesce(sum(size), 0) FROM pages").fetchone()[0]),
        "requests": int(one("SELECT count(*) FROM fetches").fetchone()[0]),
        "status": _counts(
            conn,
            "SELECT coalesce(CAST(status AS TEXT), 'error'), count(*) FROM fetches"
            " GROUP BY 1 ORDER BY 2 DESC, 1",
        ),
        "mime": _counts(
            conn,
            "SELECT mime, count(*) FROM pages WHERE mime IS NOT NULL"
            " GROUP BY mime ORDER BY 2 DESC, 1",
        ),
        "robots": _counts(
            conn,
            "SELECT name || ' ' || outcome, count(*) FROM robots GROUP BY 1 ORDER BY 1",
        ),
        "frontier": _counts(conn, "SELECT state, count(*) FROM urls GROUP BY 1 ORDER BY 2 DESC, 1"),
        "traps": _counts(
            conn,
            "SELECT reason, count(*) FROM urls WHERE state = 'trapped'"
            " GROUP BY 1 ORDER BY 2 DESC, 1",
        ),
        "refusals": int(
            one(f"SELECT count(DISTINCT url) FROM decisions WHERE {_POLICY_REFUSAL}").fetchone()[0]
        ),
        "trap_refusals": int(
            one(
                f"SELECT count(DISTINCT url) FROM decisions WHERE NOT allowed AND NOT ({_POLICY_REFUSAL})"
            ).fetchone()[0]
        ),
        "feeds": feed_formats(conn),
        "refusals_by_host": _counts(
            conn,
            f"SELECT host, count(DISTINCT url) FROM decisions WHERE {_POLICY_REFUSAL}"
            f" GROUP BY host ORDER BY 2 DESC, 1 LIMIT {TOP_REFUSING_HOSTS}",
        ),
    }


def feed_formats(conn: Connection) -> dict[str, int]:
    """How many feeds of each format the database knows (``stats``, and the faces'
    ``/feeds``)."""
    return _counts(conn, "SELECT format, count(*) FROM feeds GROUP BY format ORDER BY format")


def format_stats(data: dict[str, Any]) -> str:
    """The summary as aligned text lines for a terminal."""
    lines = [
        f"hosts      {data['hosts']} ({data['hosts_skipped']} skipped for now)",
        f"pages      {data['pages']} ({data['pages_with_text']} with searchable text, "
        f"{counted(data['duplicates'], 'duplicate')})",
        f"links      {data['links']}",
        f"bytes      {data['bytes']}",
        f"requests   {data['requests']}",
        f"refusals   {counted(data['refusals'], 'URL')} refused by site policy"
        + (
            f", {data['trap_refusals']} more stopped by trap bounds"
            if data["trap_refusals"]
            else ""
        ),
    ]
    for title, key in (
        ("status", "status"),
        ("MIME types", "mime"),
        ("robots outcomes", "robots"),
        ("age (since last fetched)", "age"),
        ("frontier", "frontier"),
        ("trap bounds hit", "traps"),
        ("refusals by host", "refusals_by_host"),
        ("feeds by format", "feeds"),
    ):
        # Hosts and MIME types come from servers: escaped, and cut to half a line.
        rows = [(clipped(terminal_safe(k), LINE_WIDTH // 2), v) for k, v in data[key].items()]
        if rows:
            lines.append(f"{title}:")
            width = max(len(k) for k, _ in rows)
            lines.extend(f"  {k:<{width}}  {v}" for k, v in rows)
    lines.append("freshness:")
    lines += format_freshness(data["freshness"])
    return "\n".join(lines)
