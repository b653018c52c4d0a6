"""Self-signed TLS certificates for tests and benchmarks (importable as ``certs``).

``tests/conftest.py`` puts this folder on ``sys.path``, so any test can ``import certs``.
Certificates are ECDSA P-256 (cheap handshakes), valid from a day ago for a year, with the
host name as CN and DNS subjectAltName. Each (host, variant) pair is made once per process;
a different ``variant`` gives a different key and certificate for the same host.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from geminibot.gemini.certs import make_certificate


@dataclass(frozen=True)
class CertPair:
    host: str
    cert_pem: bytes
    key_pem: bytes
    der: bytes

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the DER certificate, colon-separated upper-case hex."""
        return hashlib.sha256(self.der).digest().hex(":").upper()

    def write(self, folder: Path) -> tuple[Path, Path]:
        """Write ``HOST.crt`` and ``HOST.key`` into ``folder``; return their paths."""
        cert_path, key_path = folder / f"{self.host}.crt", folder / f"{self.host}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path

    def server_context(self) -> ssl.SSLContext:
        """A server-side SSLContext (TLS 1.2+) presenting this certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        with tempfile.TemporaryDirectory() as tmp:  # the ssl module loads keys from files
            cert_path, key_path = self.write(Path(tmp))
            context.load_cert_chain(cert_path, key_path)
        return context


@functools.cache
def cert_pair(host: str = "localhost", variant: int = 0) -> CertPair:
    """A self-signed certificate and key for ``host`` (cached per host and variant)."""
    del variant  # only part of the cache key
    cert_pem, key_pem = make_certificate(host, dt.datetime.now(dt.UTC))
    der = x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER)
    return CertPair(host=host, cert_pem=cert_pem, key_pem=key_pem, der=der)
