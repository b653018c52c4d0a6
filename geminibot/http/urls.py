"""http(s) URLs: parsing and normalisation, the same rules as Gemini URLs (no I/O).

A :class:`WebURL` is normalised exactly as :mod:`geminibot.gemini.urls` normalises a Gemini
URL (host lower-case and punycode, percent-encoding normalised, dot segments removed, an
empty path becomes ``/``, the fragment dropped), with the scheme's default port (80 or 443)
left out. Userinfo is refused: a bot has no business sending credentials.
"""

from __future__ import annotations

from dataclasses import dataclass

from geminibot.gemini.errors import InvalidURL
from geminibot.gemini.urls import (
    _PATH_SAFE,
    _QUERY_SAFE,
    _REFERENCE,
    _normalise_escapes,
    _parse_authority,
    remove_dot_segments,
)
from geminibot.http.errors import InvalidWebURL

#: The schemes this package fetches, with their default ports.
DEFAULT_PORTS = {"http": 80, "https": 443}
_NO_PORT = 1965  # what the Gemini authority parser returns when no port is written


@dataclass(frozen=True, slots=True)
class WebURL:
    """A normalised absolute http(s) URL. Build one with :func:`parse_web_url`."""

    scheme: str
    host: str
    port: int
    path: str
    query: str | None

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        """``scheme://authority``: the unit of politeness and of policy files."""
        return f"{self.scheme}://{self.authority}"

    @property
    def path_query(self) -> str:
        return self.path if self.query is None else f"{self.path}?{self.query}"

    def __str__(self) -> str:
        return f"{self.origin}{self.path_query}"


def is_web_url(text: str) -> bool:
    scheme = text.partition(":")[0].lower()
    return scheme in DEFAULT_PORTS


def parse_web_url(text: str) -> WebURL:
    """Parse and normalise an absolute ``http://`` or ``https://`` URL.

    Raises :class:`~geminibot.http.errors.InvalidWebURL` naming the fault."""
    match = _REFERENCE.fullmatch(text)
    assert match is not None  # the pattern matches every string
    scheme, authority, path, query, _fragment = match.groups()
    if scheme is None:
        raise InvalidWebURL(f"not an absolute URL (no scheme): {text!r}")
    scheme = scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidWebURL(f"not an http:// or https:// URL: {text!r}")
    if not authority:
        raise InvalidWebURL(f"URL has no host: {text!r}")
    if "@" in authority:
        raise InvalidWebURL(f"URL has userinfo (user@host), which a bot never sends: {text!r}")
    try:
        host, port = _parse_authority(authority)
    except InvalidURL as exc:
        raise InvalidWebURL(str(exc)) from None
    if port == _NO_PORT and not authority.endswith(f":{_NO_PORT}"):
        port = DEFAULT_PORTS[scheme]
    path = remove_dot_segments(_normalise_escapes(path, _PATH_SAFE)) or "/"
    if query is not None:
        query = _normalise_escapes(query, _QUERY_SAFE)
    return WebURL(scheme, host, port, path, query)
