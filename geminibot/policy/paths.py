"""From a URL (or a bare path) to the string that policy rules are matched against.

The extraction follows Google's reference parser (``GetPathParamsQuery``): scheme and
authority are dropped, path, params and query are kept, the fragment is dropped, and the
result always starts with ``/``. On top of that, and unlike Google's parser (which leaves
it to its caller), the result is percent-encoding normalised as RFC 9309 asks: octets
outside ASCII are percent-encoded as UTF-8, and existing escapes get upper-case hex digits.
Patterns from policy files get the same normalisation (:func:`normalise_pattern`), so the
two sides are compared like with like.
"""

from __future__ import annotations

import re

_HEX_ESCAPE = re.compile(r"%([0-9a-fA-F]{2})")
_HEX_ESCAPE_BYTES = re.compile(rb"%[0-9a-fA-F]{2}")


def _upper_escape(match: re.Match[str]) -> str:
    return "%" + match.group(1).upper()


def normalise_pattern(raw: bytes) -> str:
    """Normalise a rule pattern as Google's ``MaybeEscapePattern`` does.

    Octets with the high bit set become ``%XX``; ``%xx`` escapes get upper-case hex.
    Works on raw bytes so that a file in another encoding is still matched octet for
    octet. The result is pure ASCII.
    """
    if raw.isascii():
        text = raw.decode("ascii")
        return _HEX_ESCAPE.sub(_upper_escape, text) if "%" in text else text
    out: list[str] = []
    i = 0
    n = len(raw)
    while i < n:
        b = raw[i]
        if b == 0x25 and _HEX_ESCAPE_BYTES.match(raw, i):
            out.append("%" + raw[i + 1 : i + 3].decode("ascii").upper())
            i += 3
            continue
        out.append(f"%{b:02X}" if b & 0x80 else chr(b))
        i += 1
    return "".join(out)


def normalise_path(path: str) -> str:
    """Percent-encoding normalisation of a path taken from a URL (see module docstring)."""
    if not path.isascii():
        path = normalise_pattern(path.encode("utf-8", "surrogatepass"))
    elif "%" in path:
        path = _HEX_ESCAPE.sub(_upper_escape, path)
    return path


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
    if path[:1] != "/":
        path = "/" + path
    if path.isascii() and "%" not in path:
        return path
    return normalise_path(path)


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
