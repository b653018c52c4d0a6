"""The statements ``why`` and ``/check`` read a URL's and a host's records with
(:mod:`geminibot.why.records`), on either engine: text, compiled per engine on first use
as :mod:`geminibot.store.statements`' are, written as plain strings so that the servers
that answer ``/check`` start without SQLAlchemy; ``:limit`` bounds the rows of a list."""

from __future__ import annotations

URL_ROW = (
    "SELECT id, state, reason, depth, parent, updated_at, next_visit, attempts, misses,"
    " missing_since FROM urls WHERE url = :url"
)
PAGE_ROW = (
    "SELECT status, meta, mime, fetched_at, duplicate_of, redirect_to, text_indexed, title"
    " FROM pages WHERE url = :url"
)
HISTORY_ROWS = (
    "SELECT url, status, meta, error, started_at, duration FROM fetches WHERE url = :url"
    " ORDER BY started_at DESC LIMIT :limit"
)
LAST_FETCH = (
    "SELECT url, status, meta, error, started_at, duration FROM fetches WHERE url = :url"
    " ORDER BY started_at DESC LIMIT 1"
)
ALIAS_ROWS = "SELECT url FROM pages WHERE duplicate_of = :url ORDER BY url LIMIT :limit"
LINKER_ROWS = (
    "SELECT DISTINCT p.url FROM links l JOIN pages p ON p.id = l.page_id"
    " WHERE l.target = :url ORDER BY p.url LIMIT :limit"
)
HOST_ROW = (
    "SELECT last_fetch_at, last_duration, not_before, slow_downs, skipped_reason"
    " FROM hosts WHERE host = :host"
)
FILE_ROWS = (
    "SELECT name, outcome, reason, status, body, fetched_at, expires_at FROM robots"
    " WHERE host = :host ORDER BY name"
)
QUEUED_BEFORE = "SELECT count(*) FROM urls WHERE host = :host AND state = 'queued' AND id < :id"
PAGE_COUNTS = (
    "SELECT count(*), coalesce(sum(CASE WHEN text_indexed THEN 1 ELSE 0 END), 0),"
    " count(duplicate_of) FROM pages WHERE host = :host"
)
WAITS = (
    "SELECT started_at, duration FROM fetches WHERE host = :host"
    " ORDER BY started_at DESC LIMIT :limit"
)
