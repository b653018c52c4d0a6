"""The server's TLS contexts, one per served host, chosen by the name the client sends in
SNI (RFC 6066, section 3) during the handshake (:class:`HostContexts`).

Every host's certificate is checked (or made, :func:`geminibot.gemini.certs.ensure_certificate`)
when the contexts are built; a host's context, which loads its certificate into OpenSSL,
is built when a client first names the host. A client that names no host, or one not
served, gets the ``localhost`` fallback certificate.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from pathlib import Path

from geminibot.gemini.certs import FALLBACK_HOST, CertInfo, ensure_certificate


class HostContexts:
    """The TLS contexts of the hosts served, with certificates in ``cert_dir``, each made
    by ``make`` from its certificate; :attr:`default` is the context a connection starts
    with, whose ``sni_callback`` switches it to the named host's."""

    def __init__(
        self,
        cert_dir: Path,
        hosts: Iterable[str],
        make: Callable[[CertInfo], ssl.SSLContext],
    ) -> None:
        self._make = make
        self._certificates = {host: ensure_certificate(cert_dir, host) for host in hosts}
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._host_of: dict[int, str] = {}
        fallback = ensure_certificate(cert_dir, FALLBACK_HOST)
        self._unknown_name = make(fallback)  # SNI names a host not served
        self.default = make(fallback)  # also used when there is no SNI
        self.default.sni_callback = self._choose_context

    def _choose_context(
        self, sslobj: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext
    ) -> None:
        if server_name is not None:
            sslobj.context = self.context_for(server_name.lower().rstrip("."))

    def context_for(self, name: str) -> ssl.SSLContext:
        """The TLS context of the served host ``name`` (built on its first use), or the
        one for names not served."""
        context = self._contexts.get(name)
        if context is None:
            certificate = self._certificates.get(name)
            if certificate is None:
                return self._unknown_name
            context = self._contexts[name] = self._make(certificate)
            self._host_of[id(context)] = name
        return context

    def host_of(self, context_id: int) -> str | None:
        """The served host whose context has the id ``context_id`` (the one the client
        named in SNI); "" for an unknown name; None for none."""
        if context_id == id(self._unknown_name):
            return ""
        return self._host_of.get(context_id)
