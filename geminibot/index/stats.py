"""What a crawl database holds, in numbers: hosts, pages, statuses, MIME types, robots
outcomes, policy refusals, and the state of the frontier."""

from __future__ import annotations

from typing import Any, Protocol

#: Longest list of per-host refusal counts reported.
TOP_REFUSING_HOSTS = 10


class Connection(Protocol):
    """What the statistics need of a connection: an sqlite3 or a psycopg one (the same SQL
    runs on both)."""

    def execute(self, query: Any, /) -> Any: ...


def _counts(conn: Connection, sql: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in conn.execute(sql).fetchall()}


def stats(conn: Connection) -> dict[str, Any]:
    """A JSON-ready summary of the database."""
    one = conn.execute
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
        "refusals": int(one("SELECT count(*) FROM decisions WHERE NOT allowed").fetchone()[0]),
        "refusals_by_host": _counts(
            conn,
            "SELECT host, count(*) FROM decisions WHERE NOT allowed"
            f" GROUP BY host ORDER BY 2 DESC, 1 LIMIT {TOP_REFUSING_HOSTS}",
        ),
    }


def format_stats(data: dict[str, Any]) -> str:
    """The summary as aligned text lines for a terminal."""
    lines = [
        f"hosts      {data['hosts']} ({data['hosts_skipped']} skipped for now)",
        f"pages      {data['pages']} ({data['pages_with_text']} with searchable text, "
        f"{data['duplicates']} duplicates)",
        f"links      {data['links']}",
        f"bytes      {data['bytes']}",
        f"requests   {data['requests']}",
        f"refusals   {data['refusals']} URLs refused by site policy",
    ]
    for title, key in (
        ("status", "status"),
        ("MIME types", "mime"),
        ("robots outcomes", "robots"),
        ("frontier", "frontier"),
        ("trap bounds hit", "traps"),
        ("refusals by host", "refusals_by_host"),
    ):
        table: dict[str, int] = data[key]
        if table:
            lines.append(f"{title}:")
            width = max(len(k) for k in table)
            lines.extend(f"  {k:<{width}}  {v}" for k, v in table.items())
    return "\n".join(lines)
