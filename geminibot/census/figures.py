"""The census of a crawl store: Lupa's figures of Geminispace, and the ones only this
project's crawl records (TLS and certificates, policy files and what they refuse).

:func:`take_census` reads a store of either engine (through
:mod:`geminibot.store.census_reads` and :mod:`geminibot.store.policy_reads`) and returns a :class:`~geminibot.census.model.Census`; it writes nothing. Every
figure is over the Gemini capsules of the store (web origins are left out) and says its
window: the crawl's (from its first to its last recorded answer), or the last
:data:`RECENT_DAYS` days before the census.
"""

from __future__ import annotations

from collections import Counter

from geminibot.census.model import Census, Figure, Section, Value, distribution
from geminibot.census.policies import policy_figures, security_figures
from geminibot.census.web import web_figures
from geminibot.gemini.certfacts import KNOWN_CA, SELF_SIGNED
from geminibot.gemini.response import parse_mime
from geminibot.store import census_reads as reads
from geminibot.store.database import Database

#: "Answering 20 recently": within this many days before the census (Lupa's window).
RECENT_DAYS = 31
#: A certificate "expiring soon": within this many days after the census.
EXPIRING_DAYS = 30
#: Longest list shown of a distribution (largest capsules, in-links, MIME types...).
TOP = 10
#: The quantiles of page sizes reported.
QUANTILES = (0.5, 0.9, 0.99)
_DAY = 86_400.0


