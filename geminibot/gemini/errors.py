"""Every exception ``geminibot.gemini`` raises; all derive from :class:`GeminiError`.

The tree says whose fault a failure is, in the manner of h11:

- :class:`InvalidURL` (also a ``ValueError``): the URL or request line we were *given* is
  bad. A server maps these to ``59 BAD REQUEST``, except :class:`UnsupportedScheme`,
  which it maps to ``53 PROXY REQUEST REFUSED``.
- :class:`RemoteProtocolError`: the server broke the protocol (header, status, meta).
- :class:`LimitExceeded`: the server may be within the protocol but went past one of
  our limits (body size, redirect hops).
- :class:`RedirectRefused`: a redirect we will not follow (loop, scheme switch).
- :class:`TransportError`: the network or TLS failed, or a timeout expired.
- :class:`CertificateChanged`: trust-on-first-use refused a changed certificate
  (strict mode only).

Nothing else escapes :func:`geminibot.gemini.client.GeminiClient.fetch`.
"""

from __future__ import annotations


class GeminiError(Exception):
    """Base of every error raised by ``geminibot.gemini``."""


# --- the URL or request line given to us -------------------------------------------------


class InvalidURL(GeminiError, ValueError):
    """A URL or request line that is not a valid Gemini request."""


class NotAbsoluteURL(InvalidURL):
    """The URL has no scheme (a relative reference where an absolute URL is needed)."""


class UnsupportedScheme(InvalidURL):
    """The URL's scheme is not ``gemini``."""

    def __init__(self, message: str, scheme: str) -> None:
        super().__init__(message)
        self.scheme = scheme


class UserinfoInURL(InvalidURL):
    """The URL carries ``user@`` information, which Gemini forbids."""


class FragmentInRequest(InvalidURL):
    """A request line carries a ``#fragment``, which Gemini forbids."""


class MissingHost(InvalidURL):
    """The URL has no host."""


class InvalidHost(InvalidURL):
    """The host is not a valid name (IDNA), IPv4 or IPv6 address."""


class InvalidPort(InvalidURL):
    """The port is not a number from 1 to 65535."""


class RequestTooLong(InvalidURL):
    """The request URL is longer than 1024 bytes once UTF-8 encoded."""


class RequestNotUTF8(InvalidURL):
    """The request line is not valid UTF-8."""


class RequestHasBOM(InvalidURL):
    """The request line starts with a UTF-8 byte order mark."""


class MalformedRequestLine(InvalidURL):
    """The request line is empty or holds control characters (stray CR, LF, NUL...)."""


# --- the server's fault ------------------------------------------------------------------


class RemoteProtocolError(GeminiError):
    """The server's response breaks the Gemini protocol."""


class EmptyResponse(RemoteProtocolError):
    """The server closed the connection without sending a header."""


class HeaderMissingCRLF(RemoteProtocolError):
    """The header line does not end with CR LF (bare LF, or the stream ended first)."""


class HeaderTooLong(RemoteProtocolError):
    """The meta is longer than 1024 bytes."""


class InvalidStatus(RemoteProtocolError):
    """The status is not two ASCII digits followed by a space or the line end."""


class UnknownStatus(RemoteProtocolError):
    """The status is two digits but its first digit names no status family (1-6)."""


class HeaderNotUTF8(RemoteProtocolError):
    """The meta is not valid UTF-8."""


class InvalidMeta(RemoteProtocolError):
    """The meta is unusable: a bad MIME type, an empty redirect target, control characters."""


# --- our limits and refusals -------------------------------------------------------------


class LimitExceeded(GeminiError):
    """The response went past one of the client's limits."""


class BodyTooLarge(LimitExceeded):
    """The body grew past the maximum body size; reading stopped there."""


class TooManyRedirects(LimitExceeded):
    """More redirects than the hop limit."""


class RedirectRefused(GeminiError):
    """A redirect the client will not follow."""


class RedirectLoop(RedirectRefused):
    """A redirect leads back to a URL already visited in this fetch."""


class SchemeSwitchRefused(RedirectRefused):
    """A redirect leads to another scheme and switching was not allowed."""


# --- transport ---------------------------------------------------------------------------


class TransportError(GeminiError):
    """The connection could not be made or broke."""


class ConnectionFailed(TransportError):
    """Name resolution or the TCP connection failed, or it broke before the header."""


class TLSFailure(TransportError):
    """The TLS handshake failed (no common version or cipher, not TLS at all...)."""


class GeminiTimeout(TransportError):
    """A time limit expired."""


class ConnectTimeout(GeminiTimeout):
    """TCP connect plus TLS handshake took longer than the connect timeout."""


class HeaderTimeout(GeminiTimeout):
    """The response header did not arrive within the header timeout."""


class IdleTimeout(GeminiTimeout):
    """The body stalled: no bytes for longer than the idle timeout."""


class DeadlineExceeded(GeminiTimeout):
    """The whole fetch, redirects included, took longer than the total deadline."""


# --- trust on first use ------------------------------------------------------------------


class CertificateChanged(GeminiError):
    """A host's certificate differs from the pinned one and strict TOFU refuses it."""

    def __init__(self, message: str, *, host: str, port: int, pinned: str, seen: str) -> None:
        super().__init__(message)
        self.host = host
        self.port = port
        self.pinned = pinned
        self.seen = seen
