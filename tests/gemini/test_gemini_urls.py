"""URL parsing, normalisation, resolution (RFC 3986 section 5.4) and request validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geminibot import urls
from geminibot.gemini import errors
from geminibot.gemini.urls import (
    MAX_REQUEST_BYTES,
    parse_request,
    parse_url,
    request_line,
)
from geminibot.urls import resolve_reference


@pytest.mark.parametrize(
    ("given_url", "expected"),
    [
        ("gemini://example.org", "gemini://example.org/"),
        ("GEMINI://Example.ORG:1965/", "gemini://example.org/"),
        ("gemini://example.org:1966/x", "gemini://example.org:1966/x"),
        ("gemini://bücher.example/", "gemini://xn--bcher-kva.example/"),
        ("gemini://b%C3%BCcher.example/", "gemini://xn--bcher-kva.example/"),
        ("gemini://[::FFFF:1.2.3.4]:70", "gemini://[::ffff:102:304]:70/"),
        ("gemini://[2001:DB8:0:0::1]/", "gemini://[2001:db8::1]/"),
        ("gemini://127.0.0.1/", "gemini://127.0.0.1/"),
        ("gemini://example.org./", "gemini://example.org/"),
        ("gemini://h/a/./b/../c", "gemini://h/a/c"),
        ("gemini://h/../../x", "gemini://h/x"),
        ("gemini://h/a/%2E%2E/b", "gemini://h/b"),
        ("gemini://h/%7e%2f%c3%a9", "gemini://h/~%2F%C3%A9"),
        ("gemini://h/é ü", "gemini://h/%C3%A9%20%C3%BC"),
        ("gemini://h/100%", "gemini://h/100%25"),
        ("gemini://h/?", "gemini://h/?"),
        ("gemini://h/?a b", "gemini://h/?a%20b"),
        ("gemini://h/p#frag", "gemini://h/p"),
        ("gemini://h/p?q#f", "gemini://h/p?q"),
    ],
)
def test_normalisation(given_url: str, expected: str) -> None:
    assert str(parse_url(given_url)) == expected


def test_fields() -> None:
    url = parse_url("gemini://[::1]:1970/a?b")
    assert url == urls.URL("gemini", "::1", 1970, "/a", "b")
    assert url.is_ip_literal
    assert url.authority == "[::1]:1970"
    assert not parse_url("gemini://x.test/").is_ip_literal
    assert parse_url("gemini://10.0.0.1/").is_ip_literal


@pytest.mark.parametrize(
    ("given_url", "error"),
    [
        ("/just/a/path", urls.NotAbsoluteURL),
        ("example.org/x", urls.NotAbsoluteURL),
        ("https://example.org/", urls.UnsupportedScheme),
        ("gemini://user@example.org/", urls.UserinfoInURL),
        ("gemini:///path", urls.MissingHost),
        ("gemini:path", urls.MissingHost),
        ("gemini://:1965/", urls.MissingHost),
        ("gemini://exa mple.org/", urls.InvalidHost),
        ("gemini://-bad.org/", urls.InvalidHost),
        ("gemini://a..b/", urls.InvalidHost),
        ("gemini://" + "a" * 64 + ".org/", urls.InvalidHost),
        ("gemini://[::1/", urls.InvalidHost),
        ("gemini://[zz::1]/", urls.InvalidHost),
        ("gemini://[::1]x/", urls.InvalidHost),
        ("gemini://300.1.1.1/", urls.InvalidHost),
        ("gemini://h:0/", urls.InvalidPort),
        ("gemini://h:65536/", urls.InvalidPort),
        ("gemini://h:12a/", urls.InvalidPort),
        ("gemini://h:１２/", urls.InvalidPort),
    ],
)
def test_parse_errors(given_url: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_url(given_url)


def test_unsupported_scheme_names_it() -> None:
    with pytest.raises(urls.UnsupportedScheme) as info:
        parse_url("HTTPS://x/")
    assert info.value.scheme == "https"


RFC3986_BASE = "http://a/b/c/d;p?q"
RFC3986_EXAMPLES = {
    "g:h": "g:h",
    "g": "http://a/b/c/g",
    "./g": "http://a/b/c/g",
    "g/": "http://a/b/c/g/",
    "/g": "http://a/g",
    "//g": "http://g",
    "?y": "http://a/b/c/d;p?y",
    "g?y": "http://a/b/c/g?y",
    "#s": "http://a/b/c/d;p?q#s",
    "g#s": "http://a/b/c/g#s",
    ";x": "http://a/b/c/;x",
    "": "http://a/b/c/d;p?q",
    ".": "http://a/b/c/",
    "..": "http://a/b/",
    "../g": "http://a/b/g",
    "../..": "http://a/",
    "../../../g": "http://a/g",
    "/./g": "http://a/g",
    "/../g": "http://a/g",
    "g.": "http://a/b/c/g.",
    "..g": "http://a/b/c/..g",
    "./../g": "http://a/b/g",
    "./g/.": "http://a/b/c/g/",
    "g/../h": "http://a/b/c/h",
    "g;x=1/../y": "http://a/b/c/y",
}


@pytest.mark.parametrize(("reference", "expected"), sorted(RFC3986_EXAMPLES.items()))
def test_resolution_matches_rfc3986_examples(reference: str, expected: str) -> None:
    assert resolve_reference(RFC3986_BASE, reference) == expected


def test_join() -> None:
    page = parse_url("gemini://h.test/dir/page.gmi")
    assert str(page.join("other.gmi")) == "gemini://h.test/dir/other.gmi"
    assert str(page.join("../up")) == "gemini://h.test/up"
    assert str(page.join("//other.test:2000/x")) == "gemini://other.test:2000/x"
    with pytest.raises(urls.UnsupportedScheme):
        page.join("https://h.test/")


def test_request_line_limit_edge() -> None:
    prefix = "gemini://h/"
    fits = parse_url(prefix + "a" * (MAX_REQUEST_BYTES - len(prefix)))
    assert request_line(fits) == str(fits).encode() + b"\r\n"
    too_long = parse_url(prefix + "a" * (MAX_REQUEST_BYTES - len(prefix) + 1))
    with pytest.raises(errors.RequestTooLong):
        request_line(too_long)


def test_parse_request_accepts_a_valid_line() -> None:
    assert parse_request(b"gemini://h.test/a/../b\r\n") == urls.URL(
        "gemini", "h.test", 1965, "/b", None
    )
    assert parse_request("gemini://h.test/é".encode()) == parse_url("gemini://h.test/%C3%A9")
    assert parse_request(b"gemini://h.test/a b").path == "/a%20b"  # tolerated, encoded


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"gemini://h/" + b"a" * (MAX_REQUEST_BYTES - 10) + b"\r\n", errors.RequestTooLong),
        (b"\xef\xbb\xbfgemini://h/", errors.RequestHasBOM),
        (b"gemini://h/\xff", errors.RequestNotUTF8),
        (b"", errors.MalformedRequestLine),
        (b"\r\n", errors.MalformedRequestLine),
        (b"gemini://h/\rx", errors.MalformedRequestLine),
        (b"gemini://h/\nx\r\n", errors.MalformedRequestLine),
        (b"gemini://h/\x00", errors.MalformedRequestLine),
        (b" gemini://h/", urls.NotAbsoluteURL),
        (b"/relative", urls.NotAbsoluteURL),
        (b"https://h/", urls.UnsupportedScheme),
        (b"gemini://u@h/", urls.UserinfoInURL),
        (b"gemini://h/#frag", errors.FragmentInRequest),
        (b"gemini://h/#", errors.FragmentInRequest),
    ],
)
def test_parse_request_errors(line: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_request(line)


def test_parse_request_length_edge() -> None:
    prefix = b"gemini://h/"
    parse_request(prefix + b"a" * (MAX_REQUEST_BYTES - len(prefix)) + b"\r\n")
    with pytest.raises(errors.RequestTooLong):
        parse_request(prefix + b"a" * (MAX_REQUEST_BYTES - len(prefix) + 1) + b"\r\n")


def test_errors_are_value_errors_and_invalid_urls() -> None:
    with pytest.raises(ValueError):
        parse_url("nope")
    with pytest.raises(urls.InvalidURL):
        parse_url("nope")


# --- properties --------------------------------------------------------------------------

_HOSTS = st.one_of(
    st.from_regex(
        r"[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?(\.[A-Za-z]{1,6}){0,2}", fullmatch=True
    ),
    st.sampled_from(["bücher.example", "ÉXAMPLE.org", "127.0.0.1", "[::1]", "[2001:DB8::0:1]"]),
)
_PATH_CHARS = st.characters(codec="utf-8", exclude_characters="#?")
_SEGMENTS = st.lists(
    st.one_of(
        st.sampled_from([".", "..", "", "%2e", "%2F", "%7e", "a%zz"]),
        st.text(_PATH_CHARS, max_size=6),
    ),
    max_size=6,
)
_QUERIES = st.one_of(
    st.none(), st.text(st.characters(codec="utf-8", exclude_characters="#"), max_size=10)
)


@st.composite
def gemini_urls(draw: st.DrawFn) -> str:
    host = draw(_HOSTS)
    port = draw(st.sampled_from(["", ":1965", ":1", ":65535", ":8080"]))
    path = "/".join(s.replace("/", "") for s in draw(_SEGMENTS))
    if path and not path.startswith("/"):
        path = "/" + path
    query = draw(_QUERIES)
    scheme = draw(st.sampled_from(["gemini", "GEMINI", "Gemini"]))
    return f"{scheme}://{host}{port}{path}" + ("" if query is None else "?" + query)


@given(gemini_urls())
def test_normalisation_is_idempotent(text: str) -> None:
    url = parse_url(text)
    again = parse_url(str(url))
    assert again == url
    assert str(again) == str(url)
    assert str(url).isascii()


@given(gemini_urls())
def test_normalised_url_is_stable_under_re_resolution(text: str) -> None:
    url = parse_url(text)
    assert url.join(str(url)) == url
    assert url.join("//" + url.authority + url.path_query) == url
    if not url.path.startswith("//"):
        assert url.join(url.path_query) == url
    if url.query is None:
        last = url.path.rsplit("/", 1)[1]
        if last and ":" not in last:
            assert url.join(last) == url
    assert parse_request(request_line(url)) == url if len(str(url)) <= MAX_REQUEST_BYTES else True


@given(st.text(max_size=60))
def test_parse_url_raises_only_invalid_url(text: str) -> None:
    try:
        url = parse_url(text)
    except urls.InvalidURL:
        return
    assert parse_url(str(url)) == url


@given(st.binary(max_size=80))
def test_parse_request_raises_only_invalid_url(line: bytes) -> None:
    try:
        url = parse_request(b"gemini://h/" + line)
    except urls.InvalidURL:
        return
    assert url.host == "h"
    assert str(url).isascii()
