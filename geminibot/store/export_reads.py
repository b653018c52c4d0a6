"""The reads of ``geminibot export``: every row of a table the export writes, in a stable
order, written once for both engines (compiled per engine, as
:mod:`geminibot.store.statements`' are) and read in batches
(:meth:`~geminibot.store.database.Database.batches`, inside
:meth:`~geminibot.store.database.Database.snapshot`). The pages' kept text is each
engine's own read (:attr:`~geminibot.store.statements.Engine.page_text`).
"""

from __future__ import annotations

import sqlalchemy as sa

#: Whether the crawl holds anything to export: a URL known or a page fetched (1 or 0).
HOLDS_URLS = sa.text(
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM urls) OR EXISTS (SELECT 1 FROM pages) THEN 1 ELSE 0 END"
)

# --- URLs ---

#: Every page's last answer, in row order.
PAGE_ROWS = sa.text(
    "SELECT url, host, status, meta, mime, lang, size, content_hash, fetched_at, redirect_to,"
    " duplicate_of, text_indexed, changed_at, gone_at FROM pages ORDER BY id"
)
#: Permanent redirects: Gemini's 31, HTTP's 301 and 308.
REDIRECT_ROWS = sa.text(
    "SELECT url, host, status, redirect_to, fetched_at FROM pages"
    " WHERE redirect_to IS NOT NULL AND status IN (31, 301, 308) ORDER BY id"
)
#: Each page's links with the page's host and row id, a host's pages together.
LINK_ROWS = sa.text(
    "SELECT p.host, p.id, l.target FROM pages p JOIN links l ON l.page_id = p.id"
    " ORDER BY p.host, p.id"
)
#: The URLs kept out: refused by policy or trapped.
EXCLUSION_ROWS = sa.text(
    "SELECT url, host, state, reason, updated_at, depth, parent FROM urls"
    " WHERE state IN ('refused', 'trapped') ORDER BY id"
)

# --- hosts ---

#: Each host with its counts and the TLS and certificate facts last seen on it (the
#: newest row of its ``tls_history``).
HOST_ROWS = sa.text(
    "SELECT h.host, h.first_seen, h.last_fetch_at, h.last_duration, h.slow_downs,"
    " h.urls_total, (SELECT count(*) FROM pages p WHERE p.host = h.host), h.failures,"
    " h.failing_since, h.skipped_reason, t.tls_version, t.cipher, t.sha256, t.trust,"
    " t.key_type, t.not_after, t.name_matches FROM hosts h LEFT JOIN ("
    "  SELECT *, row_number() OVER (PARTITION BY host ORDER BY last_seen DESC, sha256) AS n"
    "  FROM tls_history) t ON t.host = h.host AND t.n = 1"
    " ORDER BY h.host"
)
PIN_ROWS = sa.text("SELECT host, port, fingerprint, first_seen FROM pins ORDER BY host, port")
TLS_ROWS = sa.text(
    "SELECT host, tls_version, cipher, first_seen, last_seen, sha256, spki_sha256, subject,"
    " issuer, sans, trust, key_type, key_bits, not_before, not_after, name_matches, parsed"
    " FROM tls_history ORDER BY host, first_seen, sha256, tls_version, cipher"
)
POLICY_ROWS = sa.text(
    "SELECT host, name, fetched_at, expires_at, outcome, reason, status, body"
    " FROM robots ORDER BY host, name"
)

# --- feeds ---

#: Every feed the crawl found, in row order.
FEED_ROWS = sa.text(
    "SELECT url, host, format, title, author, first_seen, fetched_at, last_entry, entries"
    " FROM feeds ORDER BY id"
)
#: Every entry of every feed (those the feed no longer lists too), a feed's together,
#: with its feed's URL and host.
FEED_ENTRY_ROWS = sa.text(
    "SELECT f.url, f.host, e.url, e.title, e.published, e.first_seen, e.removed_at"
    " FROM feed_entries e JOIN feeds f ON f.id = e.feed_id ORDER BY e.feed_id, e.url"
)
