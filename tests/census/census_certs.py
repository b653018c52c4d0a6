"""Certificates for the census tests (importable as ``census_certs`` from tests/census/):
self-signed or signed by a test CA, EC or RSA, valid or expired, for a name or another."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

NOW = dt.datetime.now(dt.UTC)


def name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def certificate(
    subject: str,
    key: Any,
    *,
    san: str | None = None,
    issuer: tuple[str, Any] | None = None,
    expired: bool = False,
    ca: bool = False,
) -> x509.Certificate:
    """A certificate for ``subject`` (SAN ``san``, else ``subject``), self-signed unless
    ``issuer`` (its name and key) is given; valid a year from yesterday, or ``expired``
    ten days ago; ``ca``: a CA certificate (no SAN)."""
    start = NOW - dt.timedelta(days=400 if expired else 1)
    end = NOW - dt.timedelta(days=10) if expired else NOW + dt.timedelta(days=365)
    issuer_name, signer = (subject, key) if issuer is None else issuer
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(san or subject)]), critical=False
        )
    return builder.sign(signer, hashes.SHA256())
