"""``tls_history`` on both stores: a row per distinct (certificate, TLS version, cipher)
of a host, its ``last_seen`` moving forward only."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from store_helpers import Clock, opened

from geminibot.store import census_reads
from geminibot.store.crawlstore import CrawlStore, SqliteStore
from geminibot.store.database import open_database
from geminibot.store.records import TLSRecord

SEEN = TLSRecord(
    host="a.test",
    tls_version="TLSv1.3",
    cipher="TLS_AES_256_GCM_SHA384",
    sha256="AA:BB",
    spki_sha256="CC:DD",
    subject="CN=a.test",
    issuer="CN=a.test",
    sans=("a.test", "www.a.test"),
    trust="self-signed",
    key_type="EC secp256r1",
    key_bits=256,
    not_before=1.0,
    not_after=2.0,
    name_matches=True,
    parsed=True,
    seen=100.0,
)


def rows(store: CrawlStore, kind: str, db: str) -> list[tuple[Any, ...]]:
    if isinstance(store, SqliteStore):
        store.flush()
    with opened(kind, db) as (conn, _):
        found = conn.execute(
            "SELECT host, sha256, tls_version, first_seen, last_seen, sans, name_matches"
            " FROM tls_history ORDER BY first_seen"
        ).fetchall()
    return [tuple(r) for r in found]


def test_the_same_facts_seen_again_move_last_seen(
    store: CrawlStore, kind: str, db: str, clock: Clock
) -> None:
    store.saw_tls(SEEN)
    store.saw_tls(replace(SEEN, seen=200.0))
    store.saw_tls(replace(SEEN, seen=150.0))  # an older sighting, written late
    got = rows(store, kind, db)
    assert [r[:5] for r in got] == [("a.test", "AA:BB", "TLSv1.3", 100.0, 200.0)]
    assert got[0][5] == "a.test\nwww.a.test"
    assert bool(got[0][6])


def test_a_new_certificate_or_version_is_a_new_row(
    store: CrawlStore, kind: str, db: str, clock: Clock
) -> None:
    store.saw_tls(SEEN)
    store.saw_tls(replace(SEEN, sha256="EE:FF", seen=300.0))
    store.saw_tls(replace(SEEN, sha256="EE:FF", tls_version="TLSv1.2", seen=400.0))
    store.saw_tls(replace(SEEN, host="b.test", seen=500.0))
    got = rows(store, kind, db)
    assert [(r[0], r[1], r[2], r[3]) for r in got] == [
        ("a.test", "AA:BB", "TLSv1.3", 100.0),
        ("a.test", "EE:FF", "TLSv1.3", 300.0),
        ("a.test", "EE:FF", "TLSv1.2", 400.0),
        ("b.test", "AA:BB", "TLSv1.3", 500.0),
    ]


def test_the_records_read_back_as_written(
    store: CrawlStore, kind: str, db: str, clock: Clock
) -> None:
    """A host's history, last seen first, and each host's last (``seen``: last seen)."""
    newer = replace(SEEN, sha256="EE:FF", sans=(), key_bits=None, not_after=None, seen=350.0)
    newer = replace(newer, name_matches=False, parsed=False)  # a certificate not read
    web = replace(SEEN, host="https://a.test", seen=500.0)  # not a Gemini capsule
    for record in (SEEN, replace(newer, seen=300.0), newer, web):
        store.saw_tls(record)
    if isinstance(store, SqliteStore):
        store.flush()
    with open_database(db) as database:
        assert census_reads.tls_history(database, "a.test") == [newer, SEEN]
        assert census_reads.current_tls(database, None) == [newer]
        assert census_reads.current_tls(database, "https://a.test") == [web]
