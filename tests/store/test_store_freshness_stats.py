"""Freshness for an operator (``stats``, ``/stats``, metrics): the same figures from both
stores."""

from __future__ import annotations

from store_helpers import opened

from geminibot.index.freshness import DAY, format_freshness, freshness
from geminibot.store.database import open_database

NOW = 10 * DAY


def test_ages_share_past_revisit_and_the_last_day(kind: str, db: str) -> None:
    with opened(kind, db) as (conn, _), open_database(db) as database:
        assert freshness(database, NOW)["live_pages"] == 0
        for n in range(10):  # fetched 0..9 hours ago, due again 5 h after
            url = f"gemini://a.test/{n}"
            fetched = NOW - n * 3600
            conn.execute(
                "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at,"
                f" next_visit) VALUES ('{url}', 'a.test', '/', false, 0, 'done', {fetched},"
                f" {fetched + 5 * 3600})"
            )
            conn.execute(
                "INSERT INTO pages (url, host, status, meta, size, fetched_at)"
                f" VALUES ('{url}', 'a.test', 20, 'text/gemini', 1, {fetched})"
            )
        # changed 1 h and just over a day ago; gone 2 days and a minute ago
        for n, at in ((1, 3600), (2, DAY + 1)):
            conn.execute(
                f"UPDATE pages SET changed_at = {NOW - at} WHERE url = 'gemini://a.test/{n}'"
            )
        for name, at in (("old", 2 * DAY), ("new", 60)):
            conn.execute(
                "INSERT INTO pages (url, host, status, meta, size, fetched_at, gone_at)"
                f" VALUES ('gemini://a.test/{name}', 'a.test', 51, 'gone', 0, {NOW - at},"
                f" {NOW - at})"
            )
        data = freshness(database, NOW)
    assert data["live_pages"] == 10
    assert data["age_median_seconds"] == 4 * 3600.0  # ages 0..9 h: the 5th freshest
    assert data["age_p90_seconds"] == 8 * 3600.0
    assert data["past_revisit"] == 4 and data["past_revisit_share"] == 0.4  # 6..9 h old
    assert data["fetched_last_day"] == 11  # the ten, and the page gone a minute ago
    assert data["changed_last_day"] == 1 and data["gone_last_day"] == 1
    assert data["index_lag"] is None  # no tantivy index (PostgreSQL: never one)
    lines = format_freshness(data)
    assert "  age median, p90      4.0 h, 8.0 h" in lines
    assert "  changed last 24 h    1, gone: 1, not found: 0" in lines
    assert all(len(line) <= 80 for line in lines)
    for lag, words in ((1, "1 change"), (2, "2 changes")):
        assert f"  index lag            {words}" in format_freshness({**data, "index_lag": lag})
