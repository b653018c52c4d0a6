"""URLs of both schemes: RFC 3986 parsing, normalisation and relative resolution (pure).

This module imports nothing else of geminibot, so the policy core, the protocol clients
and the crawler all share it without importing each other. A :class:`URL` is always
normalised, so two URLs naming the same resource compare equal and ``str(url)`` is what
goes on the wire:

- scheme lower-case; host lower-case, an internationalised host in punycode (IDNA 2008
  with UTS 46 mapping), an IPv4 address in dotted form, an IPv6 address compressed
  (written in brackets), one trailing dot of the host dropped (SNI forbids it);
- the port kept only when it is not the scheme's default (:data:`DEFAULT_PORTS`);
- path and query percent-encoding normalised (RFC 3986 section 6.2.2): characters that
  may not appear in a URI (space, controls, non-ASCII...) are percent-encoded as UTF-8,
  escapes get upper-case hex digits and escapes of unreserved characters are decoded;
- dot segments removed, an empty path becomes ``/``; an empty query (``?``) is kept
  (it differs from no query); the fragment is dropped; userinfo is refused (Gemini
  forbids it, and a bot has no business sending credentials).

Every fault raises a subclass of :class:`InvalidURL` (a ``ValueError``): the URL we were
*given* is bad. The Gemini request line (:mod:`geminibot.gemini.urls`) adds its own.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

import idna

Scheme = Literal["gemini", "http"]
"""The protocol a URL speaks: ``gemini``, or ``http`` for both http:// and https://."""
#: Every :data:`Scheme`, in a stable order.
SCHEMES: tuple[Scheme, ...] = ("gemini", "http")
#: The URL schemes geminibot fetches, with their default ports.
DEFAULT_PORTS = {"gemini": 1965, "http": 80, "https": 443}
#: The protocol each URL scheme speaks.
SCHEME_OF: dict[str, Scheme] = {"gemini": "gemini", "http": "http", "https": "http"}
GEMINI_SCHEMES = ("gemini",)
WEB_SCHEMES = ("http", "https")
_MAX_HOST_LENGTH = 253
_MAX_LABEL_LENGTH = 63

# RFC 3986 appendix B, with the scheme restricted to the RFC's scheme syntax.
REFERENCE = re.compile(
    r"(?:([A-Za-z][A-Za-z0-9+.\-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?",
    re.DOTALL,
)
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PATH_SAFE = _UNRESERVED | frozenset("!$&'()*+,;=:@/")
_QUERY_SAFE = _PATH_SAFE | frozenset("?")
_HEX = frozenset("0123456789abcdefABCDEF")
_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?")


# --- errors: the URL we were given is bad -------------------------------------------------


class InvalidURL(ValueError):
    """A URL that is not a valid absolute URL of a scheme we fetch."""


class NotAbsoluteURL(InvalidURL):
    """The URL has no scheme (a relative reference where an absolute URL is needed)."""


class UnsupportedScheme(InvalidURL):
    """The URL's scheme is not one asked for."""

    def __init__(self, message: str, scheme: str) -> None:
        super().__init__(message)
        self.scheme = scheme


class UserinfoInURL(InvalidURL):
    """The URL carries ``user@`` information."""


class MissingHost(InvalidURL):
    """The URL has no host."""


class InvalidHost(InvalidURL):
    """The host is not a valid name (IDNA), IPv4 or IPv6 address."""


class InvalidPort(InvalidURL):
    """The port is not a number from 1 to 65535."""


# --- the URL ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class URL:
    """A normalised absolute URL. Build one with :func:`parse_url`."""

    scheme: str
    """``gemini``, ``http`` or ``https``."""
    host: str
    """Lower-case ASCII name (punycode), IPv4 dotted quad, or IPv6 without brackets."""
    port: int
    path: str
    """Percent-encoding normalised, starts with ``/``."""
    query: str | None
    """Without the ``?``; ``None`` when the URL has no ``?``."""

    @property
    def protocol(self) -> Scheme:
        return SCHEME_OF[self.scheme]

    @property
    def is_ip_literal(self) -> bool:
        """True for an IPv4 or IPv6 address (Python's ssl sends no SNI for these)."""
        return ":" in self.host or _is_ipv4(self.host)

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

    def join(self, reference: str) -> URL:
        """Resolve ``reference`` against this URL; the result must speak the same
        protocol (a Gemini URL joins to Gemini URLs, a web URL to http(s) URLs)."""
        same = [s for s, p in SCHEME_OF.items() if p == self.protocol]
        return parse_url(resolve_reference(str(self), reference), same)


def scheme_of(url: str) -> Scheme:
    """The protocol of ``url`` by its scheme; raises :class:`UnsupportedScheme` for others."""
    scheme = url.partition(":")[0].lower()
    try:
        return SCHEME_OF[scheme]
    except KeyError:
        raise UnsupportedScheme(f"not a gemini:// or http(s):// URL: {url!r}", scheme) from None


