"""The files of an export: for each, what a row is, its columns (name, Arrow type, meaning)
and how its rows are read from the crawl database, batch by batch.

A :class:`Dataset` is described once here: the writer (:mod:`geminibot.export.writer`)
writes its rows, the README (:mod:`geminibot.export.readme`) says what it holds, from the
same description. Rows are read in batches of :data:`BATCH` (never a whole table at once),
each converted to a list of tuples in the order of the columns.

Times are UTC timestamps in microseconds; the crawl's host key (``url_host_key``:
``host[:port]`` for Gemini, ``scheme://host[:port]`` for the web) joins the files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from geminibot.export.urlparts import UrlParts, url_parts
from geminibot.gemini.errors import InvalidMeta
from geminibot.gemini.response import parse_mime
from geminibot.store.database import Database
from geminibot.urls import InvalidURL, host_key, host_url, parse_url

#: Rows read, converted and written at once.
BATCH = 20_000

TIME = pa.timestamp("us", tz="UTC")
#: A batch of rows, each a tuple in the order of its dataset's columns.
Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class Column:
    """One column of a file: its name, its Arrow type, what it holds."""

    name: str
    type: pa.DataType
    about: str


@dataclass(frozen=True)
class Dataset:
    """One file: its name, what it holds, what one row is, its columns, and its rows
    (``read(database, context)``: batches of rows)."""

    file: str
    about: str
    row: str
    columns: tuple[Column, ...]
    read: Callable[[Database, Context], Iterator[Rows]]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type) for c in self.columns])


class Context:
    """What the reads of one export share: whether pages' text is wanted, and which
    hosts' policy lets it be kept (``keeps_text``, asked once per host)."""

    def __init__(self, keeps_text: Callable[[str], bool] | None) -> None:
        self.keeps_text = keeps_text


def micros(seconds: float | None) -> int | None:
    """Epoch seconds as the microseconds of a :data:`TIME` column."""
    return None if seconds is None else round(seconds * 1_000_000)


#: A URL's authority: what follows ``//`` up to the path, query or fragment.
_AUTHORITY = re.compile(r"[^/?#]*")


@lru_cache(maxsize=65_536)
def _host_of(prefix: str) -> str | None:
    try:
        return host_key(prefix + "/")
    except InvalidURL:
        return None


def target_host(url: str) -> str | None:
    """The host key of a link's target, None for a URL of another scheme (``mailto:``,
    ``gopher://``) or one without a host: read once per scheme and authority."""
    start = url.find("://")
    if start < 0:
        return None
    authority = _AUTHORITY.match(url, start + 3)
    assert authority is not None  # the pattern matches the empty string
    return _host_of(url[: authority.end()])


@lru_cache(maxsize=1024)
def charset_of(meta: str, gemini: bool) -> str | None:
    """The charset a page's MIME type declares (lower-case); for a Gemini ``text/*``
    page that declares none, ``utf-8``, the protocol's default."""
    try:
        mime = parse_mime(meta)
    except InvalidMeta:
        return None
    declared = mime.params.get("charset")
    if declared is not None:
        return declared.lower()
    return mime.charset if gemini else None


def _parts(url: str, key: str) -> UrlParts:
    """The URL's Common Crawl parts (a stored URL is normalised; one that does not parse
    keeps its text as its key, and no parts)."""
    try:
        return url_parts(parse_url(url))
    except InvalidURL:
        none = (None,) * 5
        return UrlParts(url.lower(), key, none, None, url.partition(":")[0], None, "", None)


# --- the columnar index ---------------------------------------------------------------

INDEX_ROWS = sa.text(
    "SELECT url, host, status, meta, mime, lang, size, content_hash, fetched_at, redirect_to,"
    " duplicate_of, text_indexed, changed_at, gone_at FROM pages ORDER BY id"
)


def _successful(status: int, gemini: bool) -> bool:
    return 20 <= status <= 29 if gemini else 200 <= status <= 299


def _index_row(row: Any) -> tuple[Any, ...]:
    url, key, status, meta, mime, lang, size, digest, at, redirect, dup, text, changed, gone = row
    parts = _parts(url, key)
    gemini = parts.protocol == "gemini"
    ok = _successful(status, gemini)
    return (
        parts.surtkey,
        url,
        parts.host_name,
        *parts.labels,
        parts.host_name_reversed,
        parts.protocol,
        parts.port,
        parts.path,
        parts.query,
        micros(at),
        status,
        redirect,
        digest,
        mime,
        None,
        charset_of(meta, gemini) if ok and mime else None,
        lang,
        None,
        "warc" if ok else "crawldiagnostics",
        key,
        meta,
        size,
        dup,
        micros(changed),
        micros(gone),
        bool(text),
    )


