"""The text/gemini parser: every line type, link resolution, preformatted blocks, title."""

from __future__ import annotations

from typing import Any, SupportsIndex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geminibot.gemini.gemtext import (
    HeadingLine,
    LinkLine,
    ListItem,
    Preformatted,
    QuoteLine,
    TextLine,
    iter_gemtext,
    iter_links,
    parse_gemtext,
    preformatted_line,
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


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("```", " ```"),  # exactly the toggle
        ("```=> gemini://evil.test/ x", " ```=> gemini://evil.test/ x"),
        ("````", " ````"),
        ("``", "``"),  # two backticks toggle nothing
        ("a```", "a```"),
        (" ```", " ```"),  # not at the start: no toggle
        ("a\n```", "a ```"),
        ("\n```", " ```"),
        ("a\r\n# b\u2028c", "a # b c"),
        ("", ""),
    ],
)
def test_preformatted_line_at_its_edges(text: str, line: str) -> None:
    assert preformatted_line(text) == line


@given(st.text(max_size=60))
def test_a_preformatted_line_stays_inside_its_block(text: str) -> None:
    """Whatever the text, the block holds it as its one line, nothing of it lost but its
    line breaks, and nothing follows the block."""
    doc = parse_gemtext(f"```alt\n{preformatted_line(text)}\n```\n")
    assert len(doc.lines) == 1
    block = doc.lines[0]
    assert isinstance(block, Preformatted)
    assert len(block.lines) == 1
    kept = "".join(c for c in text if c not in "\n\r\v\f\x85\u2028\u2029 ")
    assert block.lines[0].replace(" ", "") == kept


def test_iter_gemtext_gives_the_lines_of_parse_gemtext() -> None:
    text = "# T\r\n=> a A\n```x\n=> not a link\n```\n* i\n> q\n\nlast"
    assert (
        tuple(iter_gemtext(text, "gemini://h.test/"))
        == parse_gemtext(text, "gemini://h.test/").lines
    )
    (link,) = (line for line in iter_gemtext("=> a A") if isinstance(line, LinkLine))
    assert link == LinkLine("a", "A", "a")  # no base: not resolved


def test_iter_links_stops_at_its_limit() -> None:
    text = "```\n=> /pre\n```\n=> /1\n=>\n=> /2 two\ntext\n=> /3\n"
    links = [link.url for link in iter_links(text, "gemini://h.test/")]
    assert links == ["gemini://h.test/1", "gemini://h.test/2", "gemini://h.test/3"]
    assert [link.url for link in iter_links(text, "gemini://h.test/", 2)] == links[:2]
    assert list(iter_links(text, "gemini://h.test/", 0)) == []


def test_iter_links_reads_no_further_than_its_limit() -> None:
    class Watched(str):
        """A text that records how far it has been searched."""

        furthest = 0

        def find(self, sub: str, start: SupportsIndex | None = None, *args: Any) -> int:
            found = super().find(sub, start, *args)
            Watched.furthest = max(Watched.furthest, found)
            return found

    head = "=> /1\n=> /2\n"
    text = Watched(head + "=> /x\n" * 100_000)
    assert [link.raw_url for link in iter_links(text, "gemini://h.test/", 2)] == ["/1", "/2"]
    assert Watched.furthest < len(head)
