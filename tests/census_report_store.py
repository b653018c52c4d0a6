"""A small crawl store written for the HTML report's tests: capsules with pages in
three languages, several MIME types and statuses, TLS 1.2 and 1.3, self-signed and
CA-issued certificates, a MIME type and an issuer written by an attacker; and four
censuses kept a week apart as the crawl grew."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from geminibot.census.figures import take_census
from geminibot.census.history import keep
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.database import Database
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Link, Page, store_page
from geminibot.store.records import TLSRecord
from geminibot.store.traps import FrontierLimits

#: A label no page may show as markup, nor a chart as math.
HOSTILE = 'text/x-<script>alert("$1$")</script>\x1b[31m'
WEEK = 7 * 86_400.0
START = 1_790_000_000.0
HOSTS = ("alpha.test", "beta.test", "gamma.test", "delta.test", "epsilon.test")
TLS = TLSRecord(
    host="alpha.test",
    tls_version="TLSv1.3",
    cipher="TLS_AES_256_GCM_SHA384",
    sha256="AA",
    spki_sha256="BB",
    subject="CN=alpha.test",
    issuer="CN=alpha.test",
    sans=("alpha.test",),
    trust="self-signed",
    key_type="EC secp256r1",
    key_bits=256,
    not_before=0.0,
    not_after=4_000_000_000.0,
    name_matches=True,
    parsed=True,
    seen=START,
)


def _pages(week: int) -> list[Page]:
    pages = []
    for h, host in enumerate(HOSTS):
        for n in range(4 + 3 * week + 2 * (len(HOSTS) - h)):
            kind = n % 6
            mime = ("text/gemini", "text/gemini", "text/plain", "image/png", "text/gemini")[
                kind % 5
            ]
            status = 51 if kind == 5 else 20
            pages.append(
                Page(
                    url=f"gemini://{host}/{n}.gmi",
                    host=host,
                    status=status,
                    meta=mime if status == 20 else "Not found",
                    fetched_at=START + week * WEEK,
                    size=300 + 97 * n,
                    mime=HOSTILE if (h, n) == (4, 0) else mime if status == 20 else None,
                    lang=("en", "fr", "de")[(n + h) % 3] if mime == "text/gemini" else None,
                    charset_ok=True if mime.startswith("text/") else None,
                    links=tuple(
                        Link(f"gemini://{other}/0.gmi") for other in HOSTS[: h + 1] if other != host
                    )
                    if n == 0
                    else (),
                )
            )
    return pages


def fill(db: Path, weeks: int = 4, *, kept: bool = True) -> None:
    """``db``: the store as it was after ``weeks`` weekly crawls, a census kept after
    each (none if not ``kept``)."""
    conn = connect(db)
    store = SqliteStore(conn, lambda: START, FrontierLimits())
    conn.executemany(
        "INSERT INTO hosts (host, first_seen) VALUES (?, ?)", [(h, START) for h in HOSTS]
    )
    for i, host in enumerate(HOSTS):
        ca = i % 2 == 1
        store.saw_tls(
            replace(
                TLS,
                host=host,
                tls_version="TLSv1.2" if i == 2 else "TLSv1.3",
                sha256=f"{i:02X}",
                issuer="O=Let's <Encrypt>,CN=R3" if ca else f"CN={host}",
                trust="known-ca" if ca else "self-signed",
                key_type="RSA" if ca else "EC secp256r1",
                key_bits=2048 if ca else 256,
            )
        )
    store.flush()
    for week in range(weeks):
        with transaction(conn):
            for page in _pages(week):
                store_page(conn, page, "researcher")
                conn.execute(
                    "INSERT OR IGNORE INTO urls (url, host, path, has_query, depth, state,"
                    " updated_at) VALUES (?, ?, ?, 0, 1, 'done', ?)",
                    (page.url, page.host, page.url.split("/", 3)[3], page.fetched_at),
                )
        if kept:
            database = Database(db.name, conn, path=db)
            keep(database, take_census(database, START + week * WEEK + 3600))
    conn.close()