def _index(database: Database, _: Context) -> Iterator[Rows]:
    for rows in database.batches(INDEX_ROWS, BATCH):
        yield [_index_row(row) for row in rows]


_S, _I16, _I32, _I64 = pa.string(), pa.int16(), pa.int32(), pa.int64()

INDEX = Dataset(
    "index.parquet",
    "The columnar index: the last answer to every URL the crawl fetched, in Common "
    "Crawl's columns where they apply (https://github.com/commoncrawl/cc-index-table), "
    "then geminibot's own. Not given, as they need the Public Suffix List or WARC files: "
    "url_host_registry_suffix, url_host_registered_domain, url_host_private_suffix, "
    "url_host_private_domain, warc_record_id, warc_filename, warc_record_offset, "
    "warc_record_length, warc_segment, crawl. A URL refused, trapped or whose every "
    "request failed has no row here (see exclusions.parquet).",
    "a URL the crawl fetched and had an answer from (its last one)",
    (
        Column(
            "url_surtkey",
            _S,
            "SURT key: host labels reversed, comma-separated (www. dropped), a "
            "non-default port, ')', path and query, lower-case; no scheme, as on the web",
        ),
        Column("url", _S, "the URL, normalised"),
        Column("url_host_name", _S, "the host name or address"),
        Column("url_host_tld", _S, "the host name's last label (null for an address)"),
        Column("url_host_2nd_last_part", _S, "its second last label"),
        Column("url_host_3rd_last_part", _S, "its third last label"),
        Column("url_host_4th_last_part", _S, "its fourth last label"),
        Column("url_host_5th_last_part", _S, "its fifth last label"),
        Column("url_host_name_reversed", _S, "the host name reversed: org.example.www"),
        Column("url_protocol", _S, "gemini, http or https"),
        Column("url_port", _I32, "the port, null when the scheme's default"),
        Column("url_path", _S, "the path"),
        Column("url_query", _S, "the query, without '?' (null: none)"),
        Column("fetch_time", TIME, "when the answer came"),
        Column("fetch_status", _I16, "the status: Gemini's two digits, HTTP's three"),
        Column("fetch_redirect", _S, "a redirect's target, resolved"),
        Column(
            "content_digest",
            _S,
            "SHA-256 of the body, lower-case hex (Common Crawl: SHA-1 in base 32)",
        ),
        Column("content_mime_type", _S, "the MIME type the answer declared (type/subtype)"),
        Column("content_mime_detected", _S, "always null: the crawl does not sniff content"),
        Column(
            "content_charset",
            _S,
            "the charset the MIME type declares, lower-case; utf-8 for a Gemini text/* "
            "page declaring none (the protocol's default)",
        ),
        Column(
            "content_languages",
            _S,
            "the languages a text/gemini page declares (its lang parameter: BCP 47 "
            "tags, comma-separated; Common Crawl: detected ISO 639-3 codes)",
        ),
        Column(
            "content_truncated",
            _S,
            "always null: an answer cut short is not kept as a page (its request is "
            "recorded as failed)",
        ),
        Column(
            "subset",
            _S,
            "warc for a success (2x, HTTP 2xx), crawldiagnostics for any other answer",
        ),
        Column("url_host_key", _S, "geminibot: the crawl's host key (joins hosts.parquet)"),
        Column("fetch_meta", _S, "geminibot: the answer's meta line (Gemini) or Content-Type"),
        Column("content_length", _I64, "geminibot: the body's bytes"),
        Column(
            "content_duplicate_of",
            _S,
            "geminibot: the URL kept instead, whose body is the same (null: none)",
        ),
        Column(
            "content_changed_time",
            TIME,
            "geminibot: when a fetch last found the answer changed (null: not since "
            "its first fetch)",
        ),
        Column("fetch_gone_time", TIME, "geminibot: when the URL went away (null: live)"),
        Column("content_searchable", pa.bool_(), "geminibot: whether its text is searchable"),
    ),
    _index,
)


# --- hosts, certificate pins, policy files ----------------------------------------------

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


def _flag(value: object) -> bool | None:
    """A flag of either engine (0/1 or a boolean), None kept."""
    return None if value is None else bool(value)


def _host_row(row: Any) -> tuple[Any, ...]:
    key, first, last, duration, slow, urls, pages, failures, failing, skipped = row[:10]
    version, cipher, sha256, trust, key_type, not_after, matches = row[10:]
    parts = _parts(host_url(key), key)
    return (
        key,
        parts.host_name,
        parts.protocol,
        parts.port,
        micros(first),
        micros(last),
        duration,
        slow,
        urls,
        pages,
        failures,
        micros(failing),
        skipped,
        version,
        cipher,
        sha256,
        trust,
        key_type,
        micros(not_after),
        _flag(matches),
    )


