"""The fetch-error tree shared by the Gemini client, the web client and the crawler.

It says whose fault a failure is, in the manner of h11 and httpx:

- :class:`geminibot.urls.InvalidURL` (a ``ValueError``, outside this tree, as httpx's
  ``InvalidURL`` is): the URL we were *given* is bad.
- :class:`FetchError`: the fetch itself failed. Its branches:

  - :class:`RemoteProtocolError`: the server broke its protocol (Gemini's header faults
    are subclasses in :mod:`geminibot.gemini.errors`), including a redirect to a URL
    that cannot be requested (:class:`InvalidRedirect`);
  - :class:`LimitExceeded`: the server went past one of our limits
    (:class:`BodyTooLarge`, :class:`TooManyRedirects`);
  - :class:`RedirectRefused`: a redirect we will not follow (:class:`RedirectLoop`,
    :class:`SchemeSwitchRefused`, :class:`OffSiteRedirect`);
  - :class:`TransportError`: the network or TLS failed (:class:`ConnectionFailed`,
    :class:`TLSFailure`) or a time limit expired (:class:`FetchTimeout` and its four
    kinds, one per time limit of :class:`geminibot.net.limits.Limits`);
  - Gemini's trust-on-first-use refusal, :class:`geminibot.gemini.errors.CertificateChanged`.

Nothing but :class:`FetchError` and :class:`~geminibot.urls.InvalidURL` leaves a client's
``fetch`` (and trio's own ``Cancelled`` when the caller cancels).
"""

from __future__ import annotations


class FetchError(Exception):
    """Base of every failure of a fetch, whatever the protocol."""


# --- the server's fault ------------------------------------------------------------------


class RemoteProtocolError(FetchError):
    """The server's response breaks its protocol."""


class InvalidRedirect(RemoteProtocolError):
    """A redirect leads to a URL that cannot be requested (unparseable, too long...)."""


# --- our limits and refusals -------------------------------------------------------------


class LimitExceeded(FetchError):
    """The response went past one of the client's limits."""


class BodyTooLarge(LimitExceeded):
    """The body grew past the maximum body size; reading stopped there."""


class TooManyRedirects(LimitExceeded):
    """More redirects than the hop limit."""


class RedirectRefused(FetchError):
    """A redirect the client will not follow."""


class RedirectLoop(RedirectRefused):
    """A redirect leads back to a URL already visited in this fetch."""


class SchemeSwitchRefused(RedirectRefused):
    """A redirect leads to another protocol and switching was not allowed."""


class OffSiteRedirect(RedirectRefused):
    """A redirect leads to another host where only same-host redirects are followed."""


# --- transport ---------------------------------------------------------------------------


class TransportError(FetchError):
    """The connection could not be made or broke."""


class ConnectionFailed(TransportError):
    """Name resolution or the TCP connection failed, or it broke mid-response."""


class TLSFailure(TransportError):
    """The TLS handshake failed or the certificate was refused."""


class FetchTimeout(TransportError):
    """A time limit expired."""


class ConnectTimeout(FetchTimeout):
    """TCP connect plus TLS handshake took longer than the connect timeout."""


class HeaderTimeout(FetchTimeout):
    """The response header did not arrive within the header timeout."""


class IdleTimeout(FetchTimeout):
    """The body stalled: no bytes for longer than the idle timeout."""


class DeadlineExceeded(FetchTimeout):
    """The whole fetch, redirects included, took longer than the total deadline."""