def parse_url(text: str, schemes: Collection[str] = tuple(DEFAULT_PORTS)) -> URL:
    """Parse and normalise an absolute URL of one of ``schemes``; the fragment is dropped.

    Raises a subclass of :class:`InvalidURL` naming the fault."""
    match = REFERENCE.fullmatch(text)
    assert match is not None  # the pattern matches every string
    scheme, authority, path, query, _fragment = match.groups()
    if scheme is None:
        raise NotAbsoluteURL(f"not an absolute URL (no scheme): {text!r}")
    scheme = scheme.lower()
    if scheme not in schemes or scheme not in DEFAULT_PORTS:
        raise UnsupportedScheme(f"not {_describe(schemes)} URL: {text!r}", scheme)
    if not authority:
        raise MissingHost(f"URL has no host: {text!r}")
    host, port = parse_authority(authority, DEFAULT_PORTS[scheme])
    path = remove_dot_segments(normalise_escapes(path)) or "/"
    if query is not None:
        query = normalise_escapes(query)
    return URL(scheme, host, port, path, query)


def _describe(schemes: Collection[str]) -> str:
    """``a gemini://``, ``an http(s)://``, ``a gemini:// or http(s)://``..."""
    names = [f"{s}://" for s in schemes if s not in WEB_SCHEMES]
    web = [s for s in WEB_SCHEMES if s in schemes]
    if web:
        names.append("http(s)://" if len(web) == 2 else f"{web[0]}://")
    text = " or ".join(names)
    return ("an " if text.startswith("h") else "a ") + text


