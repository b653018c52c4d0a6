"""Gemini URLs: parsing, normalisation, relative resolution and request-line validation.

No I/O. A :class:`GeminiURL` is always normalised, so two URLs naming the same resource
compare equal and ``str(url)`` is what goes on the wire:

- scheme ``gemini``, host lower-case, an internationalised host in punycode (IDNA 2008
  with UTS 46 mapping), an IPv4 address in dotted form, an IPv6 address compressed
  (written in brackets), one trailing dot of the host dropped (SNI forbids it);
- the port kept only when it is not :data:`DEFAULT_PORT`;
- path and query percent-encoding normalised (RFC 3986 section 6.2.2): characters that
  may not appear in a URI (space, controls, non-ASCII...) are percent-encoded as UTF-8,
  escapes get upper-case hex digits and escapes of unreserved characters are decoded;
- dot segments removed, an empty path becomes ``/``; an empty query (``?``) is kept
  (it differs from no query); the fragment is dropped; userinfo is refused.

:func:`parse_request` is the strict form a server uses on a request line.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import idna

from geminibot.gemini.errors import (
    FragmentInRequest,
    InvalidHost,
    InvalidPort,
    MalformedRequestLine,
    MissingHost,
    NotAbsoluteURL,
    RequestHasBOM,
    RequestNotUTF8,
    RequestTooLong,
    UnsupportedScheme,
    UserinfoInURL,
)

SCHEME = "gemini"
DEFAULT_PORT = 1965
#: Longest request URL, in bytes once UTF-8 encoded, CR LF not counted.
MAX_REQUEST_BYTES = 1024
_MAX_HOST_LENGTH = 253
_MAX_LABEL_LENGTH = 63
_BOM = b"\xef\xbb\xbf"

# RFC 3986 appendix B, with the scheme restricted to the RFC's scheme syntax.
_REFERENCE = re.compile(
    r"(?:([A-Za-z][A-Za-z0-9+.\-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?",
    re.DOTALL,
)
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PATH_SAFE = _UNRESERVED | frozenset("!$&'()*+,;=:@/")
_QUERY_SAFE = _PATH_SAFE | frozenset("?")
_HEX = frozenset("0123456789abcdefABCDEF")
_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class GeminiURL:
    """A normalised absolute ``gemini://`` URL. Build one with :func:`parse_url`."""

    host: str
    """Lower-case ASCII name (punycode), IPv4 dotted quad, or IPv6 without brackets."""
    port: int
    path: str
    """Percent-encoding normalised, starts with ``/``."""
    query: str | None
    """Without the ``?``; ``None`` when the URL has no ``?``."""

    @property
    def is_ip_literal(self) -> bool:
        """True for an IPv4 or IPv6 address (Python's ssl sends no SNI for these)."""
        return ":" in self.host or _is_ipv4(self.host)

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORT else f"{host}:{self.port}"

    @property
    def path_query(self) -> str:
        return self.path if self.query is None else f"{self.path}?{self.query}"

    def __str__(self) -> str:
        return f"{SCHEME}://{self.authority}{self.path_query}"

    def join(self, reference: str) -> GeminiURL:
        """Resolve ``reference`` against this URL; the result must be a Gemini URL."""
        return parse_url(resolve_reference(str(self), reference))

    def request_line(self) -> bytes:
        """The request to send: the URL and CR LF. Raises :class:`RequestTooLong`."""
        data = str(self).encode("ascii")  # normalised URLs are pure ASCII
        if len(data) > MAX_REQUEST_BYTES:
            raise RequestTooLong(
                f"request URL is {len(data)} bytes, the limit is {MAX_REQUEST_BYTES}"
            )
        return data + b"\r\n"


def parse_url(text: str) -> GeminiURL:
    """Parse and normalise an absolute ``gemini://`` URL; the fragment is dropped.

    Raises a subclass of :class:`~geminibot.gemini.errors.InvalidURL` naming the fault.
    """
    match = _REFERENCE.fullmatch(text)
    assert match is not None  # the pattern matches every string
    scheme, authority, path, query, _fragment = match.groups()
    if scheme is None:
        raise NotAbsoluteURL(f"not an absolute URL (no scheme): {text!r}")
    if scheme.lower() != SCHEME:
        raise UnsupportedScheme(f"not a gemini:// URL: {text!r}", scheme.lower())
    if not authority:
        raise MissingHost(f"URL has no host: {text!r}")
    host, port = _parse_authority(authority)
    path = remove_dot_segments(_normalise_escapes(path, _PATH_SAFE)) or "/"
    if query is not None:
        query = _normalise_escapes(query, _QUERY_SAFE)
    return GeminiURL(host, port, path, query)


def parse_request(line: bytes) -> GeminiURL:
    """Validate a request line as a server receives it and return its normalised URL.

    ``line`` may end with CR LF or not. Checks, each with its own error: at most
    :data:`MAX_REQUEST_BYTES` bytes, no byte order mark, UTF-8, no control characters
    (a space inside the URL is tolerated and percent-encoded, as is non-ASCII),
    absolute, scheme ``gemini`` (:class:`UnsupportedScheme`; a server answers 53), a host,
    no userinfo, no fragment. The returned path is still percent-encoded and has no dot
    segments; decode it only after that (``%2F`` decodes to ``/``).
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
    match = _REFERENCE.fullmatch(text)
    assert match is not None
    if match.group(5) is not None:
        raise FragmentInRequest("request URL has a fragment")
    return parse_url(text)


def resolve_reference(base: str, reference: str) -> str:
    """Resolve ``reference`` against the absolute URI ``base`` (RFC 3986 section 5.2).

    Works for any scheme and never raises; the result is not normalised (pass a
    ``gemini://`` result to :func:`parse_url` for that). The fragment of ``reference``
    is kept, as the RFC says.
    """
    base_match = _REFERENCE.fullmatch(base)
    ref_match = _REFERENCE.fullmatch(reference)
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


def _parse_authority(authority: str) -> tuple[str, int]:
    if "@" in authority:
        raise UserinfoInURL("URL has userinfo (user@host), which Gemini forbids")
    if authority.startswith("["):
        end = authority.find("]")
        if end == -1:
            raise InvalidHost(f"unclosed IPv6 literal: {authority!r}")
        literal, rest = authority[1:end], authority[end + 1 :]
        try:
            host = ipaddress.IPv6Address(literal).compressed
        except ValueError:
            raise InvalidHost(f"not an IPv6 address: {literal!r}") from None
        if rest and not rest.startswith(":"):
            raise InvalidHost(f"junk after IPv6 literal: {rest!r}")
        return host, _parse_port(rest[1:])
    name, _, port_text = authority.partition(":")
    return _normalise_host(name), _parse_port(port_text)


def _parse_port(text: str) -> int:
    if not text:
        return DEFAULT_PORT
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise InvalidPort(f"invalid port {text!r}")
    return int(text)


def _normalise_host(name: str) -> str:
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
