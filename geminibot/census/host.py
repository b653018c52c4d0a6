"""One capsule's own census, for its owner: its errors by kind, gone pages and redirects,
its robots.txt as the crawl last fetched it, its certificate (fingerprints as Gemini
clients show them, expiry, changes) and how its pages split between searchable and each
reason to be out."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from geminibot.census.figures import tls_rows
from geminibot.census.model import Census, Figure, Section
from geminibot.census.sql import counted, one, run
from geminibot.cliutil import CommandError
from geminibot.policy.cli import lint_file
from geminibot.urls import host_url

#: Error kinds, by the names of the client's errors a failed request records.
ERROR_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("DNS", ("name or service not known", "nodename nor servname", "no address", "resol")),
    ("TLS", ("tlsfailure", "certificate")),
    ("timeout", ("timeout", "deadlineexceeded")),
)
_CRAWL = "the crawl"


def error_kind(error: str) -> str:
    """DNS, TLS, timeout or other, for a failed request's recorded error."""
    low = error.lower()
    for kind, marks in ERROR_KINDS:
        if any(mark in low for mark in marks):
            return kind
    return "other (connection)"


def _date(seconds: Any) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(float(seconds), UTC).strftime("%Y-%m-%d")


def host_census(conn: Any, host: str, now: float) -> Census:
    """The census of ``host`` (a host key: ``name`` or ``name:port``)."""
    p = {"host": host}
    if not one(conn, "SELECT count(*) FROM hosts WHERE host = :host", p):
        raise CommandError(f"census: the crawl knows no host {host}")
    start = one(conn, "SELECT min(fetched_at) FROM pages WHERE host = :host", p)
    end = one(conn, "SELECT max(fetched_at) FROM pages WHERE host = :host", p)
    return Census(
        now,
        start,
        end,
        (_answers(conn, p), _robots(conn, host), _certificate(conn, host, now), _index(conn, p)),
        host,
    )


def _answers(conn: Any, p: dict[str, Any]) -> Section:
    errors: Counter[str] = Counter({"DNS": 0, "TLS": 0, "timeout": 0, "4x": 0, "5x": 0})
    for (reason,) in run(
        conn, "SELECT coalesce(reason, '') FROM urls WHERE host = :host AND state = 'failed'", p
    ):
        errors[error_kind(str(reason))] += 1
    for status, n in run(
        conn, "SELECT status, count(*) FROM pages WHERE host = :host AND status >= 40 GROUP BY 1", p
    ):
        errors[
            f"{int(status) // 10 % 10}x" if int(status) < 100 else f"{int(status) // 100}xx"
        ] += int(n)
    gone = one(conn, "SELECT count(*) FROM pages WHERE host = :host AND gone_at IS NOT NULL", p)
    redirects = counted(
        run(
            conn,
            "SELECT status, count(*) FROM pages WHERE host = :host AND status >= 30"
            " AND status < 40 GROUP BY 1",
            p,
        )
    )
    return Section(
        "Answers",
        (
            Figure(
                "host.errors", "URIs failing, by kind of error (last answer)", dict(errors), _CRAWL
            ),
            Figure(
                "host.gone", "pages gone (51, 52, 404, 410, or the host vanished)", gone, _CRAWL
            ),
            Figure("host.redirects", "URIs redirecting, by status", redirects, _CRAWL),
        ),
    )


