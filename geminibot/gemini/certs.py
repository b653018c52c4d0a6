"""Self-signed certificates, one per served host name, made on first start and then reused.

Key type: ECDSA on P-256 (every TLS 1.2/1.3 stack and Gemini client accepts it; the handshake
signature is much cheaper than RSA's). Validity: ``CERT_VALIDITY_DAYS`` from one day before
creation (the day of slack covers clocks that are a little behind). The certificate carries
the host name as its subject CN and as a DNS subjectAltName; the fallback certificate (for
clients that send no or an unknown SNI name) is for ``localhost`` with the loopback addresses.

Files in the certificate folder: ``HOST.crt`` (PEM certificate) and ``HOST.key`` (PEM PKCS#8
private key, mode 0600). A pair that exists, parses, matches the host and is still valid is
reused, so TOFU clients keep their pins across restarts; anything else is replaced.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CERT_VALIDITY_DAYS = 3650
"""How long a new certificate is valid (ten years: test capsules should not expire under a pin)."""

RENEW_BEFORE_DAYS = 30
"""A certificate that expires within this many days is replaced on start."""

FALLBACK_HOST = "localhost"
"""Name of the certificate offered when the client's SNI name is missing or not served."""


@dataclass(frozen=True, slots=True)
class CertInfo:
    """A host's certificate and key files, with the facts about it a listing shows."""

    host: str
    cert_path: Path
    key_path: Path
    sha256: str
    not_before: dt.datetime
    not_after: dt.datetime
    key_type: str

    def as_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "cert": str(self.cert_path),
            "key": str(self.key_path),
            "sha256": self.sha256,
            "not_before": self.not_before.isoformat(),
            "not_after": self.not_after.isoformat(),
            "key_type": self.key_type,
        }


def cert_paths(cert_dir: Path, host: str) -> tuple[Path, Path]:
    return cert_dir / f"{host}.crt", cert_dir / f"{host}.key"


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the DER certificate as colon-separated upper-case hex (as openssl prints it)."""
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def make_certificate(host: str, now: dt.datetime) -> tuple[bytes, bytes]:
    """A new self-signed certificate for ``host``: (certificate PEM, private key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    alt: list[x509.GeneralName] = [x509.DNSName(host)]
    if host == FALLBACK_HOST:
        alt += [
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=CERT_VALIDITY_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def load_info(cert_dir: Path, host: str) -> CertInfo | None:
    """The stored certificate for ``host``, or None if missing or unreadable."""
    cert_path, key_path = cert_paths(cert_dir, host)
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ):
        return None
    key_type = f"ECDSA {key.curve.name}" if isinstance(key, ec.EllipticCurvePrivateKey) else "other"
    return CertInfo(
        host=host,
        cert_path=cert_path,
        key_path=key_path,
        sha256=fingerprint(cert),
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        key_type=key_type,
    )


def _usable(info: CertInfo | None, host: str, now: dt.datetime) -> bool:
    if info is None:
        return False
    try:
        cert = x509.load_pem_x509_certificate(info.cert_path.read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    if host not in san.get_values_for_type(x509.DNSName):
        return False
    return info.not_after - now > dt.timedelta(days=RENEW_BEFORE_DAYS)


def ensure_certificate(cert_dir: Path, host: str, now: dt.datetime | None = None) -> CertInfo:
    """Reuse the stored certificate for ``host`` if usable, else make and store a new one."""
    now = now or dt.datetime.now(dt.UTC)
    info = load_info(cert_dir, host)
    if _usable(info, host, now):
        assert info is not None
        return info
    cert_dir.mkdir(parents=True, exist_ok=True)
    cert_pem, key_pem = make_certificate(host, now)
    cert_path, key_path = cert_paths(cert_dir, host)
    _write_private(key_path, key_pem)
    cert_path.write_bytes(cert_pem)
    made = load_info(cert_dir, host)
    assert made is not None
    return made


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".key.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def list_certificates(cert_dir: Path) -> list[CertInfo]:
    """Every readable certificate pair in ``cert_dir``, sorted by host name."""
    if not cert_dir.is_dir():
        return []
    found = []
    for crt in sorted(cert_dir.glob("*.crt")):
        info = load_info(cert_dir, crt.stem)
        if info is not None:
            found.append(info)
    return found