def nearest_rank(n: int, q: float) -> int:
    """The rank (1 to ``n``) of the ``q`` quantile of ``n`` ordered values (nearest rank)."""
    return min(n, max(1, -(-int(q * n * 1000) // 1000)))


def size_figures(conn: Database, host: str | None) -> dict[str, int | float]:
    """Mean, quantiles (:data:`QUANTILES`) and maximum of the sizes of the 20 answers of
    ``host`` (None: every Gemini capsule), worked out by the database (the quantiles by
    ``row_number()`` over the sizes in order, on both engines): nothing is held per page,
    so memory stays the same whatever the store's size."""
    n, total, biggest = reads.size_totals(conn, host)
    ranks = {f"p{int(q * 100)}": nearest_rank(n, q) for q in QUANTILES}
    at_rank = reads.sizes_at(conn, host, ranks.values()) if n else {}
    return {
        "mean": round(total / n, 1) if n else 0,
        **{name: at_rank.get(rank, 0) for name, rank in ranks.items()},
        "max": biggest,
    }


def charset_of(meta: str) -> str:
    """A 20 answer's declared charset (lower case), or ``utf-8 (default)`` for a text type
    that declares none, ``-`` for a meta that is not a MIME type."""
    try:
        mime = parse_mime(meta)
    except ValueError:
        return "-"
    charset = mime.params.get("charset")
    return charset.lower() if charset else "utf-8 (default)"


def take_census(
    conn: Database,
    now: float,
    *,
    host: str | None = None,
    agent: str = "geminibot",
    previous: Census | None = None,
) -> Census:
    """The census of the store behind ``conn`` at ``now`` (of one ``host`` if given);
    ``previous``: the last census kept, for what changed since."""
    start, end = reads.answered_window(conn, host)
    crawl = "the crawl" if start is None else "the crawl's window"
    got = reads.answers(conn, host, now - RECENT_DAYS * _DAY)
    sections = [
        _uris(conn, host, got, crawl),
        _capsules(conn, host, crawl),
        _content(conn, host, got, crawl),
        _tls(conn, host, now, previous),
        Section("Policies", tuple(policy_figures(conn, host, agent))),
        Section("security.txt", tuple(security_figures(conn, host, now))),
        _web(conn, host, now),
        _feeds(conn, host),
    ]
    notes = (
        "Counts are of Gemini capsules (web origins left out); a capsule is a host and "
        "port. Certificates are the ones last seen per capsule.",
    )
    return Census(now, start, end, tuple(sections), host, notes)


def _uris(conn: Database, host: str | None, got: reads.Answers, crawl: str) -> Section:
    known, failed = reads.urls(conn, host)
    return Section(
        "URIs",
        (
            Figure("uris.known", "URIs known (seen in links, seeds or redirects)", known, crawl),
            Figure("uris.answered", "URIs that gave an answer (any status)", got.answered, crawl),
            Figure("uris.ok", "URIs whose last answer was 20", got.ok, crawl),
            Figure(
                "uris.ok_recent",
                f"URIs that answered 20 in the last {RECENT_DAYS} days",
                got.ok_since,
                f"the last {RECENT_DAYS} days",
            ),
            Figure("uris.gemtext", "URIs answering 20 with text/gemini", got.gemtext, crawl),
            Figure(
                "uris.gemtext_share",
                "share of the URIs answering 20 that are text/gemini",
                _share(got.gemtext, got.ok),
                crawl,
            ),
            Figure(
                "uris.no_answer",
                "URIs that gave no answer (connection, TLS, timeout: failed)",
                failed,
                crawl,
            ),
            Figure(
                "uris.size_bytes",
                "sizes of 20 answers' bodies (bytes)",
                size_figures(conn, host),
                crawl,
            ),
            Figure(
                "uris.status",
                "URIs by the status of their last answer",
                distribution(reads.statuses(conn, host)),
                crawl,
            ),
        ),
    )


def _capsules(conn: Database, host: str | None, crawl: str) -> Section:
    return Section(
        "Capsules",
        (
            Figure(
                "capsules.known",
                "capsules known (host and port)",
                reads.host_count(conn, host),
                crawl,
            ),
            Figure(
                "capsules.reachable",
                "capsules that gave at least one answer",
                reads.reachable(conn, host),
                crawl,
            ),
            Figure(
                "capsules.largest",
                "largest capsules, by URIs answering 20",
                distribution(reads.largest(conn, host), TOP),
                crawl,
            ),
            Figure(
                "capsules.inlinks",
                "capsules most linked to: other capsules linking to them (one per capsule)",
                distribution(reads.inlinks(conn, host), TOP),
                crawl,
            ),
        ),
    )


def _content(conn: Database, host: str | None, got: reads.Answers, crawl: str) -> Section:
    charsets: Counter[str] = Counter()
    for meta, n in reads.text_metas(conn, host):
        charsets[charset_of(str(meta))] += n
    return Section(
        "Content",
        (
            Figure(
                "content.mime",
                "20 answers by MIME type",
                distribution(
                    ((m if m is not None else "-", n) for m, n in reads.mimes(conn, host)), TOP
                ),
                crawl,
            ),
            Figure(
                "content.languages",
                "text/gemini answers by declared language (lang=)",
                distribution(
                    (
                        (lang if lang is not None else "none declared", n)
                        for lang, n in reads.languages(conn, host)
                    ),
                    TOP,
                ),
                crawl,
            ),
            Figure(
                "content.charsets",
                "text answers by declared charset",
                distribution(charsets.items(), TOP),
                crawl,
            ),
            Figure(
                "content.charset_undecodable",
                "text answers whose body does not decode by its declared charset",
                got.undecodable,
                crawl,
            ),
            Figure(
                "content.charset_undecodable_share",
                "share of text answers (known) whose body does not decode by its charset",
                _share(got.undecodable, got.charset_known),
                crawl,
            ),
        ),
    )


def _share(part: int, whole: int) -> float | None:
    """``part`` / ``whole`` rounded to 4 places; None when ``whole`` is 0."""
    return None if whole == 0 else round(part / whole, 4)


def _tls(conn: Database, host: str | None, now: float, previous: Census | None) -> Section:
    current = reads.current_tls(conn, host)
    last = "each capsule's last connection"
    certs = [r for r in current if r.parsed]
    issuers = Counter(
        f"{_short_name(r.issuer)}{'' if r.trust == KNOWN_CA else ' (unknown CA)'}"
        for r in certs
        if r.trust != SELF_SIGNED
    )
    keys = Counter(f"{r.key_type} {r.key_bits}" if r.key_bits else r.key_type for r in certs)
    expired = sum(1 for r in certs if r.not_after is not None and r.not_after < now)
    soon = sum(
        1
        for r in certs
        if r.not_after is not None and now <= r.not_after < now + EXPIRING_DAYS * _DAY
    )
    changed: Value = None
    if previous is not None:
        changed = reads.certificates_changed(conn, host, previous.taken_at)
    return Section(
        "TLS and certificates",
        (
            Figure("tls.capsules", "capsules whose TLS the crawl recorded", len(current), last),
            Figure(
                "tls.versions",
                "capsules by TLS version",
                distribution(Counter(r.tls_version for r in current).items()),
                last,
            ),
            Figure(
                "tls.ciphers",
                "capsules by cipher suite",
                distribution(Counter(r.cipher for r in current).items(), TOP),
                last,
            ),
            Figure(
                "certs.trust",
                "certificates: self-signed, issued by a known CA, by another issuer",
                distribution(Counter(r.trust for r in certs).items()),
                last,
            ),
            Figure(
                "certs.issuers",
                "CA-issued certificates by issuer",
                distribution(issuers.items(), TOP),
                last,
            ),
            Figure(
                "certs.keys",
                "certificates by key type and size (bits)",
                distribution(keys.items()),
                last,
            ),
            Figure("certs.expired", "certificates expired at the census", expired, last),
            Figure(
                "certs.expiring",
                f"certificates expiring within {EXPIRING_DAYS} days of the census",
                soon,
                last,
            ),
            Figure(
                "certs.name_mismatch",
                "certificates whose names (SAN, else CN) do not cover the host",
                sum(1 for r in certs if not r.name_matches),
                last,
            ),
            Figure(
                "certs.unreadable",
                "certificates that could not be parsed",
                len(current) - len(certs),
                last,
            ),
            Figure(
                "certs.changed",
                "capsules whose certificate changed since the last census (none kept: unknown)",
                changed,
                "since the last census",
            ),
        ),
    )


def _short_name(rfc4514: str) -> str:
    """An issuer's O (else CN, else the whole name), for grouping."""
    parts = dict(p.split("=", 1) for p in rfc4514.split(",") if "=" in p)
    return parts.get("O") or parts.get("CN") or rfc4514 or "-"


def _web(conn: Database, host: str | None, now: float) -> Section:
    """Capsules also crawled over the web: their two policies compared."""
    capsules = reads.hosts(conn, host)
    return Section("Web and Gemini policies", tuple(web_figures(conn, capsules, now)))


def _feeds(conn: Database, host: str | None) -> Section:
    """Feeds by format."""
    rows = reads.feeds(conn, host)
    return Section(
        "Feeds", (Figure("feeds.formats", "feeds by format", distribution(rows), "the crawl"),)
    )
