"""Request line validation (interim: replaced by geminibot.gemini.urls.parse_request).

Gemini requests are one absolute URI and CRLF, at most 1024 bytes of URI, UTF-8, without
userinfo or fragment. Anything else is 59; another scheme is 53.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL_BYTES = 1024
MAX_REQUEST_BYTES = MAX_URL_BYTES + 2
"""The longest request line: the URL and CRLF."""

BOM = b"\xef\xbb\xbf"


class RequestError(ValueError):
    def __init__(self, status: int, meta: str) -> None:
        super().__init__(meta)
        self.status = status
        self.meta = meta


@dataclass(frozen=True, slots=True)
class Request:
    url: str
    host: str
    port: int | None
    path: str
    query: str


def parse_request(line: bytes) -> Request:
    """Validate a request line (with its CRLF). Raises RequestError(status, meta)."""
    if len(line) > MAX_REQUEST_BYTES:
        raise RequestError(59, "Request longer than 1024 bytes")
    if not line.endswith(b"\r\n"):
        raise RequestError(59, "Request must end with CRLF")
    raw = line[:-2]
    if raw.startswith(BOM):
        raise RequestError(59, "Request must not start with a byte order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(59, "Request is not UTF-8") from None
    if not text:
        raise RequestError(59, "Empty request")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in text):
        raise RequestError(59, "Request contains spaces or control characters")
    if "#" in text:
        raise RequestError(59, "Request must not contain a fragment")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise RequestError(59, "Malformed URL") from None
    if not parts.scheme:
        raise RequestError(59, "Request must be an absolute URL")
    if parts.scheme.lower() != "gemini":
        raise RequestError(53, f"This server does not serve {parts.scheme}: URLs")
    if "@" in parts.netloc:
        raise RequestError(59, "Request must not contain userinfo")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise RequestError(59, "Request URL has no host")
    return Request(text, host, port, parts.path, parts.query)
