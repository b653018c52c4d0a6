"""The census's gemtext (``census --gemtext`` and the search capsule's ``/census``) against
labels from the network: each stays a line of its table's preformatted block, visible,
and nothing of it is read as gemtext (a link, a heading)."""

from __future__ import annotations

from geminibot.census.model import Census, Figure, Section
from geminibot.census.render import as_gemtext, as_text
from geminibot.cliutil import LINE_WIDTH
from geminibot.gemini.gemtext import HeadingLine, LinkLine, Preformatted, parse_gemtext

#: Labels a server chooses (a MIME type, a charset, an issuer's name...).
HOSTILE = {
    "```": 1,
    "```=> gemini://evil.test/ click here": 2,
    "text/x\n=> gemini://evil.test/ again\n# A heading": 3,
    "`" * 80: 4,
    "text/gemini": 5,
}


def census(labels: dict[str, int | float]) -> Census:
    figure = Figure("content.mime", "MIME types of 20 answers", labels, "the crawl")
    after = Figure("uris.known", "URIs known", 7, "the crawl")
    return Census(1.7e9, 1.6e9, 1.7e9, (Section("Content", (figure, after)),))


def test_hostile_labels_stay_inside_their_block() -> None:
    text = as_gemtext(census(HOSTILE))
    doc = parse_gemtext(text)
    assert not any(isinstance(line, LinkLine) for line in doc.lines)
    assert [line.text for line in doc.lines if isinstance(line, HeadingLine)] == [
        "Census of Geminispace as crawled",
        "Content",
    ]
    (block,) = (line for line in doc.lines if isinstance(line, Preformatted))
    assert block.alt == "content.mime"
    assert len(block.lines) == len(HOSTILE)
    assert block.lines[0].rstrip().endswith(" 1") and block.lines[0].startswith(" ```")
    assert block.lines[1].startswith(" ```=> gemini://evil.test/ click here")
    assert block.lines[2].startswith("text/x\\x0a=> gemini://evil.test/ again\\x0a# A")
    assert block.lines[4].startswith("text/gemini ")
    assert all(len(line) <= LINE_WIDTH for line in block.lines)
    assert "* URIs known (the crawl): 7" in text  # the figure after the block is its own


def test_the_terminal_table_is_not_shifted() -> None:
    """The space that keeps a label inside a gemtext block is gemtext's only."""
    assert "\n    ```  " in as_text(census(HOSTILE))