def resolve_reference(base: str, reference: str) -> str:
    """Resolve ``reference`` against the absolute URI ``base`` (RFC 3986 section 5.2).

    Works for any scheme and never raises; the result is not normalised (pass it to
    :func:`parse_url` for that). The fragment of ``reference`` is kept, as the RFC says.
    """
    base_match = REFERENCE.fullmatch(base)
    ref_match = REFERENCE.fullmatch(reference)
    assert base_match is not None and ref_match is not None
    b_scheme, b_auth, b_path, b_query, _ = base_match.groups()
    r_scheme, r_auth, r_path, r_query, r_fragment = ref_match.groups()
    if r_scheme is not None:
        scheme, auth, path, query = r_scheme, r_auth, remove_dot_segments(r_path), r_query
    else:
        scheme = b_scheme
        if r_auth is not None:
            auth, path, query = r_auth, remove_dot_segments(r_path), r_query
        else:
            auth = b_auth
            if not r_path:
                path = b_path
                query = r_query if r_query is not None else b_query
            else:
                if r_path.startswith("/"):
                    path = remove_dot_segments(r_path)
                elif b_auth is not None and not b_path:
                    path = remove_dot_segments("/" + r_path)
                else:
                    path = remove_dot_segments(b_path[: b_path.rfind("/") + 1] + r_path)
                query = r_query
    out = f"{scheme}:" if scheme is not None else ""
    if auth is not None:
        out += f"//{auth}"
    out += path
    if query is not None:
        out += f"?{query}"
    if r_fragment is not None:
        out += f"#{r_fragment}"
    return out


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4: remove ``.`` and ``..`` segments."""
    if "." not in path:
        return path
    output: list[str] = []
    segments = path.split("/")
    absolute = path.startswith("/")
    if absolute:
        segments = segments[1:]
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if output:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    joined = "/".join(output)
    return "/" + joined if absolute else joined


def parse_authority(authority: str, default_port: int) -> tuple[str, int]:
    """``host[:port]`` (no userinfo) -> (normalised host, port or ``default_port``)."""
    if "@" in authority:
        raise UserinfoInURL("URL has userinfo (user@host), which geminibot never sends")
    if authority.startswith("["):
        end = authority.find("]")
        if end == -1:
            raise InvalidHost(f"unclosed IPv6 literal: {authority!r}")
        host, rest = normalise_host(authority[: end + 1]), authority[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidHost(f"junk after IPv6 literal: {rest!r}")
        return host, _parse_port(rest[1:], default_port)
    name, _, port_text = authority.partition(":")
    return normalise_host(name), _parse_port(port_text, default_port)


def _parse_port(text: str, default: int) -> int:
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise InvalidPort(f"invalid port {text!r}")
    return int(text)


def normalise_host(name: str) -> str:
    """A host as a URL holds it: lower-case punycode name, dotted IPv4, or compressed IPv6
    (given with or without brackets). Raises :class:`InvalidHost` or :class:`MissingHost`."""
    bracketed = name.startswith("[") and name.endswith("]")
    if bracketed or ":" in name:
        literal = name[1:-1] if bracketed else name
        try:
            return ipaddress.IPv6Address(literal).compressed
        except ValueError:
            raise InvalidHost(f"not an IPv6 address: {literal!r}") from None
    if "%" in name:
        name = _percent_decode_host(name)
    if name.endswith("."):
        name = name[:-1]
    if not name:
        raise MissingHost("URL has an empty host")
    if _is_ipv4(name):
        try:
            return str(ipaddress.IPv4Address(name))
        except ValueError:
            raise InvalidHost(f"not an IPv4 address: {name!r}") from None
    return _host_name(name)


def _host_name(name: str) -> str:
    """A registered name as lower-case ASCII (punycode), its length and labels checked."""
    if name.isascii():
        host = name.lower()
    else:
        try:
            host = idna.encode(name, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError) as exc:
            raise InvalidHost(f"invalid internationalised host name {name!r}: {exc}") from None
    if len(host) > _MAX_HOST_LENGTH:
        raise InvalidHost(f"host name longer than {_MAX_HOST_LENGTH} characters")
    for label in host.split("."):
        if len(label) > _MAX_LABEL_LENGTH or not _HOST_LABEL.fullmatch(label):
            raise InvalidHost(f"invalid host name {name!r} (label {label!r})")
    return host


def unicode_host(host: str) -> str:
    """The Unicode form of a normalised host (punycode labels decoded), for display and
    for matching names people write; the host itself when it cannot be decoded."""
    if "xn--" not in host:
        return host
    try:
        return idna.decode(host)
    except (idna.IDNAError, UnicodeError, ValueError):
        return host


def _percent_decode_host(name: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(name):
        if name[i] == "%" and name[i + 1 : i + 3] and set(name[i + 1 : i + 3]) <= _HEX:
            raw.append(int(name[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(name[i].encode("utf-8", "surrogatepass"))
            i += 1
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidHost(f"percent-encoded host is not UTF-8: {name!r}") from None


def _is_ipv4(name: str) -> bool:
    return name.count(".") == 3 and name.replace(".", "").isdigit() and name.isascii()


#: The characters normalisation leaves as they are in a path or query (a regex class):
#: no ``%`` (an escape may need decoding), nothing to escape.
PLAIN_CHARACTERS = r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?]"
_PLAIN = re.compile(PLAIN_CHARACTERS + "*").fullmatch
_DOT_SEGMENT = re.compile(r"/\.\.?(?:[/?]|\Z)")


def is_normalised(text: str) -> bool:
    """Whether :func:`normalise_path_query` leaves ``text`` (or the path and query of a
    URL that contains only such characters) as it is: no escape, no character to
    escape, no dot segment. Cheap; a False may still normalise to itself."""
    if _PLAIN(text) is None:
        return False
    return "/." not in text or _DOT_SEGMENT.search(text) is None


def normalise_path_query(text: str) -> str:
    """The one normalisation of a URL's path and query, for fetching and for every policy
    decision alike: :func:`normalise_escapes`, then :func:`remove_dot_segments` on the
    path (what precedes the first ``?``). ``text`` starts with ``/`` or is empty; "" and
    a lone query get the path ``/``. Idempotent; what :func:`parse_url` does to a URL's
    path and query, so ``normalise_path_query(url.path_query) == url.path_query``. A
    result always starts with ``/``."""
    if is_normalised(text):
        return text if text[:1] == "/" else "/" + text
    path, mark, query = normalise_escapes(text).partition("?")
    return remove_dot_segments("/" + path if path[:1] != "/" else path) + mark + query


def normalise_escapes(text: str, keep: str = "") -> str:
    """Percent-encoding normalisation (RFC 3986 section 6.2.2, RFC 9309 section 2.2.2):
    an escape of an unreserved character (``%7E``, ``%5F``, ``%41``) is decoded, every
    other escape gets upper-case hex digits (``%2f`` -> ``%2F``, never decoded), and a
    character that may not appear in a path or query (space, ``"``, ``[``, controls,
    non-ASCII...) is percent-encoded as UTF-8, as is a ``%`` that starts no escape.
    ``keep`` names further ASCII characters left as they are (a glob's ``[`` ``]``)."""
    if not keep:
        return text if _PLAIN(text) is not None else _normalise_escapes(text, _QUERY_SAFE)
    return _normalise_escapes(text, _QUERY_SAFE | frozenset(keep))


def _normalise_escapes(text: str, safe: frozenset[str]) -> str:
    if "%" not in text and all(c in safe for c in text):
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "%" and i + 2 < n and text[i + 1] in _HEX and text[i + 2] in _HEX:
            decoded = chr(int(text[i + 1 : i + 3], 16))
            out.append(decoded if decoded in _UNRESERVED else "%" + text[i + 1 : i + 3].upper())
            i += 3
            continue
        if c in safe:
            out.append(c)
        else:
            out.extend(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
        i += 1
    return "".join(out)


# --- host keys ---


def normalise(url: str) -> str:
    return str(parse_url(url))


def host_key(url: str) -> str:
    """The crawler's unit of politeness, policy and bookkeeping: ``host[:port]`` for
    Gemini, the origin ``scheme://host[:port]`` for the web (so the Gemini and web sides of
    one host name keep their own policy files and their own pace)."""
    return host_of(parse_url(url))


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
