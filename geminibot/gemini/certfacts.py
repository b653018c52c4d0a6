"""The facts a census keeps about a server's certificate (pure, given a trust store).

:func:`certificate_facts` reads one DER certificate: its SHA-256 and that of its public key
(SubjectPublicKeyInfo), subject, subjectAltNames, issuer, whether it is self-signed or
issued by a certificate authority of the :class:`TrustStore`, key type and size, validity
dates, and whether its names cover the host it was served for. A certificate that cannot
be parsed still gets its SHA-256 and ``parsed=False``.

Only the server's own certificate is read (Python 3.11's ``ssl`` module gives no public
access to the intermediates a server sends): a certificate counts as issued by a known CA
when a certificate of the trust store with its issuer's name signed it directly. One issued
by an intermediate CA that the trust store does not hold counts as "issued by an unknown
CA", its issuer named.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import ssl
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
from cryptography.utils import CryptographyDeprecationWarning

#: How a certificate's issuer stands: it signed itself, a CA of the trust store signed it,
#: or another issuer (not known to the trust store) did.
SELF_SIGNED = "self-signed"
KNOWN_CA = "known CA"
UNKNOWN_CA = "unknown CA"
#: Most characters kept of a subject, issuer or the joined subjectAltNames (a certificate
#: is the server's to fill: a bound on what one row keeps).
MAX_NAME_CHARS = 1_000
#: Most subjectAltNames read of one certificate, and most characters kept of each (a DNS
#: name has at most 253).
MAX_SANS = 100
MAX_SAN_CHARS = 255


def sha256_fingerprint(data: bytes) -> str:
    """SHA-256 of ``data`` as colon-separated upper-case hex (as openssl and TOFU pins print
    a certificate's)."""
    return hashlib.sha256(data).digest().hex(":").upper()


class TrustStore:
    """Certificate authorities, by subject: the system's bundle and any PEM files given."""

    def __init__(self, certificates: Iterable[x509.Certificate] = ()) -> None:
        self._by_subject: dict[bytes, list[x509.Certificate]] = {}
        for cert in certificates:
            self._by_subject.setdefault(cert.subject.public_bytes(), []).append(cert)

    @classmethod
    def load(cls, extra: Iterable[Path] = (), system: bool = True) -> TrustStore:
        """The system's CA bundle (where OpenSSL looks by default, if it is a file) and the
        PEM files ``extra`` (raises OSError or ValueError if one cannot be read)."""
        found: list[x509.Certificate] = []
        if system:
            default = ssl.get_default_verify_paths()
            for name in (default.cafile, default.openssl_cafile):
                path = Path(name) if name else None
                if path is not None and path.is_file():
                    with contextlib.suppress(OSError, ValueError), warnings.catch_warnings():
                        # a system bundle may hold old roots that cryptography frowns upon
                        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
                        found += x509.load_pem_x509_certificates(path.read_bytes())
                    break
        for path in extra:
            found += x509.load_pem_x509_certificates(Path(path).read_bytes())
        return cls(found)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_subject.values())

    def issuer_of(self, cert: x509.Certificate) -> x509.Certificate | None:
        """The CA of the store that signed ``cert`` directly, if any."""
        for ca in self._by_subject.get(cert.issuer.public_bytes(), ()):
            try:
                cert.verify_directly_issued_by(ca)
            except (InvalidSignature, ValueError, TypeError):
                continue
            return ca
        return None


@dataclass(frozen=True, slots=True)
class CertFacts:
    """One certificate as a census counts it (times in Unix seconds)."""

    sha256: str
    spki_sha256: str = ""
    subject: str = ""
    issuer: str = ""
    sans: tuple[str, ...] = ()
    trust: str = UNKNOWN_CA
    key_type: str = ""
    key_bits: int | None = None
    not_before: float | None = None
    not_after: float | None = None
    name_matches: bool = False
    parsed: bool = True


def _bounded(text: str) -> str:
    return text[:MAX_NAME_CHARS]


def _key(cert: x509.Certificate) -> tuple[str, int | None]:
    key = cert.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA", key.key_size
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"EC {key.curve.name}", key.key_size
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "Ed25519", 256
    if isinstance(key, ed448.Ed448PublicKey):
        return "Ed448", 456
    if isinstance(key, dsa.DSAPublicKey):
        return "DSA", key.key_size
    return "other", None


def _sans(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (x509.ExtensionNotFound, ValueError):
        return ()
    names: list[str] = [str(n) for n in ext.get_values_for_type(x509.DNSName)]
    names += [str(a) for a in ext.get_values_for_type(x509.IPAddress)]
    return tuple(name[:MAX_SAN_CHARS] for name in names[:MAX_SANS])


def _common_names(cert: x509.Certificate) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)]


def name_matches(host: str, names: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``names`` (DNS names, ``*.`` wildcards covering one
    label, IP addresses), case-insensitively (RFC 6125)."""
    host = host.lower().rstrip(".")
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(
            host.strip("[]")
        )
    except ValueError:
        ip = None
    for given in names:
        name = given.lower().rstrip(".")
        if ip is not None:
            try:
                if ipaddress.ip_address(name) == ip:
                    return True
            except ValueError:
                pass
            continue
        if name == host:
            return True
        if name.startswith("*.") and "." in host and host.split(".", 1)[1] == name[2:]:
            return True
    return False


def _signed_by_itself(cert: x509.Certificate) -> bool:
    if cert.issuer != cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(cert)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def certificate_facts(der: bytes, host: str, trust: TrustStore) -> CertFacts:
    """The facts of the DER certificate ``der`` served for ``host``; never raises."""
    digest = sha256_fingerprint(der)
    try:
        cert = x509.load_der_x509_certificate(der)
        spki = cert.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        key_type, key_bits = _key(cert)
        sans = _sans(cert)
        if _signed_by_itself(cert):
            standing = SELF_SIGNED
        elif trust.issuer_of(cert) is not None:
            standing = KNOWN_CA
        else:
            standing = UNKNOWN_CA
        return CertFacts(
            sha256=digest,
            spki_sha256=sha256_fingerprint(spki),
            subject=_bounded(cert.subject.rfc4514_string()),
            issuer=_bounded(cert.issuer.rfc4514_string()),
            sans=sans,
            trust=standing,
            key_type=key_type,
            key_bits=key_bits,
            not_before=cert.not_valid_before_utc.timestamp(),
            not_after=cert.not_valid_after_utc.timestamp(),
            name_matches=name_matches(host, sans or _common_names(cert)),
        )
    except Exception:  # a stranger's bytes: whatever fails, the hash is kept
        return CertFacts(sha256=digest, parsed=False)
