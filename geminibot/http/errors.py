"""Every exception ``geminibot.http`` raises; all derive from :class:`WebError`.

The same shape as :mod:`geminibot.gemini.errors`, so a caller handles both protocols alike:

- :class:`InvalidWebURL` (also a ``ValueError``): the URL we were *given* is not a usable
  ``http://`` or ``https://`` URL.
- :class:`RemoteProtocolError`: the server broke HTTP (a malformed status line or header).
- :class:`LimitExceeded`: the server went past one of our limits (:class:`BodyTooLarge`,
  :class:`TooManyRedirects`).
- :class:`RedirectRefused`: a redirect we will not follow (:class:`RedirectLoop`,
  :class:`SchemeSwitchRefused`: to a scheme other than http/https).
- :class:`TransportError`: the network or TLS failed (:class:`ConnectionFailed`,
  :class:`TLSFailure`) or a time limit expired (:class:`WebTimeout` and its four kinds,
  one per limit of :class:`geminibot.gemini.client.Limits`).

Nothing else escapes :meth:`geminibot.http.client.WebClient.fetch` (and trio's own
``Cancelled`` when the caller cancels).
"""

from __future__ import annotations


class WebError(Exception):
    """Base of every error raised by ``geminibot.http``."""


class InvalidWebURL(WebError, ValueError):
    """Not an absolute http:// or https:// URL with a valid host and port, or it has userinfo."""


class RemoteProtocolError(WebError):
    """The server's response breaks HTTP."""


class LimitExceeded(WebError):
    """The response went past one of the client's limits."""


class BodyTooLarge(LimitExceeded):
    """The body (declared or received, after decompression) grew past the size limit."""


class TooManyRedirects(LimitExceeded):
    """More redirects than the hop limit."""


class RedirectRefused(WebError):
    """A redirect the client will not follow."""


class RedirectLoop(RedirectRefused):
    """A redirect leads back to a URL already visited in this fetch."""


class SchemeSwitchRefused(RedirectRefused):
    """A redirect leads to a scheme other than http or https (gemini:, ftp:, data:...)."""


class TransportError(WebError):
    """The connection could not be made or broke."""


class ConnectionFailed(TransportError):
    """Name resolution or the TCP connection failed, or it broke mid-response."""


class TLSFailure(TransportError):
    """The TLS handshake failed or the certificate was refused."""


class WebTimeout(TransportError):
    """A time limit expired."""


class ConnectTimeout(WebTimeout):
    """TCP connect plus TLS handshake took longer than the connect timeout."""


class HeaderTimeout(WebTimeout):
    """The status line and headers did not arrive within the header timeout."""


class IdleTimeout(WebTimeout):
    """The body stalled: no bytes for longer than the idle timeout."""


class DeadlineExceeded(WebTimeout):
    """The whole fetch, redirects included, took longer than the total deadline."""
