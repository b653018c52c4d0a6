"""Certificates: made once per host, reused, replaced when unusable, listed by the CLI."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from capsule_server.cli import main
from geminibot.gemini.certs import (
    CERT_VALIDITY_DAYS,
    RENEW_BEFORE_DAYS,
    ensure_certificate,
    list_certificates,
)

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def test_new_certificate_has_san_key_type_and_validity(tmp_path: Path) -> None:
    info = ensure_certificate(tmp_path, "va-groups.test", NOW)
    cert = x509.load_pem_x509_certificate(info.cert_path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["va-groups.test"]
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert info.key_type == "ECDSA secp256r1"
    assert cert.not_valid_after_utc - NOW == dt.timedelta(days=CERT_VALIDITY_DAYS)
    assert info.key_path.stat().st_mode & 0o777 == 0o600
    assert len(info.sha256.split(":")) == 32


def test_reused_on_later_starts(tmp_path: Path) -> None:
    first = ensure_certificate(tmp_path, "a.test", NOW)
    again = ensure_certificate(tmp_path, "a.test", NOW + dt.timedelta(days=400))
    assert again.sha256 == first.sha256


def test_replaced_near_expiry(tmp_path: Path) -> None:
    first = ensure_certificate(tmp_path, "a.test", NOW)
    edge = first.not_after - dt.timedelta(days=RENEW_BEFORE_DAYS)
    assert ensure_certificate(tmp_path, "a.test", edge - dt.timedelta(seconds=1)).sha256 == (
        first.sha256
    )
    assert ensure_certificate(tmp_path, "a.test", edge).sha256 != first.sha256


@pytest.mark.parametrize("damage", ["garbage-cert", "garbage-key", "other-key", "other-host"])
def test_replaced_when_unusable(tmp_path: Path, damage: str) -> None:
    first = ensure_certificate(tmp_path, "a.test", NOW)
    other = ensure_certificate(tmp_path, "b.test", NOW)
    if damage == "garbage-cert":
        first.cert_path.write_bytes(b"not a certificate")
    elif damage == "garbage-key":
        first.key_path.write_bytes(b"not a key")
    elif damage == "other-key":
        first.key_path.write_bytes(other.key_path.read_bytes())
    else:
        first.cert_path.write_bytes(other.cert_path.read_bytes())
        first.key_path.write_bytes(other.key_path.read_bytes())
    fixed = ensure_certificate(tmp_path, "a.test", NOW)
    assert fixed.sha256 not in (first.sha256, other.sha256)


def test_certs_command_lists_fingerprints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = ensure_certificate(tmp_path, "a.test", NOW)
    ensure_certificate(tmp_path, "b.test", NOW)
    (tmp_path / "junk.crt").write_text("junk")
    assert main(["certs", "--certs", str(tmp_path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["host"] for r in rows] == ["a.test", "b.test"]
    assert rows[0]["sha256"] == a.sha256
    assert main(["certs", "--certs", str(tmp_path)]) == 0
    assert f"a.test  SHA256:{a.sha256}" in capsys.readouterr().out
    assert list_certificates(tmp_path / "missing") == []


def test_certs_make_for_a_capsules_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "caps" / "one.test"
    site.mkdir(parents=True)
    certs = tmp_path / "certs"
    assert main(["certs", "--certs", str(certs), "--make", str(tmp_path / "caps")]) == 0
    assert sorted(p.name for p in certs.glob("*.crt")) == ["localhost.crt", "one.test.crt"]
    first = capsys.readouterr().out
    assert main(["certs", "--certs", str(certs), "--make", str(tmp_path / "caps")]) == 0
    assert capsys.readouterr().out == first  # reused, same fingerprints
