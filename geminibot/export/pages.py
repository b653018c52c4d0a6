"""The files about URLs: the columnar index in Common Crawl's columns (``index.parquet``),
permanent redirects, the link graph between hosts, the URLs kept out with their reasons,
and (asked for) the pages' text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from geminibot.export.model import (
    STRING,
    TIME,
    Column,
    Context,
    Dataset,
    Rows,
    charset_of,
    converted,
    micros,
    parts_of,
    target_host,
)
from geminibot.store import export_reads as reads
from geminibot.store.database import Database


def _successful(status: int, gemini: bool) -> bool:
    return 20 <= status <= 29 if gemini else 200 <= status <= 299


def _index_row(row: Any) -> tuple[Any, ...]:
    url, key, status, meta, mime, lang, size, digest, at, redirect, dup, text, changed, gone = row
    parts = parts_of(url, key)
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
            STRING,
            "SURT key: host labels reversed, comma-separated (www. dropped), a "
            "non-default port, ')', path and query, lower-case; no scheme, as on the web",
        ),
        Column("url", STRING, "the URL, normalised"),
        Column("url_host_name", STRING, "the host name or address"),
        Column("url_host_tld", STRING, "the host name's last label (null for an address)"),
        Column("url_host_2nd_last_part", STRING, "its second last label"),
        Column("url_host_3rd_last_part", STRING, "its third last label"),
        Column("url_host_4th_last_part", STRING, "its fourth last label"),
        Column("url_host_5th_last_part", STRING, "its fifth last label"),
        Column("url_host_name_reversed", STRING, "the host name reversed: org.example.www"),
        Column("url_protocol", STRING, "gemini, http or https"),
        Column("url_port", pa.int32(), "the port, null when the scheme's default"),
        Column("url_path", STRING, "the path"),
        Column("url_query", STRING, "the query, without '?' (null: none)"),
        Column("fetch_time", TIME, "when the answer came"),
        Column("fetch_status", pa.int16(), "the status: Gemini's two digits, HTTP's three"),
        Column("fetch_redirect", STRING, "a redirect's target, resolved"),
        Column(
            "content_digest",
            STRING,
            "SHA-256 of the body, lower-case hex (Common Crawl: SHA-1 in base 32)",
        ),
        Column("content_mime_type", STRING, "the MIME type the answer declared (type/subtype)"),
        Column("content_mime_detected", STRING, "always null: the crawl does not sniff content"),
        Column(
            "content_charset",
            STRING,
            "the charset the MIME type declares, lower-case; utf-8 for a Gemini text/* "
            "page declaring none (the protocol's default)",
        ),
        Column(
            "content_languages",
            STRING,
            "the languages a text/gemini page declares (its lang parameter: BCP 47 "
            "tags, comma-separated; Common Crawl: detected ISO 639-3 codes)",
        ),
        Column(
            "content_truncated",
            STRING,
            "always null: an answer cut short is not kept as a page (its request is "
            "recorded as failed)",
        ),
        Column(
            "subset",
            STRING,
            "warc for a success (2x, HTTP 2xx), crawldiagnostics for any other answer",
        ),
        Column("url_host_key", STRING, "geminibot: the crawl's host key (joins hosts.parquet)"),
        Column("fetch_meta", STRING, "geminibot: the answer's meta line (Gemini) or Content-Type"),
        Column("content_length", pa.int64(), "geminibot: the body's bytes"),
        Column(
            "content_duplicate_of",
            STRING,
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
    converted(reads.PAGE_ROWS, _index_row),
)


# --- redirects, the link graph, exclusions ----------------------------------------------


def _redirect_row(row: Any) -> tuple[Any, ...]:
    url, key, status, target, at = row
    return (url, key, status, target, target_host(target), micros(at))


REDIRECTS = Dataset(
    "redirects.parquet",
    "The permanent redirects the crawl was last answered (Gemini 31, HTTP 301 and 308): "
    "where a page has moved for good.",
    "a URL that redirects permanently",
    (
        Column("url", STRING, "the URL that redirects"),
        Column("url_host_key", STRING, "its host key"),
        Column("fetch_status", pa.int16(), "31, 301 or 308"),
        Column("fetch_redirect", STRING, "the target, resolved"),
        Column("redirect_host_key", STRING, "the target's host key (null: not gemini or http(s))"),
        Column("fetch_time", TIME, "when the redirect was answered"),
    ),
    converted(reads.REDIRECT_ROWS, _redirect_row),
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


def _host_links(database: Database, context: Context) -> Iterator[Rows]:
    out: Rows = []
    current: _HostLinks | None = None
    for rows in database.batches(reads.LINK_ROWS, context.batch):
        for source, page, url in rows:
            target = target_host(url)
            if target is None or target == source:
                continue
            if current is None or current.host != source:
                if current is not None:
                    out += current.rows()
                current = _HostLinks(source)
            current.add(page, target)
        if len(out) >= context.batch:
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
        Column("source_host_key", STRING, "the host key of the linking pages"),
        Column("target_host_key", STRING, "the host key of the URLs linked to"),
        Column("links", pa.int64(), "links from the source's pages to the target's URLs"),
        Column("pages", pa.int64(), "pages of the source with at least one such link"),
    ),
    _host_links,
)


def _exclusion_row(row: Any) -> tuple[Any, ...]:
    url, key, state, reason, at, depth, parent = row
    return (url, key, state, reason, micros(at), depth, parent)


EXCLUSIONS = Dataset(
    "exclusions.parquet",
    "The URLs the crawl kept out, with the reason: refused by the host's policy (a "
    "rule of its robots.txt, robots2.txt or agents.txt, or a policy file it could not "
    "read) or trapped by a crawler-trap bound (never fetched).",
    "a URL kept out",
    (
        Column("url", STRING, "the URL, normalised"),
        Column("url_host_key", STRING, "its host key"),
        Column("state", STRING, "refused (by policy) or trapped (by a trap bound)"),
        Column("reason", STRING, "the reason, as the crawl recorded it"),
        Column("decided_time", TIME, "when the crawl decided"),
        Column("depth", pa.int32(), "links from a seed to the URL"),
        Column("linked_from", STRING, "the page the crawl found it on (null: a seed)"),
    ),
    converted(reads.EXCLUSION_ROWS, _exclusion_row),
)


# --- pages' text (asked for) ------------------------------------------------------------


def _page_text(database: Database, context: Context) -> Iterator[Rows]:
    keeps = context.keeps_text
    assert keeps is not None
    for rows in database.batches(database.engine.page_text, context.batch):
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
        Column("url", STRING, "the URL (joins index.parquet)"),
        Column("url_host_key", STRING, "its host key"),
        Column("title", STRING, "the page's title"),
        Column("headings", STRING, "its headings, one a line"),
        Column("body", STRING, "its text"),
    ),
    _page_text,
)

#: Every file of an export, in the order they are written and described.
