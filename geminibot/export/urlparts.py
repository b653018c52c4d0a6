"""A URL's parts as Common Crawl's columnar index names them (pure).

:func:`url_parts` splits a normalised URL into the ``url_*`` columns: its SURT key, the
host name and its last five labels, the name reversed, the protocol, an explicit port,
the path and the query. The registry-suffix columns (``url_host_registry_suffix``,
``url_host_registered_domain`` and their private forms) need the Public Suffix List and
are not given.
"""

from __future__ import annotations

from typing import NamedTuple

from geminibot.urls import DEFAULT_PORTS, URL

#: The last labels of a host name given one column each (``url_host_tld`` ...
#: ``url_host_5th_last_part``).
HOST_PARTS = 5


class UrlParts(NamedTuple):
    """The ``url_*`` columns of one URL (None: the URL has no such part)."""

    surtkey: str
    host_name: str
    labels: tuple[str | None, ...]  # the last label first, HOST_PARTS of them
    host_name_reversed: str | None
    protocol: str
    port: int | None
    path: str
    query: str | None


def surt(url: URL) -> str:
    """The Sort-friendly URI Reordering Transform key of ``url`` as Common Crawl writes it:
    the host's labels reversed and joined by commas (``www.`` dropped; an address kept as
    it is, an IPv6 one in brackets), a non-default port after a colon, ``)``, then the path and query. Like the
    web's keys it leaves the scheme out, so ``gemini://example.org/`` and
    ``https://example.org/`` share ``org,example)/``."""
    host = url.host
    if url.is_ip_literal:
        key = f"[{host}]" if ":" in host else host
    else:
        labels = host.split(".")
        if labels[0] == "www" and len(labels) > 2:
            labels = labels[1:]
        key = ",".join(reversed(labels))
    if url.port != DEFAULT_PORTS[url.scheme]:
        key += f":{url.port}"
    query = "" if url.query is None else "?" + url.query
    return f"{key}){url.path}{query}".lower()


def url_parts(url: URL) -> UrlParts:
    """The Common Crawl ``url_*`` columns of ``url`` (already parsed and normalised)."""
    host = url.host
    if url.is_ip_literal:
        labels: tuple[str | None, ...] = (None,) * HOST_PARTS
        reversed_name = None
    else:
        names = host.split(".")
        labels = tuple(names[-i] if i <= len(names) else None for i in range(1, HOST_PARTS + 1))
        reversed_name = ".".join(reversed(names))
    return UrlParts(
        surt(url),
        host,
        labels,
        reversed_name,
        url.scheme,
        None if url.port == DEFAULT_PORTS[url.scheme] else url.port,
        url.path,
        url.query,
    )