def _hosts(database: Database, _: Context) -> Iterator[Rows]:
    for rows in database.batches(HOST_ROWS, BATCH):
        yield [_host_row(row) for row in rows]


HOSTS = Dataset(
    "hosts.parquet",
    "Every host the crawl met, with its politeness state and counts.",
    "a host (a capsule: a Gemini host and port, or a web origin)",
    (
        Column("url_host_key", _S, "the crawl's host key: host[:port], or scheme://host[:port]"),
        Column("url_host_name", _S, "the host name or address"),
        Column("url_protocol", _S, "gemini, http or https"),
        Column("url_port", _I32, "the port, null when the scheme's default"),
        Column("first_seen_time", TIME, "when the crawl first met the host"),
        Column("last_fetch_time", TIME, "when its last request ended (null: none yet)"),
        Column("last_fetch_seconds", pa.float64(), "how long that request took"),
        Column("slow_downs", _I32, "slow-down answers in a row (Gemini 44, HTTP 429 or 503)"),
        Column(
            "urls_known",
            _I32,
            "live URLs of the host (queued, done, refused or failed; not trapped nor gone)",
        ),
        Column("pages", _I64, "rows of index.parquet on the host"),
        Column("failures", _I32, "requests failed in a row (0: its last one answered)"),
        Column("failing_since_time", TIME, "when those failures began (null: none)"),
        Column("skipped_reason", _S, "why the last run skipped the host (null: it did not)"),
        Column("tls_version", _S, "the TLS version last seen (null: none seen; tls.parquet)"),
        Column("tls_cipher", _S, "the cipher suite last seen"),
        Column("certificate_sha256", _S, "the certificate last seen: SHA-256, colon-separated"),
        Column("certificate_trust", _S, "self-signed, known CA or unknown CA"),
        Column("certificate_key_type", _S, "its key's type: RSA, EC (with its curve), ..."),
        Column("certificate_not_after_time", TIME, "when it expires"),
        Column("certificate_name_matches", pa.bool_(), "whether its names cover the host"),
    ),
    _hosts,
)

PIN_ROWS = sa.text("SELECT host, port, fingerprint, first_seen FROM pins ORDER BY host, port")


def _pins(database: Database, _: Context) -> Iterator[Rows]:
    for rows in database.batches(PIN_ROWS, BATCH):
        yield [(host, port, sha, micros(first)) for host, port, sha, first in rows]


PINS = Dataset(
    "pins.parquet",
    "The certificate the crawl pinned for each Gemini host and port (trust on first "
    "use): its SHA-256 fingerprint as Gemini clients show it.",
    "a host and port, and the certificate pinned for it",
    (
        Column("url_host_name", _S, "the host name or address"),
        Column("url_port", _I32, "the port"),
        Column("certificate_sha256", _S, "SHA-256 of the DER certificate, colon-separated hex"),
        Column("first_seen_time", TIME, "when the crawl pinned it"),
    ),
    _pins,
)

TLS_ROWS = sa.text(
    "SELECT host, tls_version, cipher, first_seen, last_seen, sha256, spki_sha256, subject,"
    " issuer, sans, trust, key_type, key_bits, not_before, not_after, name_matches, parsed"
    " FROM tls_history ORDER BY host, first_seen, sha256, tls_version, cipher"
)


def _tls_row(row: Any) -> tuple[Any, ...]:
    key, version, cipher, first, last, sha, spki, subject, issuer, sans = row[:10]
    trust, key_type, bits, not_before, not_after, matches, parsed = row[10:]
    return (
        key,
        version,
        cipher,
        micros(first),
        micros(last),
        sha,
        spki,
        subject,
        issuer,
        sans.split("\n") if sans else [],
        trust,
        key_type,
        bits,
        micros(not_before),
        micros(not_after),
        bool(matches),
        bool(parsed),
    )


def _tls(database: Database, _: Context) -> Iterator[Rows]:
    for rows in database.batches(TLS_ROWS, BATCH):
        yield [_tls_row(row) for row in rows]