def _robots(conn: Any, host: str) -> Section:
    rows = run(
        conn,
        "SELECT fetched_at, status, outcome, body FROM robots WHERE host = :host"
        " AND name = 'robots.txt'",
        {"host": host},
    )
    last = run(  # (by URL: the fetch log's index)
        conn,
        "SELECT meta, error FROM fetches WHERE url = :url ORDER BY started_at DESC LIMIT 1",
        {"url": host_url(host, "/robots.txt")},
    )
    meta, error = last[0] if last else (None, None)
    window = "the crawl's last fetch of /robots.txt"
    if not rows:
        return Section(
            "robots.txt", (Figure("host.robots.fetched", "robots.txt fetched", "never", window),)
        )
    fetched_at, status, outcome, body = rows[0]
    data = bytes(body or b"")
    findings = Counter(d.code for d in lint_file("robots.txt", data) if d.level != "info")
    return Section(
        "robots.txt",
        (
            Figure("host.robots.fetched", "robots.txt last fetched", _date(fetched_at), window),
            Figure(
                "host.robots.status",
                "its status (none: no answer)",
                "-" if status is None else int(status),
                window,
            ),
            Figure("host.robots.outcome", "what it means for bots", str(outcome), window),
            Figure(
                "host.robots.error",
                "the error its last request met, by kind (none: it was answered)",
                f"{error_kind(str(error))}: {error}" if error else "none",
                window,
            ),
            Figure("host.robots.mime", "its MIME type (of a 20)", _mime(status, meta), window),
            Figure("host.robots.size", "its size (bytes)", len(data), window),
            Figure("host.robots.lint", "lint warnings and errors, by kind", dict(findings), window),
        ),
    )


def _mime(status: Any, meta: Any) -> str:
    """The MIME type of a robots.txt that answered ``2x`` (another's meta is no MIME
    type: a ``51``'s is its error message)."""
    return str(meta) if meta and status is not None and str(int(status))[0] == "2" else "-"


def _certificate(conn: Any, host: str, now: float) -> Section:
    rows = tls_rows(conn, host)
    window = "the last connection"
    if not rows:
        return Section(
            "Certificate", (Figure("host.cert.sha256", "certificate SHA-256", None, window),)
        )
    last = rows[0]
    not_after = last["not_after"]
    days = None if not_after is None else int((float(not_after) - now) // 86_400)
    return Section(
        "Certificate",
        (
            Figure(
                "host.cert.sha256",
                "certificate SHA-256 (as TOFU clients show it)",
                str(last["sha256"]),
                window,
            ),
            Figure(
                "host.cert.spki_sha256",
                "public key (SPKI) SHA-256",
                str(last["spki_sha256"]),
                window,
            ),
            Figure("host.cert.subject", "subject", str(last["subject"]), window),
            Figure("host.cert.issuer", f"issuer ({last['trust']})", str(last["issuer"]), window),
            Figure(
                "host.cert.key",
                "key",
                f"{last['key_type']} {last['key_bits'] or ''}".strip(),
                window,
            ),
            Figure("host.cert.expires", "expires", _date(not_after), window),
            Figure(
                "host.cert.days_left", "days until it expires (negative: expired)", days, window
            ),
            Figure(
                "host.cert.name_matches",
                "its names cover the host (1 yes, 0 no)",
                int(bool(last["name_matches"])),
                window,
            ),
            Figure(
                "host.tls",
                "TLS version and cipher",
                f"{last['tls_version']} {last['cipher']}",
                window,
            ),
            Figure(
                "host.cert.changes",
                "certificates seen for the host (a change each after the first)",
                len({r["sha256"] for r in rows}),
                _CRAWL,
            ),
        ),
    )


def _index(conn: Any, p: dict[str, Any]) -> Section:
    searchable = one(conn, "SELECT count(*) FROM pages WHERE host = :host AND text_indexed", p)
    states = counted(run(conn, "SELECT state, count(*) FROM urls WHERE host = :host GROUP BY 1", p))
    refused = counted(
        run(
            conn,
            "SELECT reason, count(*) FROM urls WHERE host = :host AND state IN ('refused',"
            " 'trapped') GROUP BY 1",
            p,
        ),
        10,
    )
    duplicates = one(
        conn, "SELECT count(*) FROM pages WHERE host = :host AND duplicate_of IS NOT NULL", p
    )
    return Section(
        "In and out of the index",
        (
            Figure("host.searchable", "pages whose text is searchable", searchable, _CRAWL),
            Figure("host.states", "URIs by crawl state", states, _CRAWL),
            Figure("host.out_reasons", "URIs left out, by reason", refused, _CRAWL),
            Figure("host.duplicates", "pages that duplicate another", duplicates, _CRAWL),
        ),
    )
