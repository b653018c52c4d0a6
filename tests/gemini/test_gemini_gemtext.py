"""The text/gemini parser: every line type, link resolution, preformatted blocks, title."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from geminibot.gemini.gemtext import (
    HeadingLine,
    LinkLine,
    ListItem,
    Preformatted,
    QuoteLine,
    TextLine,
    parse_gemtext,
)
from geminibot.gemini.urls import parse_url

PAGE = """\
Intro text
## Second-level first
# Main title
=> other.gmi   Other page
=>/abs
=>\tgemini://Other.TEST:1965/x/../y\tTabbed label
=> https://example.org/ The web
=>
* item one
*not an item
>quoted
```ascii-art
# not a heading
=> not/a/link
```
#### deep
"""


def test_every_line_type() -> None:
    doc = parse_gemtext(PAGE, parse_url("gemini://h.test/dir/page.gmi"))
    assert doc.lines == (
        TextLine("Intro text"),
        HeadingLine(2, "Second-level first"),
        HeadingLine(1, "Main title"),
        LinkLine("gemini://h.test/dir/other.gmi", "Other page", "other.gmi"),
        LinkLine("gemini://h.test/abs", "", "/abs"),
        LinkLine("gemini://other.test/y", "Tabbed label", "gemini://Other.TEST:1965/x/../y"),
        LinkLine("https://example.org/", "The web", "https://example.org/"),
        TextLine("=>"),
        ListItem("item one"),
        TextLine("*not an item"),
        QuoteLine("quoted"),
        Preformatted("ascii-art", ("# not a heading", "=> not/a/link")),
        HeadingLine(3, "# deep"),
    )
    assert doc.title == "Second-level first"
    assert [link.url for link in doc.links][:2] == [
        "gemini://h.test/dir/other.gmi",
        "gemini://h.test/abs",
    ]


def test_crlf_line_ends_and_unclosed_block() -> None:
    doc = parse_gemtext("# T\r\n```\r\nraw\r\n")
    assert doc.lines == (HeadingLine(1, "T"), Preformatted("", ("raw",)))


def test_without_base_links_stay_as_written() -> None:
    (link,) = parse_gemtext("=> rel.gmi x").links
    assert link.url == "rel.gmi"


def test_invalid_gemini_link_is_kept_resolved_but_not_normalised() -> None:
    (link,) = parse_gemtext("=> gemini://bad!host/./x label", "gemini://h.test/").links
    assert (link.url, link.label) == ("gemini://bad!host/x", "label")
    (link,) = parse_gemtext("=> //u@h/x", "gemini://h.test/").links
    assert link.url == "gemini://u@h/x"


def test_no_heading_no_title() -> None:
    assert parse_gemtext("just text\n").title is None
    assert parse_gemtext("").lines == ()


@given(st.text(max_size=200))
def test_any_text_parses(text: str) -> None:
    parse_gemtext(text, "gemini://h.test/a/b")