TLS = Dataset(
    "tls.parquet",
    "Each host's TLS version, cipher suite and server certificate as the crawl saw them at "
    "the connections it made, as history: a row per distinct set, from when it was first "
    "seen to when it was last seen (a host whose certificate changed has a row for each).",
    "a host's TLS version, cipher and certificate, over the time they were seen",
    (
        Column("url_host_key", _S, "the crawl's host key"),
        Column("tls_version", _S, "TLSv1.2, TLSv1.3, ..."),
        Column("tls_cipher", _S, "the cipher suite"),
        Column("first_seen_time", TIME, "when the crawl first saw this set"),
        Column("last_seen_time", TIME, "when it last saw it (written at most hourly)"),
        Column("certificate_sha256", _S, "SHA-256 of the DER certificate, colon-separated hex"),
        Column("certificate_spki_sha256", _S, "SHA-256 of its public key (SubjectPublicKeyInfo)"),
        Column("certificate_subject", _S, "its subject (at most 1,000 characters)"),
        Column("certificate_issuer", _S, "its issuer"),
        Column(
            "certificate_sans",
            pa.list_(pa.field("element", pa.string())),
            "its subjectAltNames (at most 100)",
        ),
        Column(
            "certificate_trust",
            _S,
            "self-signed, known CA (a CA the crawl trusted signed it) or unknown CA",
        ),
        Column("certificate_key_type", _S, "its key's type"),
        Column("certificate_key_bits", _I32, "its key's size in bits"),
        Column("certificate_not_before_time", TIME, "when it becomes valid"),
        Column("certificate_not_after_time", TIME, "when it expires"),
        Column("certificate_name_matches", pa.bool_(), "whether its names cover the host"),
        Column("certificate_parsed", pa.bool_(), "whether it could be read (else only hashed)"),
    ),
    _tls,
)

POLICY_ROWS = sa.text(
    "SELECT host, name, fetched_at, expires_at, outcome, reason, status, body"
    " FROM robots ORDER BY host, name"
)


def _policy_row(row: Any) -> tuple[Any, ...]:
    key, name, at, expires, outcome, reason, status, body = row
    body = None if body is None else bytes(body)
    length = None if body is None else len(body)
    url = host_url(key, "/" + name)
    return (key, name, url, micros(at), micros(expires), outcome, reason, status, length, body)


def _policy_files(database: Database, _: Context) -> Iterator[Rows]:
    for rows in database.batches(POLICY_ROWS, BATCH):
        yield [_policy_row(row) for row in rows]


POLICY_FILES = Dataset(
    "policy_files.parquet",
    "Each host's policy files (robots.txt, robots2.txt, agents.txt) as the crawl last "
    "fetched them, with the outcome the policy took from the answer (RFC 9309).",
    "a policy file of a host, as last fetched",
    (
        Column("url_host_key", _S, "the crawl's host key"),
        Column("file", _S, "robots.txt, robots2.txt or agents.txt"),
        Column("url", _S, "the URL the crawl asked for"),
        Column("fetch_time", TIME, "when it was fetched"),
        Column("expires_time", TIME, "when the crawl's copy expires"),
        Column(
            "outcome",
            _S,
            "success, redirect, unavailable (no file: allow all) or unreachable (disallow all)",
        ),
        Column("reason", _S, "why the answer led to that outcome"),
        Column("fetch_status", _I16, "the answer's status (null: no answer)"),
        Column("content_length", _I64, "the body's bytes (null: no body)"),
        Column("content", pa.binary(), "the body as fetched (null: no body)"),
    ),
    _policy_files,
)


# --- redirects, the link graph, exclusions ----------------------------------------------

#: Permanent redirects: Gemini's 31, HTTP's 301 and 308.
REDIRECT_ROWS = sa.text(
    "SELECT url, host, status, redirect_to, fetched_at FROM pages"
    " WHERE redirect_to IS NOT NULL AND status IN (31, 301, 308) ORDER BY id"
)


def _redirects(database: Database, _: Context) -> Iterator[Rows]:
    for rows in database.batches(REDIRECT_ROWS, BATCH):
        yield [
            (url, key, status, target, target_host(target), micros(at))
            for url, key, status, target, at in rows
        ]


REDIRECTS = Dataset(
    "redirects.parquet",
    "The permanent redirects the crawl was last answered (Gemini 31, HTTP 301 and 308): "
    "where a page has moved for good.",
    "a URL that redirects permanently",
    (
        Column("url", _S, "the URL that redirects"),
        Column("url_host_key", _S, "its host key"),
        Column("fetch_status", _I16, "31, 301 or 308"),
        Column("fetch_redirect", _S, "the target, resolved"),
        Column("redirect_host_key", _S, "the target's host key (null: not gemini or http(s))"),
        Column("fetch_time", TIME, "when the redirect was answered"),
    ),
    _redirects,
)

