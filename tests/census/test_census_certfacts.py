"""The certificate facts a crawl keeps (:mod:`geminibot.gemini.certfacts`): issuer
standing, key, names, fingerprints, and a certificate that cannot be parsed."""

from __future__ import annotations

import hashlib

from census_certs import certificate
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from geminibot.gemini.certfacts import (
    KNOWN_CA,
    SELF_SIGNED,
    UNKNOWN_CA,
    TrustStore,
    certificate_facts,
    name_matches,
)

EC_KEY = ec.generate_private_key(ec.SECP256R1())
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
CA_KEY = ec.generate_private_key(ec.SECP384R1())
CA = certificate("Test CA", CA_KEY, ca=True)


def der(cert: object) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)  # type: ignore[attr-defined, no-any-return]


def test_a_self_signed_ec_certificate() -> None:
    data = der(certificate("a.test", EC_KEY))
    facts = certificate_facts(data, "a.test", TrustStore())
    assert facts.trust == SELF_SIGNED
    assert (facts.key_type, facts.key_bits) == ("EC secp256r1", 256)
    assert facts.sha256 == hashlib.sha256(data).digest().hex(":").upper()
    spki = EC_KEY.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert facts.spki_sha256 == hashlib.sha256(spki).digest().hex(":").upper()
    assert facts.subject == facts.issuer == "CN=a.test"
    assert facts.sans == ("a.test",)
    assert facts.name_matches and facts.parsed
    assert facts.not_before is not None and facts.not_after is not None
    assert facts.not_before < facts.not_after


def test_a_certificate_of_a_known_ca_and_of_an_unknown_one() -> None:
    leaf = der(certificate("b.test", RSA_KEY, issuer=("Test CA", CA_KEY)))
    known = certificate_facts(leaf, "b.test", TrustStore([CA]))
    assert known.trust == KNOWN_CA
    assert known.issuer == "CN=Test CA"
    assert (known.key_type, known.key_bits) == ("RSA", 2048)
    assert certificate_facts(leaf, "b.test", TrustStore()).trust == UNKNOWN_CA
    # a CA of the same name but another key did not sign it
    impostor = certificate("Test CA", ec.generate_private_key(ec.SECP256R1()), ca=True)
    assert certificate_facts(leaf, "b.test", TrustStore([impostor])).trust == UNKNOWN_CA


def test_the_trust_store_reads_pem_files(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "ca.pem"
    path.write_bytes(CA.public_bytes(serialization.Encoding.PEM))
    assert len(TrustStore.load((path,), system=False)) == 1


def test_names_that_do_not_cover_the_host() -> None:
    data = der(certificate("other.test", EC_KEY))
    assert not certificate_facts(data, "mine.test", TrustStore()).name_matches
    assert name_matches("www.example.org", ["*.example.org"])
    assert not name_matches("a.b.example.org", ["*.example.org"])
    assert not name_matches("example.org", ["*.example.org"])
    assert name_matches("EXAMPLE.org.", ["example.ORG"])
    assert name_matches("127.0.0.1", ["127.0.0.1"])
    assert not name_matches("127.0.0.1", ["localhost"])


def test_an_expired_certificate_keeps_its_dates() -> None:
    facts = certificate_facts(
        der(certificate("old.test", EC_KEY, expired=True)), "old.test", TrustStore()
    )
    from census_certs import NOW

    assert facts.not_after is not None and facts.not_after < NOW.timestamp()


def test_bytes_that_are_no_certificate_keep_their_hash() -> None:
    facts = certificate_facts(b"\x30\x03junk", "x.test", TrustStore())
    assert not facts.parsed
    assert facts.sha256 == hashlib.sha256(b"\x30\x03junk").digest().hex(":").upper()


def test_names_are_bounded() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    from geminibot.gemini.certfacts import MAX_NAME_CHARS, MAX_SAN_CHARS, MAX_SANS

    long = "a" * 60
    names = [
        x509.DNSName(f"{long}.{long}.{long}.{long}.{long}.{n}.test") for n in range(MAX_SANS + 5)
    ]
    subject = x509.Name([x509.NameAttribute(x509.oid.NameOID.ORGANIZATION_NAME, "o" * 5000)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(EC_KEY.public_key())
        .serial_number(1)
        .not_valid_before(CA.not_valid_before_utc)
        .not_valid_after(CA.not_valid_after_utc)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(EC_KEY, hashes.SHA256())
    )
    facts = certificate_facts(der(cert), "x.test", TrustStore())
    assert len(facts.sans) == MAX_SANS
    assert all(len(name) <= MAX_SAN_CHARS for name in facts.sans)
    assert len(facts.subject) == len(facts.issuer) == MAX_NAME_CHARS
