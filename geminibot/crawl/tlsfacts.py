"""What the crawl keeps of each host's TLS and certificate, at the connections it makes
anyway (:class:`TLSRecorder`).

Each response's connection shows its TLS version, cipher suite and certificate
(:class:`~geminibot.gemini.client.TLSSeen`). The recorder remembers the last of these per
host; the certificate's facts (:func:`~geminibot.gemini.certfacts.certificate_facts`:
parsing it, hashing its key, checking its signature against the trust store) are worked
out only when its SHA-256, which the client computes anyway for trust on first use, or
the version or cipher, differs from the last seen for the host: once per host per run
while nothing changes. The store keeps a row per distinct set (``tls_history``); seeing the
same set again moves its ``last_seen``, written at most once per
:data:`LAST_SEEN_EVERY` seconds per host (a write per page would cost the crawl).

The trust store (the system's CA bundle and any ``--trust-ca`` files) is read on the first
certificate to judge. At most :data:`MAX_HOSTS_REMEMBERED` hosts are remembered (least
recently seen forgotten first): a forgotten host's facts are worked out again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from geminibot.gemini.certfacts import TrustStore, certificate_facts
from geminibot.gemini.client import TLSSeen
from geminibot.store.crawlstore import CrawlStore
from geminibot.store.records import TLSRecord
from geminibot.urls import host_url, parse_url

#: Seconds between two writes of a host's unchanged facts (its ``last_seen``).
LAST_SEEN_EVERY = 3_600.0
#: Hosts whose last facts are remembered (a few hundred bytes each).
MAX_HOSTS_REMEMBERED = 50_000


class TLSRecorder:
    """Keeps each host's TLS and certificate facts in ``store`` as history."""

    def __init__(
        self,
        store: CrawlStore,
        trust: Callable[[], TrustStore] | None = None,
    ) -> None:
        self.store = store
        self._load_trust = trust if trust is not None else TrustStore.load
        self._trust: TrustStore | None = None
        self._last: OrderedDict[str, TLSRecord] = OrderedDict()

    @classmethod
    def trusting(cls, store: CrawlStore, ca_files: tuple[Path, ...]) -> TLSRecorder:
        """A recorder whose trust store is the system's CA bundle and ``ca_files``."""
        return cls(store, lambda: TrustStore.load(ca_files))

    def seen(self, host: str, tls: TLSSeen, now: float) -> None:
        """``host``'s connection at ``now`` showed ``tls``."""
        last = self._last.get(host)
        if (
            last is not None
            and last.sha256 == tls.fingerprint
            and last.tls_version == tls.version
            and last.cipher == tls.cipher
        ):
            self._last.move_to_end(host)
            if now - last.seen < LAST_SEEN_EVERY:
                return
            record = replace(last, seen=now)
        elif last is not None and last.sha256 == tls.fingerprint:
            record = replace(last, tls_version=tls.version, cipher=tls.cipher, seen=now)
        else:
            record = self._record(host, tls, now)
        self._last[host] = record
        self._last.move_to_end(host)
        while len(self._last) > MAX_HOSTS_REMEMBERED:
            self._last.popitem(last=False)
        self.store.saw_tls(record)

    def _record(self, host: str, tls: TLSSeen, now: float) -> TLSRecord:
        if self._trust is None:
            try:
                self._trust = self._load_trust()
            except (OSError, ValueError):  # a --trust-ca file gone or changed since the start
                self._trust = TrustStore.load()
        facts = certificate_facts(tls.der, parse_url(host_url(host)).host, self._trust)
        return TLSRecord(
            host=host,
            tls_version=tls.version,
            cipher=tls.cipher,
            sha256=tls.fingerprint,
            spki_sha256=facts.spki_sha256,
            subject=facts.subject,
            issuer=facts.issuer,
            sans=facts.sans,
            trust=facts.trust,
            key_type=facts.key_type,
            key_bits=facts.key_bits,
            not_before=facts.not_before,
            not_after=facts.not_after,
            name_matches=facts.name_matches,
            parsed=facts.parsed,
            seen=now,
        )
