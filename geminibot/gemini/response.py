"""A sans-I/O reader of Gemini responses: bytes in, events out (in the manner of h11).

::

    reader = ResponseReader(max_body_size=1 << 20)
    reader.receive_data(chunk)          # b"" means the stream ended
    event = reader.next_event()         # ResponseHeader, Body, EndOfResponse or NEED_DATA

The header is ``<two digits><space><meta><CR><LF>``, the meta at most
:data:`MAX_META_BYTES` bytes of UTF-8. Only a ``2x`` response has a body, which runs to
the end of the stream; any other response ends with its header (bytes after it are
ignored). Every fault raises a specific :class:`~geminibot.net.errors.RemoteProtocolError`
(the Gemini ones are in :mod:`geminibot.gemini.errors`) or :class:`~geminibot.net.errors.BodyTooLarge`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from geminibot.gemini.errors import (
    EmptyResponse,
    HeaderMissingCRLF,
    HeaderNotUTF8,
    HeaderTooLong,
    InvalidMeta,
    InvalidStatus,
)
from geminibot.gemini.status import Family, Status, family_of, known_status, slow_down_seconds
from geminibot.net.errors import BodyTooLarge

#: Longest meta, in bytes.
MAX_META_BYTES = 1024
#: Longest header line: two digits, a space, the meta, CR LF.
MAX_HEADER_BYTES = 2 + 1 + MAX_META_BYTES + 2
#: The MIME type of a ``20`` response whose meta is empty.
DEFAULT_MIME = "text/gemini; charset=utf-8"

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_ESSENCE = re.compile(rf"({_TOKEN})/({_TOKEN})")
_PARAM = re.compile(rf"\s*({_TOKEN})\s*=\s*(\"(?:[^\"\\]|\\.)*\"|[^;]*?)\s*(?:;|$)")
_META_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class MimeType:
    """A parsed MIME type: ``essence`` (lower-case ``type/subtype``) and parameters."""

    essence: str
    params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def charset(self) -> str | None:
        """The charset parameter (lower-case); ``utf-8`` for ``text/*`` when absent."""
        charset = self.params.get("charset")
        if charset is not None:
            return charset.lower()
        return "utf-8" if self.essence.startswith("text/") else None

    @property
    def lang(self) -> str | None:
        """The ``lang`` parameter of ``text/gemini`` (a comma-separated list), if any."""
        return self.params.get("lang")

    @property
    def is_gemtext(self) -> bool:
        return self.essence == "text/gemini"


def parse_mime(meta: str) -> MimeType:
    """Parse a MIME type; raises InvalidMeta without a ``type/subtype``."""
    text = meta.strip() or DEFAULT_MIME
    essence, _, rest = text.partition(";")
    match = _ESSENCE.fullmatch(essence.strip())
    if match is None:
        raise InvalidMeta(f"not a MIME type: {meta!r}")
    params: dict[str, str] = {}
    for m in _PARAM.finditer(rest):
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params.setdefault(m.group(1).lower(), value)
    return MimeType(match.group(0).lower(), MappingProxyType(params))


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    """The parsed header line. ``status`` may be a code the specification does not name."""

    status: int
    meta: str
    mime: MimeType | None = None
    """For ``2x`` responses only."""

    @property
    def family(self) -> Family:
        return family_of(self.status)

    @property
    def known(self) -> Status | None:
        return known_status(self.status)

    @property
    def redirect_target(self) -> str | None:
        """For ``3x``: the meta, a URL reference to resolve against the request URL."""
        return self.meta.strip() if self.family is Family.REDIRECT else None

    @property
    def slow_down_seconds(self) -> int | None:
        """For ``44``: the integer seconds the meta asks for (older specification)."""
        return slow_down_seconds(self.meta) if self.status == Status.SLOW_DOWN else None


def parse_header(line: bytes) -> ResponseHeader:
    """Parse one header line without its CR LF."""
    if len(line) < 2 or not (48 <= line[0] <= 57 and 48 <= line[1] <= 57):
        raise InvalidStatus(f"status is not two digits: {line[:8]!r}")
    if len(line) > 2 and line[2] != 0x20:
        raise InvalidStatus(f"status is not two digits and a space: {line[:8]!r}")
    status = int(line[:2])
    family = family_of(status)
    raw_meta = line[3:]
    if len(raw_meta) > MAX_META_BYTES:
        raise HeaderTooLong(f"meta is {len(raw_meta)} bytes, the limit is {MAX_META_BYTES}")
    try:
        meta = raw_meta.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderNotUTF8(f"meta is not UTF-8 (byte {exc.start})") from None
    control = _META_CONTROL.search(meta)
    if control is not None:
        raise InvalidMeta(f"control character {control.group()!r} in the meta")
    if family is Family.SUCCESS:
        return ResponseHeader(status, meta, parse_mime(meta))
    if family is Family.REDIRECT and not meta.strip():
        raise InvalidMeta(f"redirect {status} without a target")
    return ResponseHeader(status, meta)


@dataclass(frozen=True, slots=True)
class Body:
    """A piece of the response body, as the parser hands it out."""

    data: bytes


@dataclass(frozen=True, slots=True)
class EndOfResponse:
    """The response is complete: a non-``2x`` header was read, or the body stream ended."""


class _NeedData(Enum):
    """The parser's answer when it needs more bytes to say anything."""

    NEED_DATA = "NEED_DATA"


NEED_DATA = _NeedData.NEED_DATA
Event = ResponseHeader | Body | EndOfResponse


class ResponseReader:
    """Turns the bytes of one response into events; see the module docstring."""

    def __init__(self, max_body_size: int | None = None) -> None:
        self.max_body_size = max_body_size
        self.header: ResponseHeader | None = None
        self.body_size = 0
        self._buffer = bytearray()
        self._eof = False
        self._done = False

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the stream; ``b""`` says the stream ended."""
        if not data:
            self._eof = True
        elif not self._done:
            self._buffer += data

    @property
    def has_buffered_data(self) -> bool:
        """True if received bytes are waiting to be turned into events."""
        return bool(self._buffer)

    def next_event(self) -> Event | _NeedData:
        if self._done:
            return EndOfResponse()
        if self.header is None:
            return self._next_header()
        if self._buffer:
            data = bytes(self._buffer)
            self._buffer.clear()
            self.body_size += len(data)
            if self.max_body_size is not None and self.body_size > self.max_body_size:
                raise BodyTooLarge(f"body is larger than {self.max_body_size} bytes")
            return Body(data)
        if self._eof:
            self._done = True
            return EndOfResponse()
        return NEED_DATA

    def _next_header(self) -> ResponseHeader | _NeedData:
        end = self._buffer.find(b"\n", 0, MAX_HEADER_BYTES)
        if end == -1:
            if len(self._buffer) >= MAX_HEADER_BYTES:
                raise HeaderTooLong(f"no header end within {MAX_HEADER_BYTES} bytes")
            if self._eof:
                if not self._buffer:
                    raise EmptyResponse("the server closed the connection without a header")
                raise HeaderMissingCRLF("the stream ended before the header's CR LF")
            return NEED_DATA
        if end == 0 or self._buffer[end - 1] != 0x0D:
            raise HeaderMissingCRLF("the header line ends with a bare LF, not CR LF")
        header = parse_header(bytes(self._buffer[: end - 1]))
        del self._buffer[: end + 1]
        self.header = header
        if header.family is not Family.SUCCESS:
            self._done = True
            self._buffer.clear()
        return header


#: Codecs Python files as text encodings that are no charset a document is written in:
#: they would decode host names, Python escapes, or nothing at all.
_NOT_CHARSETS = frozenset({"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape"})


def text_codec(charset: str | None) -> str:
    """The codec that decodes a body declared to be in ``charset``: the charset's own if
    it names a text encoding, else ``utf-8`` (none, unknown, ``rot13``, ``base64``,
    ``zlib``, ``idna``, ``undefined``, ... are no charsets)."""
    if not charset:
        return "utf-8"
    try:
        info = codecs.lookup(charset)
    except (LookupError, ValueError):  # unknown, or a NUL in the name
        return "utf-8"
    if info.name in _NOT_CHARSETS or not _is_text_encoding(info.name):
        return "utf-8"
    return info.name


def decodes_as_declared(body: bytes, text: str, mime: MimeType | None) -> bool:
    """Whether ``body`` decodes by the charset ``mime`` declares (UTF-8 when none):
    False for a charset that names no text encoding, or bytes that are not in it.
    ``text`` is :func:`decode_text`'s reading of ``body``: a body whose reading has no
    replacement character is decoded again only when it has one (a scan, not a decode,
    for most pages)."""
    charset = mime.charset if mime is not None else None
    codec = text_codec(charset)
    if charset and codec == "utf-8":
        try:
            if codecs.lookup(charset).name != "utf-8":
                return False  # a codec, but no text encoding
        except (LookupError, ValueError):
            return False  # no codec at all
    if "\ufffd" not in text:
        return True
    try:
        body.decode(codec)
    except (UnicodeError, LookupError, ValueError):
        return False
    return True


def _is_text_encoding(name: str) -> bool:
    """Whether codec ``name`` encodes text to bytes: ``str.encode`` takes only those and
    answers LookupError for the rest (``base64``, ``rot13``, ``zlib``...), even for "",
    without encoding anything."""
    try:
        "".encode(name)
    except (LookupError, UnicodeError):
        return False
    return True


def decode_text(body: bytes, mime: MimeType | None) -> str:
    """Decode a text body by its charset, replacing bad bytes; UTF-8 when the charset is
    absent or not a text encoding (:func:`text_codec`). Never raises: the one way every
    caller (client, crawler, web extraction) turns a stranger's body into text."""
    codec = text_codec(mime.charset if mime is not None else None)
    try:
        return body.decode(codec, errors="replace")
    except (UnicodeError, LookupError, ValueError):  # a codec that cannot replace
        return body.decode("utf-8", errors="replace")
