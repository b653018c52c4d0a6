"""How fresh a crawl's index is, for an operator (``geminibot stats``, the search capsule's
``/stats``, the service's metrics): the same SQL on SQLite and PostgreSQL.

- the age of the live pages (URLs in state ``done``): median and 90th percentile of the
  time since each was last fetched;
- the share of them past their revisit time (``urls.next_visit``): a crawl that keeps up
  holds it near 0;
- pages fetched, pages changed (a fetch found a status or body other than the last one)
  and pages gone out of the index (52/410, not found for long enough, or their host
  vanished) in the last day (``pages.changed_at``, ``pages.gone_at``), and the URLs that
  began to answer "not found" (51/404) in the last day (``urls.missing_since``: a first
  crawl's broken links are counted here, not as gone);
- on SQLite, the index lag, given by the caller: pages fetched, changed or gone that the
  tantivy index does not hold yet; PostgreSQL's own index is written with each page, it
  never lags.
"""

from __future__ import annotations

from typing import Any

from geminibot.cliutil import counted

DAY = 86_400.0
_LIVE = " FROM pages p JOIN urls u ON u.url = p.url WHERE u.state = 'done'"


def _age_at(conn: Any, now: float, offset: int) -> float | None:
    """The age of the ``offset``-th freshest live page (0: the freshest)."""
    row = conn.execute(
        f"SELECT {now!r} - p.fetched_at{_LIVE} ORDER BY p.fetched_at DESC LIMIT 1 OFFSET {offset}"
    ).fetchone()
    return None if row is None else round(float(row[0]), 1)


def freshness(conn: Any, now: float, lag: int | None = None) -> dict[str, Any]:
    """The figures of the module docstring at ``now`` (an sqlite3 or psycopg connection;
    the numbers, ours, are written into the SQL so the same text runs on both), with the
    index's ``lag`` (:func:`geminibot.index.tantivy_index.index_lag`) when known."""
    live, past = conn.execute(
        f"SELECT count(*), coalesce(sum(CASE WHEN u.next_visit < {now!r} THEN 1 ELSE 0 END), 0)"
        f"{_LIVE}"
    ).fetchone()
    live, past = int(live), int(past)
    since = now - DAY
    fetched, changed, gone = (
        int(conn.execute(f"SELECT count(*) FROM pages WHERE {column} >= {since!r}").fetchone()[0])
        for column in ("fetched_at", "changed_at", "gone_at")
    )
    (not_found,) = conn.execute(
        f"SELECT count(*) FROM urls WHERE state = 'not_found' AND missing_since >= {since!r}"
    ).fetchone()
    return {
        "live_pages": live,
        "age_median_seconds": _age_at(conn, now, (live - 1) // 2) if live else None,
        "age_p90_seconds": _age_at(conn, now, (live - 1) * 9 // 10) if live else None,
        "past_revisit": past,
        "past_revisit_share": round(past / live, 4) if live else 0.0,
        "fetched_last_day": fetched,
        "changed_last_day": changed,
        "gone_last_day": gone,
        "not_found_last_day": int(not_found),
        "index_lag": lag,
    }


def format_freshness(data: dict[str, Any]) -> list[str]:
    """Lines for a terminal or a page: ages in hours."""

    def hours(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds / 3600:.1f} h"

    lag = data["index_lag"]
    return [
        f"  live pages           {data['live_pages']}",
        f"  age median, p90      {hours(data['age_median_seconds'])}, "
        f"{hours(data['age_p90_seconds'])}",
        f"  past revisit time    {data['past_revisit']} ({100 * data['past_revisit_share']:.1f}%)",
        f"  fetched last 24 h    {data['fetched_last_day']}",
        f"  changed last 24 h    {data['changed_last_day']}, gone: {data['gone_last_day']},"
        f" not found: {data['not_found_last_day']}",
        f"  index lag            {'-' if lag is None else counted(lag, 'change')}",
    ]
