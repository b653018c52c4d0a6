"""The reads a census makes of a crawl database (``geminibot census``): counts and
distributions over the pages, URLs, hosts, links and feeds of every Gemini capsule or of
one host, each capsule's TLS and certificate history, and the censuses kept (the one
table a census writes). The policy files are :mod:`geminibot.store.policy_reads`'.

Each read takes an open :class:`~geminibot.store.database.Database` of either engine and
``host``: one host key, or None for every Gemini capsule (:data:`GEMINI_HOSTS`); it
returns plain values, and the census does the arithmetic and the wording. A statement
over such a scope is a template whose ``{where}`` is the condition on ``host``
(:func:`scoped`), compiled once per scope and engine as
:mod:`geminibot.store.statements`' are.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from geminibot.store import lookups, statements
from geminibot.store.records import TLSRecord

if TYPE_CHECKING:
    from collections.abc import Iterable

    from geminibot.store.database import Database

#: The hosts a census reads when not one: every Gemini capsule (a web origin's key has a
#: scheme, ``https://...``).
GEMINI_HOSTS = "host NOT LIKE '%://%'"
#: Rows of (label, count): a distribution as the database groups it (a label may be None).
Counts = list[tuple[Any, int]]


def where(one_host: bool) -> str:
    """The condition on ``host`` of a scope: one host (``:host``) or every Gemini capsule."""
    return "host = :host" if one_host else GEMINI_HOSTS


@functools.cache
def scoped(template: str, one_host: bool) -> sa.TextClause:
    """The statement ``template`` over one host or every Gemini capsule: its ``{where}``
    is the condition on ``host`` (after a table's alias: ``u.{where}``)."""
    return sa.text(template.format(where=where(one_host)))


def rows(database: Database, template: str, host: str | None, **params: object) -> list[Any]:
    """The rows of the scoped statement ``template`` (:func:`scoped`) over ``host``."""
    if host is not None:
        params["host"] = host
    return list(database.run(scoped(template, host is not None), **params).fetchall())


def _counts(database: Database, template: str, host: str | None, **params: object) -> Counts:
    return [(label, int(n)) for label, n in rows(database, template, host, **params)]


# --- pages ---

WINDOW = "SELECT min(fetched_at), max(fetched_at) FROM pages WHERE {where}"
ANSWERS = (
    "SELECT count(*),"
    " coalesce(sum(CASE WHEN status = 20 THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN status = 20 AND fetched_at >= :since THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN status = 20 AND mime = 'text/gemini' THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN status = 20 AND NOT charset_ok THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN status = 20 AND charset_ok IS NOT NULL THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN gone_at IS NOT NULL THEN 1 ELSE 0 END), 0)"
    " FROM pages WHERE {where}"
)
STATUSES = "SELECT status, count(*) FROM pages WHERE {where} GROUP BY status"
SIZES = "SELECT count(*), sum(size), max(size) FROM pages WHERE {where} AND status = 20"
#: The sizes of the 20 answers at some ranks (``{ranks}``: integers) in size order.
SIZES_AT = (
    "SELECT r, size FROM (SELECT size, row_number() OVER (ORDER BY size) AS r"
    " FROM pages WHERE {where} AND status = 20) ranked WHERE r IN ({ranks})"
)
MIMES = "SELECT mime, count(*) FROM pages WHERE {where} AND status = 20 GROUP BY mime"
LANGUAGES = (
    "SELECT lower(lang), count(*) FROM pages"
    " WHERE {where} AND status = 20 AND mime = 'text/gemini' GROUP BY 1"
)
TEXT_METAS = (
    "SELECT meta, count(*) FROM pages WHERE {where} AND status = 20 AND mime LIKE 'text/%'"
    " GROUP BY meta"
)


def answered_window(database: Database, host: str | None) -> tuple[float | None, float | None]:
    """When the first and the last recorded answer came (None, None: no answer)."""
    first, last = rows(database, WINDOW, host)[0]
    return (None, None) if first is None else (float(first), float(last))


class Answers(NamedTuple):
    """The pages' last answers, counted: all, 20, 20 since a time, 20 with text/gemini,
    20 whose text does not decode by its charset, 20 whose decoding is known, gone."""

    answered: int
    ok: int
    ok_since: int
    gemtext: int
    undecodable: int
    charset_known: int
    gone: int


def answers(database: Database, host: str | None, since: float) -> Answers:
    """The counts of :class:`Answers` (``ok_since``: fetched at or after ``since``)."""
    return Answers(*(int(n) for n in rows(database, ANSWERS, host, since=since)[0]))


def statuses(database: Database, host: str | None) -> Counts:
    """The pages by the status of their last answer."""
    return _counts(database, STATUSES, host)


def size_totals(database: Database, host: str | None) -> tuple[int, int, int]:
    """How many 20 answers, their bodies' total size and the largest (bytes)."""
    n, total, biggest = rows(database, SIZES, host)[0]
    return int(n or 0), int(total or 0), int(biggest or 0)


def sizes_at(database: Database, host: str | None, ranks: Iterable[int]) -> dict[int, int]:
    """The size of the 20 answer at each of ``ranks`` (1: the smallest) in size order,
    worked out by the database (``row_number()``): nothing is held per page."""
    wanted = ", ".join(str(int(r)) for r in sorted(set(ranks)))
    if not wanted:
        return {}
    sql = SIZES_AT.format(where=where(host is not None), ranks=wanted)
    params = {} if host is None else {"host": host}
    return {int(r): int(size) for r, size in database.query(sql, params).fetchall()}


def mimes(database: Database, host: str | None) -> Counts:
    """The 20 answers by MIME type (None: none)."""
    return _counts(database, MIMES, host)


def languages(database: Database, host: str | None) -> Counts:
    """The text/gemini answers by declared language, lower case (None: none declared)."""
    return _counts(database, LANGUAGES, host)


def text_metas(database: Database, host: str | None) -> Counts:
    """The 20 answers of a text type by their meta line (its charset to be read)."""
    return _counts(database, TEXT_METAS, host)


# --- URLs, hosts, links, feeds ---

URLS = (
    "SELECT count(*), coalesce(sum(CASE WHEN state = 'failed' THEN 1 ELSE 0 END), 0)"
    " FROM urls WHERE {where}"
)
URL_REASONS = "SELECT reason, count(*) FROM urls WHERE {where} AND state = :state GROUP BY reason"
HOST_COUNT = "SELECT count(*) FROM hosts WHERE {where}"
HOSTS = "SELECT host FROM hosts WHERE {where}"
REACHABLE = "SELECT count(DISTINCT host) FROM pages WHERE {where}"
LARGEST = "SELECT host, count(*) FROM pages WHERE {where} AND status = 20 GROUP BY host"
#: Each capsule's in-links: the other Gemini capsules with a page linking to it.
INLINKS = (
    "SELECT u.host, count(DISTINCT p.host) FROM links l"
    " JOIN pages p ON p.id = l.page_id JOIN urls u ON u.url = l.target"
    " WHERE u.host <> p.host AND u.{where} AND p.host NOT LIKE '%://%' GROUP BY u.host"
)
FEEDS = "SELECT format, count(*) FROM feeds WHERE {where} GROUP BY 1"


def urls(database: Database, host: str | None) -> tuple[int, int]:
    """How many URLs are known (seen in links, seeds, redirects) and how many failed."""
    known, failed = rows(database, URLS, host)[0]
    return int(known), int(failed)


def url_reasons(database: Database, host: str | None, state: str) -> Counts:
    """The URLs in ``state`` by their reason (None: none recorded)."""
    return _counts(database, URL_REASONS, host, state=state)


def url_states(database: Database, host: str) -> dict[str, int]:
    """The host's URLs by crawl state."""
    return {
        str(s): int(n) for s, n in database.run(statements.HOST_STATES_OF, host=host).fetchall()
    }


def host_count(database: Database, host: str | None) -> int:
    """How many hosts are known (one host: 1 if known, else 0)."""
    return int(rows(database, HOST_COUNT, host)[0][0])


def hosts(database: Database, host: str | None) -> list[str]:
    """The known hosts' keys."""
    return [str(r[0]) for r in rows(database, HOSTS, host)]


def reachable(database: Database, host: str | None) -> int:
    """How many hosts gave at least one answer."""
    return int(rows(database, REACHABLE, host)[0][0])


def largest(database: Database, host: str | None) -> Counts:
    """The hosts by their pages answering 20."""
    return _counts(database, LARGEST, host)


def inlinks(database: Database, host: str | None) -> Counts:
    """The hosts by the other Gemini capsules linking to them."""
    return _counts(database, INLINKS, host)


def page_counts(database: Database, host: str) -> tuple[int, int, int]:
    """The host's pages: all, those whose text is searchable, those duplicating another."""
    pages, searchable, duplicates = database.run(lookups.PAGE_COUNTS, host=host).fetchone()
    return int(pages), int(searchable), int(duplicates)


def feeds(database: Database, host: str | None) -> Counts:
    """The feeds by format."""
    return _counts(database, FEEDS, host)


# --- TLS and certificates ---


#: A row of ``tls_history`` as a :class:`~geminibot.store.records.TLSRecord` (seen: last).
_TLS = (
    "host, tls_version, cipher, sha256, spki_sha256, subject, issuer, sans, trust, key_type,"
    " key_bits, not_before, not_after, name_matches, parsed, last_seen"
)
#: The rows each host was last seen with (the newest first of a host's).
LAST_TLS = (
    "SELECT " + _TLS + " FROM tls_history t"
    " WHERE t.{where} AND t.last_seen = (SELECT max(last_seen) FROM tls_history s"
    " WHERE s.host = t.host) ORDER BY t.host, t.first_seen DESC"
)
TLS_HISTORY = sa.text(f"SELECT {_TLS} FROM tls_history WHERE host = :host ORDER BY last_seen DESC")
#: The hosts first seen since a time with a certificate other than one seen before.
CERTIFICATE_CHANGED = (
    "SELECT count(DISTINCT t.host) FROM tls_history t"
    " WHERE t.{where} AND t.first_seen > :since AND EXISTS (SELECT 1 FROM"
    " tls_history o WHERE o.host = t.host AND o.sha256 <> t.sha256"
    " AND o.first_seen < t.first_seen)"
)


def current_tls(database: Database, host: str | None) -> list[TLSRecord]:
    """Each host's TLS as last seen, one per host, by host."""
    latest: dict[str, TLSRecord] = {}
    for row in rows(database, LAST_TLS, host):
        latest.setdefault(str(row[0]), TLSRecord.of(row))
    return list(latest.values())


def tls_history(database: Database, host: str) -> list[TLSRecord]:
    """Every TLS row of ``host``, the last seen first (``seen``: when last seen)."""
    return [TLSRecord.of(r) for r in database.run(TLS_HISTORY, host=host).fetchall()]


def certificates_changed(database: Database, host: str | None, since: float) -> int:
    """How many hosts showed, after ``since``, a certificate other than an earlier one."""
    return int(rows(database, CERTIFICATE_CHANGED, host, since=since)[0][0])


# --- the censuses kept ---

KEPT = sa.text("SELECT figures FROM censuses ORDER BY taken_at DESC LIMIT :limit")
KEEP = sa.text("INSERT INTO censuses (taken_at, figures) VALUES (:at, :figures)")


def kept(database: Database, limit: int) -> list[str]:
    """The figures (JSON) of the newest ``limit`` censuses kept, oldest first."""
    return [str(r[0]) for r in reversed(database.run(KEPT, limit=limit).fetchall())]


def keep(database: Database, taken_at: float, figures: str) -> None:
    """Keep a census's ``figures`` (JSON) taken at ``taken_at``."""
    database.run(KEEP, at=taken_at, figures=figures)
