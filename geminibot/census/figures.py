"""The census of a crawl store: Lupa's figures of Geminispace, and the ones only this
project's crawl records (TLS and certificates, policy files and what they refuse).

:func:`take_census` reads a store (an sqlite3 or a psycopg connection: the same SQL runs on
both) and returns a :class:`~geminibot.census.model.Census`; it writes nothing. Every
figure is over the Gemini capsules of the store (web origins are left out) and says its
window: the crawl's (from its first to its last recorded answer), or the last
:data:`RECENT_DAYS` days before the census.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from geminibot.census.model import Census, Figure, Section, Value
from geminibot.census.policies import policy_figures, security_figures
from geminibot.census.sql import counted, one, run
from geminibot.census.web import web_figures
from geminibot.gemini.certfacts import KNOWN_CA, SELF_SIGNED
from geminibot.gemini.response import parse_mime
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
#: Gemini hosts only: a web origin's key has a scheme (``https://...``).
GEMINI_HOST = "host NOT LIKE '%://%'"


def nearest_rank(n: int, q: float) -> int:
    """The rank (1 to ``n``) of the ``q`` quantile of ``n`` ordered values (nearest rank)."""
    return min(n, max(1, -(-int(q * n * 1000) // 1000)))


def size_figures(conn: Database, where: str, params: dict[str, Any]) -> dict[str, int | float]:
    """Mean, quantiles (:data:`QUANTILES`) and maximum of the sizes of the 20 answers
    ``where`` selects, worked out by the database (the quantiles by ``row_number()`` over
    the sizes in order, on both engines): nothing is held per page, so memory stays the
    same whatever the store's size."""
    n, total, biggest = run(
        conn,
        f"SELECT count(*), sum(size), max(size) FROM pages WHERE {where} AND status = 20",
        params,
    )[0]
    n = int(n or 0)
    ranks = {f"p{int(q * 100)}": nearest_rank(n, q) for q in QUANTILES}
    at_rank: dict[int, int] = {}
    if n:
        wanted = ", ".join(str(r) for r in sorted(set(ranks.values())))
        at_rank = {
            int(r): int(size)
            for r, size in run(
                conn,
                "SELECT r, size FROM (SELECT size, row_number() OVER (ORDER BY size) AS r"
                f" FROM pages WHERE {where} AND status = 20) ranked WHERE r IN ({wanted})",
                params,
            )
        }
    return {
        "mean": round(int(total) / n, 1) if n else 0,
        **{name: at_rank.get(rank, 0) for name, rank in ranks.items()},
        "max": int(biggest) if n else 0,
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


class _Scope:
    """The SQL condition and parameters of the census's hosts: every Gemini host, or one."""

    def __init__(self, host: str | None) -> None:
        self.host = host
        self.where = "host = :host" if host is not None else GEMINI_HOST
        self.params: dict[str, Any] = {"host": host} if host is not None else {}


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
    scope = _Scope(host)
    start = one(conn, f"SELECT min(fetched_at) FROM pages WHERE {scope.where}", scope.params)
    end = one(conn, f"SELECT max(fetched_at) FROM pages WHERE {scope.where}", scope.params)
    crawl = "the crawl" if start is None else "the crawl's window"
    sections = [
        _uris(conn, scope, now, crawl),
        _capsules(conn, scope, now, crawl),
        _content(conn, scope, crawl),
        _tls(conn, scope, now, previous),
        Section("Policies", tuple(policy_figures(conn, scope.where, scope.params, agent))),
        Section("security.txt", tuple(security_figures(conn, scope.where, scope.params, now))),
        _web(conn, scope, now),
        _feeds(conn, scope),
    ]
    notes = (
        "Counts are of Gemini capsules (web origins left out); a capsule is a host and "
        "port. Certificates are the ones last seen per capsule.",
    )
    return Census(now, start, end, tuple(sections), host, notes)


def _uris(conn: Database, scope: _Scope, now: float, crawl: str) -> Section:
    w, p = scope.where, {**scope.params, "since": now - RECENT_DAYS * _DAY}
    known = one(conn, f"SELECT count(*) FROM urls WHERE {w}", p)
    answered = one(conn, f"SELECT count(*) FROM pages WHERE {w}", p)
    recent = one(
        conn, f"SELECT count(*) FROM pages WHERE {w} AND status = 20 AND fetched_at >= :since", p
    )
    ok = one(conn, f"SELECT count(*) FROM pages WHERE {w} AND status = 20", p)
    gemtext = one(
        conn, f"SELECT count(*) FROM pages WHERE {w} AND status = 20 AND mime = 'text/gemini'", p
    )
    return Section(
        "URIs",
        (
            Figure("uris.known", "URIs known (seen in links, seeds or redirects)", known, crawl),
            Figure("uris.answered", "URIs that gave an answer (any status)", answered, crawl),
            Figure("uris.ok", "URIs whose last answer was 20", ok, crawl),
            Figure(
                "uris.ok_recent",
                f"URIs that answered 20 in the last {RECENT_DAYS} days",
                recent,
                f"the last {RECENT_DAYS} days",
            ),
            Figure("uris.gemtext", "URIs answering 20 with text/gemini", gemtext, crawl),
            Figure(
                "uris.gemtext_share",
                "share of the URIs answering 20 that are text/gemini",
                round(int(gemtext) / int(ok), 4) if ok else None,
                crawl,
            ),
            Figure(
                "uris.no_answer",
                "URIs that gave no answer (connection, TLS, timeout: failed)",
                one(conn, f"SELECT count(*) FROM urls WHERE {w} AND state = 'failed'", p),
                crawl,
            ),
            Figure(
                "uris.size_bytes",
                "sizes of 20 answers' bodies (bytes)",
                size_figures(conn, w, scope.params),
                crawl,
            ),
            Figure(
                "uris.status",
                "URIs by the status of their last answer",
                counted(
                    run(conn, f"SELECT status, count(*) FROM pages WHERE {w} GROUP BY status", p)
                ),
                crawl,
            ),
        ),
    )


def _capsules(conn: Database, scope: _Scope, now: float, crawl: str) -> Section:
    w, p = scope.where, {**scope.params, "since": now - RECENT_DAYS * _DAY}
    known = one(conn, f"SELECT count(*) FROM hosts WHERE {w}", p)
    reachable = one(conn, f"SELECT count(DISTINCT host) FROM pages WHERE {w}", p)
    largest = counted(
        run(conn, f"SELECT host, count(*) FROM pages WHERE {w} AND status = 20 GROUP BY host", p),
        TOP,
    )
    inlinks = counted(
        run(
            conn,
            "SELECT u.host, count(DISTINCT p.host) FROM links l"
            " JOIN pages p ON p.id = l.page_id JOIN urls u ON u.url = l.target"
            f" WHERE u.host <> p.host AND u.{w}"
            " AND p.host NOT LIKE '%://%' GROUP BY u.host",
            p,
        ),
        TOP,
    )
    return Section(
        "Capsules",
        (
            Figure("capsules.known", "capsules known (host and port)", known, crawl),
            Figure(
                "capsules.reachable", "capsules that gave at least one answer", reachable, crawl
            ),
            Figure("capsules.largest", "largest capsules, by URIs answering 20", largest, crawl),
            Figure(
                "capsules.inlinks",
                "capsules most linked to: other capsules linking to them (one per capsule)",
                inlinks,
                crawl,
            ),
        ),
    )


def _content(conn: Database, scope: _Scope, crawl: str) -> Section:
    w, p = scope.where, scope.params
    charsets: Counter[str] = Counter()
    for meta, n in run(
        conn,
        f"SELECT meta, count(*) FROM pages WHERE {w} AND status = 20 AND mime LIKE 'text/%'"
        " GROUP BY meta",
        p,
    ):
        charsets[charset_of(str(meta))] += int(n)
    return Section(
        "Content",
        (
            Figure(
                "content.mime",
                "20 answers by MIME type",
                counted(
                    run(
                        conn,
                        f"SELECT coalesce(mime, '-'), count(*) FROM pages WHERE {w} AND status = 20 GROUP BY 1",
                        p,
                    ),
                    TOP,
                ),
                crawl,
            ),
            Figure(
                "content.languages",
                "text/gemini answers by declared language (lang=)",
                counted(
                    run(
                        conn,
                        f"SELECT coalesce(lower(lang), 'none declared'), count(*) FROM pages"
                        f" WHERE {w} AND status = 20 AND mime = 'text/gemini' GROUP BY 1",
                        p,
                    ),
                    TOP,
                ),
                crawl,
            ),
            Figure(
                "content.charsets",
                "text answers by declared charset",
                counted(charsets.items(), TOP),
                crawl,
            ),
            Figure(
                "content.charset_undecodable",
                "text answers whose body does not decode by its declared charset",
                one(
                    conn,
                    f"SELECT count(*) FROM pages WHERE {w} AND status = 20 AND NOT charset_ok",
                    p,
                ),
                crawl,
            ),
            Figure(
                "content.charset_undecodable_share",
                "share of text answers (known) whose body does not decode by its charset",
                _share(
                    conn,
                    f"SELECT count(*) FROM pages WHERE {w} AND status = 20 AND NOT charset_ok",
                    f"SELECT count(*) FROM pages WHERE {w} AND status = 20 AND charset_ok IS NOT NULL",
                    p,
                ),
                crawl,
            ),
        ),
    )


def _share(conn: Database, part: str, whole: str, p: dict[str, Any]) -> float | None:
    """``part`` / ``whole`` (two counts) rounded to 4 places; None when ``whole`` is 0."""
    total = int(one(conn, whole, p) or 0)
    return None if total == 0 else round(int(one(conn, part, p) or 0) / total, 4)


def _current_tls(conn: Database, scope: _Scope) -> list[dict[str, Any]]:
    """Each capsule's TLS facts last seen (one row per capsule)."""
    columns = (
        "host", "sha256", "tls_version", "cipher", "first_seen", "last_seen", "spki_sha256",
        "subject", "issuer", "sans", "trust", "key_type", "key_bits", "not_before",
        "not_after", "name_matches", "parsed",
    )  # fmt: skip
    rows = run(
        conn,
        f"SELECT {', '.join('t.' + c for c in columns)} FROM tls_history t"
        f" WHERE t.{scope.where} AND t.last_seen = (SELECT max(last_seen) FROM tls_history"
        " s WHERE s.host = t.host) ORDER BY t.host, t.first_seen DESC",
        scope.params,
    )
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        latest.setdefault(str(row[0]), dict(zip(columns, row, strict=True)))
    return list(latest.values())


def tls_rows(conn: Database, host: str) -> list[dict[str, Any]]:
    """Every TLS facts row of ``host``, newest first (its history)."""
    columns = ("sha256", "spki_sha256", "tls_version", "cipher", "first_seen", "last_seen",
               "subject", "issuer", "sans", "trust", "key_type", "key_bits", "not_before",
               "not_after", "name_matches")  # fmt: skip
    rows = run(
        conn,
        f"SELECT {', '.join(columns)} FROM tls_history WHERE host = :host ORDER BY last_seen DESC",
        {"host": host},
    )
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _tls(conn: Database, scope: _Scope, now: float, previous: Census | None) -> Section:
    current = _current_tls(conn, scope)
    last = "each capsule's last connection"
    certs = [r for r in current if r["parsed"]]
    issuers = Counter(
        f"{_short_name(r['issuer'])}{'' if r['trust'] == KNOWN_CA else ' (unknown CA)'}"
        for r in certs
        if r["trust"] != SELF_SIGNED
    )
    keys = Counter(
        f"{r['key_type']} {r['key_bits']}" if r["key_bits"] else r["key_type"] for r in certs
    )
    expired = sum(1 for r in certs if r["not_after"] is not None and r["not_after"] < now)
    soon = sum(
        1
        for r in certs
        if r["not_after"] is not None and now <= r["not_after"] < now + EXPIRING_DAYS * _DAY
    )
    changed: Value = None
    if previous is not None:
        since = previous.taken_at
        changed = int(
            one(
                conn,
                "SELECT count(DISTINCT t.host) FROM tls_history t"
                f" WHERE t.{scope.where} AND t.first_seen > :since AND EXISTS (SELECT 1 FROM"
                " tls_history o WHERE o.host = t.host AND o.sha256 <> t.sha256"
                " AND o.first_seen < t.first_seen)",
                {**scope.params, "since": since},
            )
            or 0
        )
    return Section(
        "TLS and certificates",
        (
            Figure("tls.capsules", "capsules whose TLS the crawl recorded", len(current), last),
            Figure(
                "tls.versions",
                "capsules by TLS version",
                counted(Counter(r["tls_version"] for r in current).items()),
                last,
            ),
            Figure(
                "tls.ciphers",
                "capsules by cipher suite",
                counted(Counter(r["cipher"] for r in current).items(), TOP),
                last,
            ),
            Figure(
                "certs.trust",
                "certificates: self-signed, issued by a known CA, by another issuer",
                counted(Counter(r["trust"] for r in certs).items()),
                last,
            ),
            Figure(
                "certs.issuers",
                "CA-issued certificates by issuer",
                counted(issuers.items(), TOP),
                last,
            ),
            Figure(
                "certs.keys",
                "certificates by key type and size (bits)",
                counted(keys.items()),
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
                sum(1 for r in certs if not r["name_matches"]),
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


def _web(conn: Database, scope: _Scope, now: float) -> Section:
    """Capsules also crawled over the web: their two policies compared."""
    capsules = [
        str(r[0]) for r in run(conn, f"SELECT host FROM hosts WHERE {scope.where}", scope.params)
    ]
    return Section("Web and Gemini policies", tuple(web_figures(conn, capsules, now)))


def _feeds(conn: Database, scope: _Scope) -> Section:
    """Feeds by format."""
    rows = run(
        conn, f"SELECT format, count(*) FROM feeds WHERE {scope.where} GROUP BY 1", scope.params
    )
    return Section(
        "Feeds", (Figure("feeds.formats", "feeds by format", counted(rows), "the crawl"),)
    )
