"""When a crawl that keeps going runs next (``crawl --forever``): one query, both stores."""

from __future__ import annotations

from store_helpers import opened

from geminibot.crawl.continuous import QUEUED_RECHECK, next_due
from geminibot.store.database import open_database


def test_next_due_is_the_earliest_revisit_or_a_queued_hosts_turn(kind: str, db: str) -> None:
    with opened(kind, db) as (conn, _), open_database(db) as database:
        assert next_due(database, 1000.0) is None  # nothing at all
        conn.execute(
            "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at, next_visit)"
            " VALUES ('gemini://a.test/', 'a.test', '/', false, 0, 'done', 0, 5000),"
            " ('gemini://a.test/x', 'a.test', '/x', false, 1, 'failed', 0, 4000),"
            " ('gemini://a.test/y', 'a.test', '/y', false, 1, 'gone', 0, NULL),"
            " ('gemini://a.test/z', 'a.test', '/z', false, 1, 'not_found', 0, 4500)"
        )
        # the retry (a not-found URL is asked again later; a gone one never, but rechecked)
        assert next_due(database, 1000.0) == 4000.0
        conn.execute("UPDATE urls SET next_visit = 3000 WHERE url = 'gemini://a.test/y'")
        assert next_due(database, 1000.0) == 3000.0  # (geminibot recheck made it due)
        conn.execute("UPDATE urls SET next_visit = NULL WHERE url = 'gemini://a.test/y'")
        conn.execute(
            "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at)"
            " VALUES ('gemini://b.test/', 'b.test', '/', false, 0, 'queued', 0)"
        )
        conn.execute("INSERT INTO hosts (host, first_seen, not_before) VALUES ('b.test', 0, 1100)")
        assert next_due(database, 1000.0) == 1100.0  # b.test's back-off ends
        conn.execute(
            "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason)"
            " VALUES ('b.test', 'robots.txt', 0, 1050, 'unreachable', 'no answer')"
        )
        assert next_due(database, 1000.0) == 1050.0  # its robots.txt is asked again
        assert next_due(database, 1200.0) == 1200.0 + QUEUED_RECHECK  # looked at again
