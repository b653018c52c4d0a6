"""Gemini URLs: the ``gemini://`` side of :mod:`geminibot.urls`, and the request line.

A Gemini URL is a :class:`geminibot.urls.URL` of scheme ``gemini`` (default port
:data:`DEFAULT_PORT`). :func:`request_line` is what a client sends; :func:`parse_request`
is the strict form a server uses on a request line.
"""

from __future__ import annotations

import re

from geminibot.gemini.errors import (
    FragmentInRequest,
    MalformedRequestLine,
    RequestHasBOM,
    RequestNotUTF8,
    RequestTooLong,
)
from geminibot.urls import DEFAULT_PORTS, GEMINI_SCHEMES, REFERENCE, URL
from geminibot.urls import parse_url as _parse

SCHEME = "gemini"
DEFAULT_PORT = DEFAULT_PORTS[SCHEME]
#: Longest request URL, in bytes once UTF-8 encoded, CR LF not counted.
MAX_REQUEST_BYTES = 1024
_BOM = b"\xef\xbb\xbf"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_url(text: str) -> URL:
    """Parse and normalise an absolute ``gemini://`` URL; the fragment is dropped.

    Raises a subclass of :class:`~geminibot.urls.InvalidURL` naming the fault."""
    return _parse(text, GEMINI_SCHEMES)


def request_line(url: URL) -> bytes:
    """The request to send: the URL and CR LF. Raises :class:`RequestTooLong`."""
    data = str(url).encode("ascii")  # normalised URLs are pure ASCII
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestTooLong(f"request URL is {len(data)} bytes, the limit is {MAX_REQUEST_BYTES}")
    return data + b"\r\n"


def parse_request(line: bytes) -> URL:
    """Validate a request line as a server receives it and return its normalised URL.

    ``line`` may end with CR LF or not. Checks, each with its own error: at most
    :data:`MAX_REQUEST_BYTES` bytes, no byte order mark, UTF-8, no control characters
    (a space inside the URL is tolerated and percent-encoded, as is non-ASCII),
    absolute, scheme ``gemini`` (:class:`~geminibot.urls.UnsupportedScheme`; a server
    answers 53), a host, no userinfo, no fragment. The returned path is still
    percent-encoded and has no dot segments; decode it only after that (``%2F`` decodes
    to ``/``).
    """
    if line.endswith(b"\r\n"):
        line = line[:-2]
    if len(line) > MAX_REQUEST_BYTES:
        raise RequestTooLong(f"request is {len(line)} bytes, the limit is {MAX_REQUEST_BYTES}")
    if line.startswith(_BOM):
        raise RequestHasBOM("request starts with a UTF-8 byte order mark")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestNotUTF8(f"request is not UTF-8 (byte {exc.start})") from None
    if not text:
        raise MalformedRequestLine("empty request")
    control = _CONTROL.search(text)
    if control is not None:
        raise MalformedRequestLine(
            f"control character {control.group()!r} at position {control.start()} of the request"
        )
    match = REFERENCE.fullmatch(text)
    assert match is not None
    if match.group(5) is not None:
        raise FragmentInRequest("request URL has a fragment")
    return parse_url(text)


def climbs_above_root(url: str) -> bool:
    """True if the path of the absolute URL ``url`` has more ``..`` segments (``%2E`` is a
    dot, as RFC 3986 says) than there are segments above them to remove.

    Normalisation (RFC 3986 5.2.4) would quietly keep such a path at the root
    (``/../../`` is ``/``); the server refuses it instead, as gemini-diagnostics expects
    ("a URL should not be able to escape the root")."""
    match = REFERENCE.fullmatch(url)
    if match is None:
        return False
    depth = 0
    for segment in match.group(3).split("/")[1:]:
        name = segment.replace("%2e", ".").replace("%2E", ".")
        if name == "..":
            if depth == 0:
                return True
            depth -= 1
        elif name != ".":
            depth += 1
    return False