#: Each page's links with the page's host, a host's pages together.
LINK_ROWS = sa.text(
    "SELECT p.host, p.id, l.target FROM pages p JOIN links l ON l.page_id = p.id"
    " ORDER BY p.host, p.id"
)


class _HostLinks:
    """The links of one source host counted by target host, and the pages linking."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.links: dict[str, int] = {}
        self.pages: dict[str, int] = {}
        self.last_page: dict[str, int] = {}

    def add(self, page: int, target: str) -> None:
        self.links[target] = self.links.get(target, 0) + 1
        if self.last_page.get(target) != page:  # a host's rows come page by page
            self.last_page[target] = page
            self.pages[target] = self.pages.get(target, 0) + 1

    def rows(self) -> Rows:
        return [(self.host, t, n, self.pages[t]) for t, n in sorted(self.links.items())]


def _host_links(database: Database, _: Context) -> Iterator[Rows]:
    out: Rows = []
    current: _HostLinks | None = None
    for rows in database.batches(LINK_ROWS, BATCH):
        for source, page, url in rows:
            target = target_host(url)
            if target is None or target == source:
                continue
            if current is None or current.host != source:
                if current is not None:
                    out += current.rows()
                current = _HostLinks(source)
            current.add(page, target)
        if len(out) >= BATCH:
            yield out
            out = []
    if current is not None:
        out += current.rows()
    if out:
        yield out


HOST_LINKS = Dataset(
    "host_links.parquet",
    "The link graph between capsules: for each pair of hosts, the links the pages of one "
    "have to URLs of the other. Links within a host, and to other schemes (mailto:, "
    "gopher://), are not counted.",
    "a source host and a target host it links to",
    (
        Column("source_host_key", _S, "the host key of the linking pages"),
        Column("target_host_key", _S, "the host key of the URLs linked to"),
        Column("links", _I64, "links from the source's pages to the target's URLs"),
        Column("pages", _I64, "pages of the source with at least one such link"),
    ),
    _host_links,
)

EXCLUSION_ROWS = sa.text(
    "SELECT url, host, state, reason, updated_at, depth, parent FROM urls"
    " WHERE state IN ('refused', 'trapped') ORDER BY id"
)


def _exclusions(database: Database, _: Context) -> Iterator[Rows]:
    for rows in database.batches(EXCLUSION_ROWS, BATCH):
        yield [
            (url, key, state, reason, micros(at), depth, parent)
            for url, key, state, reason, at, depth, parent in rows
        ]


EXCLUSIONS = Dataset(
    "exclusions.parquet",
    "The URLs the crawl kept out, with the reason: refused by the host's policy (a "
    "rule of its robots.txt, robots2.txt or agents.txt, or a policy file it could not "
    "read) or trapped by a crawler-trap bound (never fetched).",
    "a URL kept out",
    (
        Column("url", _S, "the URL, normalised"),
        Column("url_host_key", _S, "its host key"),
        Column("state", _S, "refused (by policy) or trapped (by a trap bound)"),
        Column("reason", _S, "the reason, as the crawl recorded it"),
        Column("decided_time", TIME, "when the crawl decided"),
        Column("depth", _I32, "links from a seed to the URL"),
        Column("linked_from", _S, "the page the crawl found it on (null: a seed)"),
    ),
    _exclusions,
)


# --- pages' text (asked for) ------------------------------------------------------------


def _page_text(database: Database, context: Context) -> Iterator[Rows]:
    keeps = context.keeps_text
    assert keeps is not None
    for rows in database.batches(database.engine.page_text, BATCH):
        yield [
            (url, key, title, headings or "", body or "")
            for url, key, title, headings, body in rows
            if keeps(key)
        ]


PAGE_TEXT = Dataset(
    "page_text.parquet",
    "The text the crawl kept of each searchable page (only with --text): its title, "
    "headings and body as the search index holds them (at most 262,144 characters each "
    "of body and headings). Never a page whose host's robots2.txt says store: no or "
    "session-only to the crawl's bot, nor a page kept only as statistics (a researcher's "
    "crawl, a duplicate, a page that is not text).",
    "a searchable page and its text",
    (
        Column("url", _S, "the URL (joins index.parquet)"),
        Column("url_host_key", _S, "its host key"),
        Column("title", _S, "the page's title"),
        Column("headings", _S, "its headings, one a line"),
        Column("body", _S, "its text"),
    ),
    _page_text,
)

#: Every file of an export, in the order they are written and described.
DATASETS: tuple[Dataset, ...] = (
    INDEX,
    HOSTS,
    TLS,
    PINS,
    POLICY_FILES,
    REDIRECTS,
    HOST_LINKS,
    EXCLUSIONS,
)
