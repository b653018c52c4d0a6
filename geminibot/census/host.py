"""One capsule's own census, for its owner: its errors by kind, gone pages and redirects,
its robots.txt as the crawl last fetched it, its certificate (fingerprints as Gemini
clients show them, expiry, changes) and how its pages split between searchable and each
reason to be out."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from geminibot.census.model import Census, Figure, Section, distribution
from geminibot.cliutil import CommandError
from geminibot.policy.cli import lint_file
from geminibot.store import census_reads as reads
from geminibot.store import policy_reads
from geminibot.store.database import Database
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


def host_census(conn: Database, host: str, now: float) -> Census:
    """The census of ``host`` (a host key: ``name`` or ``name:port``)."""
    if not reads.host_count(conn, host):
        raise CommandError(f"census: the crawl knows no host {host}")
    start, end = reads.answered_window(conn, host)
    return Census(
        now,
        start,
        end,
        (
            _answers(conn, host, now),
            _robots(conn, host),
            _certificate(conn, host, now),
            _index(conn, host),
        ),
        host,
    )


def _answers(conn: Database, host: str, now: float) -> Section:
    errors: Counter[str] = Counter({"DNS": 0, "TLS": 0, "timeout": 0, "4x": 0, "5x": 0})
    for reason, n in reads.url_reasons(conn, host, "failed"):
        errors[error_kind(reason or "")] += n
    statuses = [(int(s), n) for s, n in reads.statuses(conn, host) if s is not None]
    for status, n in statuses:
        if status >= 40:
            errors[f"{status // 10 % 10}x" if status < 100 else f"{status // 100}xx"] += n
    gone = reads.answers(conn, host, now).gone
    redirects = distribution((s, n) for s, n in statuses if 30 <= s < 40)
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


def _robots(conn: Database, host: str) -> Section:
    file = policy_reads.host_file(conn, host, "robots.txt")
    meta, error = policy_reads.last_fetch(conn, host_url(host, "/robots.txt"))
    window = "the crawl's last fetch of /robots.txt"
    if file is None:
        return Section(
            "robots.txt", (Figure("host.robots.fetched", "robots.txt fetched", "never", window),)
        )
    fetched_at, status, outcome = file.fetched_at, file.status, file.outcome.kind
    data = file.body or b""
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


def _certificate(conn: Database, host: str, now: float) -> Section:
    rows = reads.tls_history(conn, host)
    window = "the last connection"
    if not rows:
        return Section(
            "Certificate", (Figure("host.cert.sha256", "certificate SHA-256", None, window),)
        )
    last = rows[0]
    not_after = last.not_after
    days = None if not_after is None else int((float(not_after) - now) // 86_400)
    return Section(
        "Certificate",
        (
            Figure(
                "host.cert.sha256",
                "certificate SHA-256 (as TOFU clients show it)",
                last.sha256,
                window,
            ),
            Figure(
                "host.cert.spki_sha256",
                "public key (SPKI) SHA-256",
                last.spki_sha256,
                window,
            ),
            Figure("host.cert.subject", "subject", last.subject, window),
            Figure("host.cert.issuer", f"issuer ({last.trust})", last.issuer, window),
            Figure(
                "host.cert.key",
                "key",
                f"{last.key_type} {last.key_bits or ''}".strip(),
                window,
            ),
            Figure("host.cert.expires", "expires", _date(not_after), window),
            Figure(
                "host.cert.days_left", "days until it expires (negative: expired)", days, window
            ),
            Figure(
                "host.cert.name_matches",
                "its names cover the host (1 yes, 0 no)",
                int(last.name_matches),
                window,
            ),
            Figure(
                "host.tls",
                "TLS version and cipher",
                f"{last.tls_version} {last.cipher}",
                window,
            ),
            Figure(
                "host.cert.changes",
                "certificates seen for the host (a change each after the first)",
                len({r.sha256 for r in rows}),
                _CRAWL,
            ),
        ),
    )


def _index(conn: Database, host: str) -> Section:
    _, searchable, duplicates = reads.page_counts(conn, host)
    states = distribution(reads.url_states(conn, host).items())
    refused = distribution(
        [*reads.url_reasons(conn, host, "refused"), *reads.url_reasons(conn, host, "trapped")],
        10,
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
