"""How fresh a crawl's index is, for an operator (``geminibot stats``, the search capsule's
``/stats``, the service's metrics), from the store's counts
(:mod:`geminibot.store.statistics`), on SQLite and PostgreSQL alike.

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

from typing import TYPE_CHECKING, Any

from geminibot.cliutil import counted

if TYPE_CHECKING:
    from geminibot.store.database import Database

DAY = 86_400.0


def freshness(database: Database, now: float, lag: int | None = None) -> dict[str, Any]:
    """The figures of the module docstring at ``now``, with the index's ``lag``
    (:func:`geminibot.index.tantivy_index.index_lag`) when known."""
    from geminibot.store.statistics import live_age, live_pages, recent

    live, past = live_pages(database, now)
    fetched, changed, gone, not_found = recent(database, now - DAY)

    def age_at(offset: int) -> float | None:
        age = live_age(database, now, offset) if live else None
        return None if age is None else round(age, 1)

    return {
        "live_pages": live,
        "age_median_seconds": age_at((live - 1) // 2),
        "age_p90_seconds": age_at((live - 1) * 9 // 10),
        "past_revisit": past,
        "past_revisit_share": round(past / live, 4) if live else 0.0,
        "fetched_last_day": fetched,
        "changed_last_day": changed,
        "gone_last_day": gone,
        "not_found_last_day": not_found,
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
