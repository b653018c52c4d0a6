"""The crawl's keeping of TLS facts (:class:`geminibot.crawl.tlsfacts.TLSRecorder`) on a
real SQLite store: a certificate's facts are worked out once while it stays the host's,
``last_seen`` is written at most once per LAST_SEEN_EVERY, a change makes a new row."""

from __future__ import annotations

from pathlib import Path

from census_certs import certificate
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from geminibot.crawl.tlsfacts import LAST_SEEN_EVERY, TLSRecorder
from geminibot.gemini.certfacts import KNOWN_CA, TrustStore, sha256_fingerprint
from geminibot.gemini.client import TLSSeen
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.db import connect
from geminibot.store.traps import FrontierLimits

CA_KEY = ec.generate_private_key(ec.SECP256R1())
CA = certificate("Recorder CA", CA_KEY, ca=True)


class CountingTrust(TrustStore):
    """A trust store that counts the certificates it was asked about."""

    asked = 0

    def issuer_of(self, cert: x509.Certificate) -> x509.Certificate | None:
        CountingTrust.asked += 1
        return super().issuer_of(cert)


def seen(cert: x509.Certificate, version: str = "TLSv1.3") -> TLSSeen:
    der = cert.public_bytes(serialization.Encoding.DER)
    return TLSSeen(version, "TLS_AES_128_GCM_SHA256", der, sha256_fingerprint(der))


def test_facts_are_worked_out_only_when_the_certificate_changes(tmp_path: Path) -> None:
    conn = connect(tmp_path / "crawl.db")
    store = SqliteStore(conn, lambda: 0.0, FrontierLimits())
    loads: list[int] = []

    def trust() -> TrustStore:
        loads.append(1)
        return CountingTrust([CA])

    recorder = TLSRecorder(store, trust)
    key = ec.generate_private_key(ec.SECP256R1())
    first = seen(certificate("a.test", key, issuer=("Recorder CA", CA_KEY)))
    CountingTrust.asked = 0
    for n in range(100):
        recorder.seen("a.test", first, 1000.0 + n)
    assert CountingTrust.asked == 1 and loads == [1]
    recorder.seen("a.test", first, 1000.0 + LAST_SEEN_EVERY + 1)  # last_seen written
    older = TLSSeen("TLSv1.2", first.cipher, first.der, first.fingerprint)
    recorder.seen("a.test", older, 5000.0)
    assert CountingTrust.asked == 1  # only the version changed: the facts are the same
    renewed = seen(certificate("a.test", ec.generate_private_key(ec.SECP256R1())))
    recorder.seen("a.test", renewed, 9000.0)
    store.flush()
    rows = conn.execute(
        "SELECT sha256, tls_version, trust, first_seen, last_seen FROM tls_history"
        " ORDER BY first_seen"
    ).fetchall()
    assert rows[0] == (first.fingerprint, "TLSv1.3", KNOWN_CA, 1000.0, 1000.0 + LAST_SEEN_EVERY + 1)
    assert [r[1:3] for r in rows[1:]] == [("TLSv1.2", KNOWN_CA), ("TLSv1.3", "self-signed")]
    conn.close()
