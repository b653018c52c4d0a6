"""HTML extraction (pure): text, title, headings, links, robots meta; never raises."""

from __future__ import annotations

import pytest
from fresh_python import run_python
from hypothesis import given
from hypothesis import strategies as st

from geminibot.crawl.page import MAX_LINKS_PER_PAGE, extract_web
from geminibot.http.html import (
    MAX_LINKS,
    MAX_PENDING_CHARS,
    parse_html,
    robots_directives,
    sniff_charset,
)

URL = "https://site.test/dir/page.html"


def test_text_title_headings_links() -> None:
    doc = parse_html(
        "<!doctype html><html lang='fr'><head><title> Le  titre </title>"
        "<style>p{color:red}</style><script>var hidden = 1;</script></head>"
        "<body><h1>Grand</h1><p>Un <b>paragraphe</b>\n avec  espaces.</p>"
        "<ul><li>un<li>deux</ul><a href='other.html'>autre <i>page</i></a>"
        "<a href='/abs#frag'>abs</a><a href='#top'>top</a><a href='mailto:x@y'>m</a>"
        "<a href='javascript:void(0)'>js</a><a href='gemini://cap.test/'>capsule</a>"
        "<area href='/map' alt='carte'><noscript>no script text</noscript></body></html>",
        URL,
    )
    assert doc.title == "Le titre"
    assert doc.lang == "fr"
    assert doc.headings == ("Grand",)
    lines = [
        "Grand",
        "Un paragraphe avec espaces.",
        "un",
        "deux",
        "autre page abs top m js capsule",
    ]
    assert doc.text.splitlines() == lines
    assert [(link.url, link.label) for link in doc.links] == [
        ("https://site.test/dir/other.html", "autre page"),
        ("https://site.test/abs", "abs"),
        ("gemini://cap.test/", "capsule"),
        ("https://site.test/map", "carte"),
    ]
    assert "hidden" not in doc.text and "color" not in doc.text and "no script" not in doc.text


def test_base_href_unclosed_head_and_title_fallback() -> None:
    doc = parse_html(
        "<head><base href='https://cdn.test/x/'><body><h2>Only heading</h2><a href=y>y</a>", URL
    )
    assert doc.links[0].url == "https://cdn.test/x/y"
    assert doc.title == "Only heading"
    assert "Only heading" in doc.text  # the body after an unclosed <head> is read


def test_robots_meta_and_header() -> None:
    assert parse_html("<meta name='robots' content='noindex, nofollow'>", URL).noindex
    doc = parse_html("<meta name='ROBOTS' content='none'>", URL)
    assert doc.noindex and doc.nofollow
    assert not parse_html("<meta name='googlebot' content='noindex'>", URL).noindex
    assert robots_directives("googlebot: noindex") == (False, False)
    assert robots_directives("geminibot: nofollow") == (False, True)
    assert robots_directives("noindex") == (True, False)


def test_charset_sniffing_and_limits() -> None:
    assert sniff_charset(b"<meta charset='ISO-8859-1'>") == "iso-8859-1"
    assert (
        sniff_charset(b'<meta http-equiv=Content-Type content="text/html; charset=koi8-r">')
        == "koi8-r"
    )
    latin = "<meta charset=iso-8859-1><title>caf\xe9</title>".encode("latin-1")
    page = extract_web(URL, "https://site.test", 200, "text/html", latin, 0.0).page
    assert page.title == "café"
    many = "".join(f"<a href='/{i}'>{i}</a>" for i in range(MAX_LINKS + 50))
    assert len(parse_html(many, URL).links) == MAX_LINKS
    assert MAX_LINKS <= MAX_LINKS_PER_PAGE


def test_extract_web_statuses_and_types() -> None:
    host = "https://site.test"
    redirect = extract_web(URL, host, 301, "/new", b"", 0.0)
    assert redirect.links == ("https://site.test/new",) and redirect.page.redirect_to
    assert extract_web(URL, host, 404, "Not Found", b"gone", 0.0).page.text is None
    plain = extract_web(URL, host, 200, "text/plain", b"first line\nsecond", 0.0).page
    assert (plain.title, plain.text) == ("first line", "first line\nsecond")
    binary = extract_web(URL, host, 200, "image/png", b"\x89PNG", 0.0).page
    assert binary.text is None and binary.mime == "image/png" and binary.size == 4
    for meta in ("", "not a type", ";;"):
        assert extract_web(URL, host, 200, meta, b"<p>x</p>", 0.0).page.text is None
    noindex = extract_web(URL, host, 200, "text/html", b"<p>x</p>", 0.0, "noindex")
    assert noindex.page.text is None and noindex.links == ()


@given(st.text(max_size=400))
def test_never_raises_on_any_text(text: str) -> None:
    parse_html(text, URL)


@given(
    st.lists(
        st.sampled_from(
            [
                "<a href='",
                "'>",
                "</a>",
                "<p>",
                "<script>",
                "</script>",
                "<!--",
                "-->",
                "<title>",
                "&amp;",
                "<![CDATA[",
                "<",
                ">",
                "x",
                "<head>",
                "<body>",
                "</div>",
                "<base href='",
            ]
        ),
        max_size=40,
    )
)
def test_never_raises_on_tag_soup(parts: list[str]) -> None:
    doc = parse_html("".join(parts), URL)
    assert all(link.url for link in doc.links)


HOSTILE = """
import sys
from geminibot.http.html import parse_html
pattern = sys.argv[1]
doc = parse_html("<p>kept</p>" + pattern * (400_000 // len(pattern)), "https://h.test/")
print(doc.text.splitlines()[0])
"""


@pytest.mark.parametrize("pattern", ['<a b=">"', "<a ", "</", "<script>x<"])
def test_unfinished_constructs_cost_linear_time(pattern: str) -> None:
    """Python's html.parser searches to the end of the input for every "<" of an
    unfinished construct (quadratic: 100 KB of the first pattern took two minutes, these
    400 KB would take half an hour); parse_html bounds what it leaves pending. Run in a
    fresh interpreter, so a regression fails at run_python's limit instead of hanging."""
    assert run_python(HOSTILE, pattern).strip() == "kept"


def test_a_long_tag_is_still_read_and_an_unclosed_comment_ends_the_page() -> None:
    big = '<p>a <a href="/x" data-x="' + "y" * 50_000 + '">link</a> b</p>'
    doc = parse_html(big + "<p>after</p><!-- never closed " + "z" * 10_000, "https://h.test/")
    assert [link.url for link in doc.links] == ["https://h.test/x"]
    assert doc.text == "a link b\nafter"


def test_a_tag_longer_than_the_limit_is_dropped_and_the_rest_read() -> None:
    huge = '<img src="data:image/png;base64,' + "A" * (MAX_PENDING_CHARS + 1) + '">'
    doc = parse_html(
        "<p>one &lt; two</p>" + huge + "<p>3 < 4</p><a href=/y>y</a>", "https://h.test/"
    )
    assert doc.text == "one < two\n3 < 4\ny"
    assert [link.url for link in doc.links] == ["https://h.test/y"]
