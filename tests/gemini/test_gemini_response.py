"""The sans-I/O response reader: header limits, every status family, MIME, body, faults."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geminibot.gemini import errors, response
from geminibot.gemini.response import (
    DEFAULT_MIME,
    MAX_META_BYTES,
    NEED_DATA,
    Body,
    EndOfResponse,
    ResponseHeader,
    ResponseReader,
    decode_text,
    parse_header,
    parse_mime,
    text_codec,
)
from geminibot.gemini.status import Family, Status, family_of, known_status
from geminibot.net import errors as net_errors


def read_all(chunks: list[bytes], max_body_size: int | None = None) -> list[object]:
    """Feed chunks then EOF; return every event up to EndOfResponse."""
    reader = ResponseReader(max_body_size)
    events: list[object] = []
    for chunk in [*chunks, b""]:
        reader.receive_data(chunk)
        while True:
            event = reader.next_event()
            if event is NEED_DATA:
                break
            events.append(event)
            if isinstance(event, EndOfResponse):
                return events
    raise AssertionError("reader never ended")  # pragma: no cover


def test_success_with_body_in_pieces() -> None:
    events = read_all([b"20 text/gem", b"ini; charset=UTF-8; lang=en\r\nhel", b"lo"])
    header = events[0]
    assert isinstance(header, ResponseHeader)
    assert header.status == Status.SUCCESS
    assert header.family is Family.SUCCESS
    assert header.mime is not None
    assert header.mime.essence == "text/gemini"
    assert header.mime.charset == "utf-8"
    assert header.mime.lang == "en"
    assert b"".join(e.data for e in events if isinstance(e, Body)) == b"hello"
    assert isinstance(events[-1], EndOfResponse)


def test_empty_meta_on_success_is_the_default_mime() -> None:
    for line in (b"20", b"20 "):
        header = parse_header(line)
        assert header.mime == parse_mime(DEFAULT_MIME)


@pytest.mark.parametrize(
    ("line", "status", "family"),
    [
        (b"10 Your name?", Status.INPUT, Family.INPUT),
        (b"11 Password", Status.SENSITIVE_INPUT, Family.INPUT),
        (b"30 /new", Status.REDIRECT_TEMPORARY, Family.REDIRECT),
        (b"31 gemini://x/", Status.REDIRECT_PERMANENT, Family.REDIRECT),
        (b"40 busy", Status.TEMPORARY_FAILURE, Family.TEMPORARY_FAILURE),
        (b"41", Status.SERVER_UNAVAILABLE, Family.TEMPORARY_FAILURE),
        (b"42 x", Status.CGI_ERROR, Family.TEMPORARY_FAILURE),
        (b"43 x", Status.PROXY_ERROR, Family.TEMPORARY_FAILURE),
        (b"44 30", Status.SLOW_DOWN, Family.TEMPORARY_FAILURE),
        (b"50 no", Status.PERMANENT_FAILURE, Family.PERMANENT_FAILURE),
        (b"51 Not found", Status.NOT_FOUND, Family.PERMANENT_FAILURE),
        (b"52 Gone", Status.GONE, Family.PERMANENT_FAILURE),
        (b"53 Refused", Status.PROXY_REQUEST_REFUSED, Family.PERMANENT_FAILURE),
        (b"59 Bad", Status.BAD_REQUEST, Family.PERMANENT_FAILURE),
        (b"60 cert", Status.CLIENT_CERTIFICATE_REQUIRED, Family.CLIENT_CERTIFICATE),
        (b"61 cert", Status.CERTIFICATE_NOT_AUTHORISED, Family.CLIENT_CERTIFICATE),
        (b"62 cert", Status.CERTIFICATE_NOT_VALID, Family.CLIENT_CERTIFICATE),
    ],
)
def test_every_named_status(line: bytes, status: Status, family: Family) -> None:
    events = read_all([line + b"\r\nignored body"])
    header = events[0]
    assert isinstance(header, ResponseHeader)
    assert header.known is status
    assert header.family is family is status.family
    assert header.mime is None
    assert events[1:] == [EndOfResponse()]  # no body outside 2x


def test_status_enum_covers_the_specification() -> None:
    assert len(Status) == 18
    assert known_status(25) is None
    assert family_of(25) is Family.SUCCESS


def test_unnamed_code_in_a_known_family_is_handled_by_its_family() -> None:
    header = parse_header(b"47 something")
    assert header.known is None
    assert header.family is Family.TEMPORARY_FAILURE


def test_redirect_target_and_slow_down() -> None:
    assert parse_header(b"30  /x ").redirect_target == "/x"
    assert parse_header(b"20 text/plain").redirect_target is None
    assert parse_header(b"44 120").slow_down_seconds == 120
    assert parse_header(b"44 slow down").slow_down_seconds is None
    assert parse_header(b"40 120").slow_down_seconds is None


def test_mime_parameters() -> None:
    mime = parse_mime('Text/Plain ; Charset="ISO-8859-1" ; format=flowed; junk')
    assert mime.essence == "text/plain"
    assert mime.charset == "iso-8859-1"
    assert mime.params["format"] == "flowed"
    assert parse_mime("image/png").charset is None
    assert parse_mime("text/gemini; lang=en,fr").lang == "en,fr"


def test_meta_length_edge() -> None:
    ok = b"20 text/plain; x=" + b"a" * (MAX_META_BYTES - len(b"text/plain; x="))
    assert len(ok) == 3 + MAX_META_BYTES
    assert isinstance(read_all([ok + b"\r\n"])[0], ResponseHeader)
    with pytest.raises(errors.HeaderTooLong):
        read_all([ok + b"a\r\n"])


def test_header_too_long_without_line_end_fails_before_eof() -> None:
    reader = ResponseReader()
    reader.receive_data(b"20 " + b"a" * 5000)
    with pytest.raises(errors.HeaderTooLong):
        reader.next_event()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", errors.EmptyResponse),
        (b"20 text/gemini", errors.HeaderMissingCRLF),
        (b"20 text/gemini\nbody", errors.HeaderMissingCRLF),
        (b"\n", errors.HeaderMissingCRLF),
        (b"2 text/gemini\r\n", errors.InvalidStatus),
        (b"200 text/gemini\r\n", errors.InvalidStatus),
        (b"OK text/gemini\r\n", errors.InvalidStatus),
        (b"\xd9\xa2\xd9\xa0 x\r\n", errors.InvalidStatus),
        (b"20\ttext/gemini\r\n", errors.InvalidStatus),
        (b"00 x\r\n", errors.UnknownStatus),
        (b"70 x\r\n", errors.UnknownStatus),
        (b"99 x\r\n", errors.UnknownStatus),
        (b"20 text/gemini\xff\r\n", errors.HeaderNotUTF8),
        (b"51 \xc3\x28\r\n", errors.HeaderNotUTF8),
        (b"20 nonsense\r\n", errors.InvalidMeta),
        (b"30\r\n", errors.InvalidMeta),
        (b"31   \r\n", errors.InvalidMeta),
        (b"51 a\rb\r\n", errors.InvalidMeta),
    ],
)
def test_faults_have_specific_errors(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        read_all([data])
    assert issubclass(error, net_errors.RemoteProtocolError)


def test_body_size_limit_edge() -> None:
    events = read_all([b"20 text/plain\r\n", b"x" * 10], max_body_size=10)
    assert sum(len(e.data) for e in events if isinstance(e, Body)) == 10
    with pytest.raises(net_errors.BodyTooLarge):
        read_all([b"20 text/plain\r\n", b"x" * 10, b"y"], max_body_size=10)


def test_decode_text() -> None:
    assert decode_text("é".encode("latin-1"), parse_mime("text/plain; charset=latin-1")) == "é"
    assert decode_text("é".encode(), parse_mime("text/plain; charset=no-such-codec")) == "é"
    assert decode_text(b"\xff", None) == "\ufffd"


@given(st.lists(st.binary(max_size=40), max_size=6), st.one_of(st.none(), st.integers(0, 50)))
def test_any_bytes_give_events_or_a_documented_error(
    chunks: list[bytes], limit: int | None
) -> None:
    try:
        events = read_all(chunks, limit)
    except net_errors.FetchError:
        return
    assert isinstance(events[0], ResponseHeader)


@given(st.binary(max_size=30))
def test_any_header_line_parses_or_fails_cleanly(line: bytes) -> None:
    try:
        header = parse_header(line)
    except net_errors.RemoteProtocolError:
        return
    assert 10 <= header.status <= 69


NO_CHARSETS = ["rot13", "base64", "hex", "zlib", "bz2", "idna", "undefined", "punycode"]
NO_CHARSETS += ["unicode_escape", "raw-unicode-escape", "uu", "quopri", "nul\x00name", ""]


@pytest.mark.parametrize("charset", NO_CHARSETS)
def test_a_charset_that_is_no_text_encoding_decodes_as_utf8(charset: str) -> None:
    body = "caf\u00e9 \\x41 uryyb \xff".encode("utf-8", "surrogateescape") + b"\xff"
    mime = response.MimeType("text/plain", MappingProxyType({"charset": charset}))
    assert text_codec(charset) == "utf-8"
    assert decode_text(body, mime) == body.decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("charset", "codec"),
    [("latin-1", "iso8859-1"), ("UTF-16", "utf-16"), ("shift_jis", "shift_jis"), (None, "utf-8")],
)
def test_text_encodings_are_kept(charset: str | None, codec: str) -> None:
    assert text_codec(charset) == codec


def test_decodes_as_declared() -> None:
    def check(body: bytes, meta: str) -> bool:
        mime = parse_mime(meta)
        return response.decodes_as_declared(body, decode_text(body, mime), mime)

    assert check("café".encode(), "text/gemini")
    assert not check("café".encode("latin-1"), "text/gemini")
    assert not check("café".encode("latin-1"), "text/gemini; charset=utf-8")
    assert check("café".encode("latin-1"), "text/gemini; charset=iso-8859-1")
    assert check("\ufffd".encode(), "text/gemini")  # a replacement character of its own
    assert not check(b"plain", "text/gemini; charset=no-such-charset")
    assert not check(b"plain", "text/gemini; charset=rot13")
