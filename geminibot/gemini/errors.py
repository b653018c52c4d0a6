"""The errors only Gemini has, each a subclass of the shared tree.

The fetch-error tree itself (limits, redirects, transport, timeouts) is
:mod:`geminibot.net.errors`; bad URLs are :class:`geminibot.urls.InvalidURL`. Gemini adds:

- request-line faults (:class:`~geminibot.urls.InvalidURL` subclasses): a server maps
  these to ``59 BAD REQUEST``, except :class:`~geminibot.urls.UnsupportedScheme`, which
  it maps to ``53 PROXY REQUEST REFUSED``;
- response-header faults (:class:`~geminibot.net.errors.RemoteProtocolError` subclasses);
- :class:`CertificateChanged`: trust-on-first-use refused a changed certificate (strict
  mode only).
"""

from __future__ import annotations

from geminibot.net.errors import FetchError, RemoteProtocolError
from geminibot.urls import InvalidURL

# --- the request line given to us --------------------------------------------------------


class FragmentInRequest(InvalidURL):
    """A request line carries a ``#fragment``, which Gemini forbids."""


class RequestTooLong(InvalidURL):
    """The request URL is longer than 1024 bytes once UTF-8 encoded."""


class RequestNotUTF8(InvalidURL):
    """The request line is not valid UTF-8."""


class RequestHasBOM(InvalidURL):
    """The request line starts with a UTF-8 byte order mark."""


class MalformedRequestLine(InvalidURL):
    """The request line is empty or holds control characters (stray CR, LF, NUL...)."""


# --- the server's fault ------------------------------------------------------------------


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


# --- trust on first use ------------------------------------------------------------------


class CertificateChanged(FetchError):
    """A host's certificate differs from the pinned one and strict TOFU refuses it."""

    def __init__(self, message: str, *, host: str, port: int, pinned: str, seen: str) -> None:
        super().__init__(message)
        self.host = host
        self.port = port
        self.pinned = pinned
        self.seen = seen
