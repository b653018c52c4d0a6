"""From a URL (or a bare path) to the string that policy rules are matched against.

The extraction follows Google's reference parser (``GetPathParamsQuery``): scheme and
authority are dropped, path, params and query are kept, the fragment is dropped, and the
result always starts with ``/``. The result is then normalised by the one routine the
crawler uses for the URLs it fetches (:func:`geminibot.urls.normalise_path_query`), so
that every tool decides a URL as the crawl does: escapes of unreserved characters are
decoded (``%7E`` is ``~``, as RFC 9309 section 2.2.2 asks), other escapes get upper-case
hex digits (``%2F`` stays ``%2F``), characters that may not appear in a URL (non-ASCII,
space...) are percent-encoded as UTF-8, and dot segments are removed. Patterns from
policy files get the same escape normalisation (:func:`normalise_pattern`), so the two
sides are compared like with like. docs/policy.md lists where this differs from Google's
parser, which compares the URL as its caller gives it.
"""

from __future__ import annotations

import re

from geminibot.urls import normalise_escapes, normalise_path_query


def normalise_pattern(raw: bytes, keep: str = "") -> str:
    """Normalise a rule pattern as paths are normalised (:func:`normalise_escapes`).

    Works on raw bytes: an octet with the high bit set becomes ``%XX`` octet for octet
    (as Google's ``MaybeEscapePattern`` does), so that a file in another encoding is
    still matched octet for octet. ``keep``: ASCII characters a pattern language needs
    as they are (a glob's ``[`` and ``]``). The result is pure ASCII. Dot segments are
    not removed: a pattern is not a URL.
    """
    if raw.isascii():
        text = raw.decode("ascii")
    else:
        text = "".join(f"%{b:02X}" if b & 0x80 else chr(b) for b in raw)
    return normalise_escapes(text, keep)


_PATH_START = re.compile(r"[/?;]")
#: The scheme and authority of the common absolute URL, which :func:`path_of` drops.
SCHEME_AND_AUTHORITY = r"[A-Za-z0-9]+://[^/?;#]*"
#: scheme://authority then the path (up to a fragment).
_ABSOLUTE = re.compile(SCHEME_AND_AUTHORITY + "([^#]*)")


def path_of(url: str) -> str:
    """The normalised path, params and query of ``url``; always starts with ``/``.

    ``url`` may be absolute (``gemini://host/p?q``, ``https://host/p``), scheme-relative
    (``//host/p``) or a bare path (``/p?q``). Something with no path at all gives ``/``.
    """
    absolute = _ABSOLUTE.match(url)
    if absolute is not None:
        path = absolute.group(1)
    elif url[:1] == "/" and url[1:2] != "/":
        hash_pos = url.find("#")
        path = url if hash_pos == -1 else url[:hash_pos]
    else:
        path = _general_path(url)
    return normalise_path_query(path)


def _general_path(url: str) -> str:
    """Google's ``GetPathParamsQuery`` for the forms the fast paths above do not take."""
    found = _PATH_START.search(url, _authority_start(url))
    if found is None:
        return "/"
    hash_pos = url.find("#")
    if hash_pos == -1:
        return url[found.start() :]
    if hash_pos < found.start():
        return "/"
    return url[found.start() : hash_pos]


def _authority_start(url: str) -> int:
    """Where to look for the path, as Google's ``GetPathParamsQuery`` decides it."""
    search_start = 2 if url.startswith("//") else 0
    early = _PATH_START.search(url, search_start)
    protocol_end = url.find("://", search_start)
    if protocol_end == -1 or (early is not None and early.start() < protocol_end):
        return search_start
    return protocol_end + 3
