"""Which protocol a crawl URL speaks, and the per-protocol answers the crawler needs (pure).

The crawler handles ``gemini://`` and ``http(s)://`` URLs side by side. Its unit of
politeness, policy and bookkeeping is the *host key*: ``host`` (or ``host:port``) for
Gemini, as before, and the origin ``scheme://host[:port]`` for the web, so the Gemini and
web sides of one host name keep their own policy files and their own pace.
"""

from __future__ import annotations

from typing import Literal

from geminibot.gemini.errors import UnsupportedScheme
from geminibot.gemini.urls import SCHEME, GeminiURL, parse_url
from geminibot.http.urls import DEFAULT_PORTS, WebURL, parse_web_url

Protocol = Literal["gemini", "http"]
#: The protocols a crawl may be told to follow (``--follow``).
PROTOCOLS: tuple[Protocol, ...] = ("gemini", "http")


def protocol_of(url: str) -> Protocol:
    """By the URL's scheme; raises :class:`UnsupportedScheme` (a ValueError) for others."""
    scheme = url.partition(":")[0].lower()
    if scheme == SCHEME:
        return "gemini"
    if scheme in DEFAULT_PORTS:
        return "http"
    raise UnsupportedScheme(f"not a gemini:// or http(s):// URL: {url!r}", scheme)


def parse_any(url: str) -> GeminiURL | WebURL:
    """The normalised URL; raises a ValueError (InvalidURL or InvalidWebURL)."""
    return parse_url(url) if protocol_of(url) == "gemini" else parse_web_url(url)


def normalise(url: str) -> str:
    return str(parse_any(url))


def host_key(url: str) -> str:
    """``host[:port]`` for Gemini, ``scheme://host[:port]`` for the web (see module doc)."""
    parsed = parse_any(url)
    return parsed.origin if isinstance(parsed, WebURL) else parsed.authority


def host_name(key: str) -> str:
    """The ``host[:port]`` part of a host key (what ``--allow-host`` patterns also match)."""
    return key.partition("://")[2] or key


def host_protocol(key: str) -> Protocol:
    return "http" if "://" in key else "gemini"


def host_url(key: str, path: str = "/") -> str:
    """An absolute URL on the host of ``key``."""
    return f"{key}{path}" if "://" in key else f"gemini://{key}{path}"
