"""Which protocol a crawl URL speaks, and the per-protocol answers the crawler needs (pure).

The crawler handles ``gemini://`` and ``http(s)://`` URLs side by side. Its unit of
politeness, policy and bookkeeping is the *host key*: ``host`` (or ``host:port``) for
Gemini, as before, and the origin ``scheme://host[:port]`` for the web, so the Gemini and
web sides of one host name keep their own policy files and their own pace.
"""

from __future__ import annotations

from geminibot.urls import URL, Scheme, parse_url, scheme_of

#: The protocol of a URL by its scheme (raises UnsupportedScheme, a ValueError, for others).
protocol_of = scheme_of


def parse_any(url: str) -> URL:
    """The normalised URL; raises an :class:`~geminibot.urls.InvalidURL` (a ValueError)."""
    return parse_url(url)


def normalise(url: str) -> str:
    return str(parse_any(url))


def host_key(url: str) -> str:
    """``host[:port]`` for Gemini, ``scheme://host[:port]`` for the web (see module doc)."""
    return host_of(parse_any(url))


def host_of(parsed: URL) -> str:
    """:func:`host_key` of a URL already parsed."""
    return parsed.origin if parsed.protocol == "http" else parsed.authority


def host_name(key: str) -> str:
    """The ``host[:port]`` part of a host key (what ``--allow-host`` patterns also match)."""
    return key.partition("://")[2] or key


def host_protocol(key: str) -> Scheme:
    return "http" if "://" in key else "gemini"


def host_url(key: str, path: str = "/") -> str:
    """An absolute URL on the host of ``key``."""
    return f"{key}{path}" if "://" in key else f"gemini://{key}{path}"
