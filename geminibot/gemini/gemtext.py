"""A text/gemini parser: lines in, typed lines out; no I/O, never raises.

Line types (specification section 5): text, ``=>`` link (URL, then an optional label after
whitespace), ```` ``` ```` preformatting toggle (the text after the opening toggle is the
block's alt text; an unclosed block runs to the end), ``#``/``##``/``###`` headings, ``* ``
list items and ``>`` quotes. Link URLs are resolved against the page's URL; a resolved
``gemini://`` URL is normalised (see :mod:`geminibot.gemini.urls`). The title is the text
of the first heading of any level.

For writing gemtext: :func:`preformatted_line`, text from the network made safe as a line
inside a preformatted block.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from geminibot.gemini.urls import parse_url
from geminibot.urls import URL, InvalidURL, resolve_reference

#: The preformatting toggle: a line whose first three characters these are opens or
#: closes a preformatted block.
TOGGLE = "```"
#: What a reader might take for the end of a line: LF and CR (gemtext's), and the
#: other breaks some clients honour (VT, FF, NEL, Unicode's line and paragraph separators).
_BREAKS = re.compile(r"[\n\r\v\f\x85\u2028\u2029]+")


@dataclass(frozen=True, slots=True)
class TextLine:
    """A plain text line."""

    text: str


@dataclass(frozen=True, slots=True)
class LinkLine:
    """A link line (``=> URL label``)."""

    url: str
    """Absolute when the page URL was given; normalised when it is a valid gemini:// URL."""
    label: str
    raw_url: str
    """The URL exactly as written on the line."""


@dataclass(frozen=True, slots=True)
class HeadingLine:
    """A heading line (``#``, ``##`` or ``###``: ``level`` 1 to 3)."""

    level: int
    text: str


@dataclass(frozen=True, slots=True)
class ListItem:
    """A list item (``* text``)."""

    text: str


@dataclass(frozen=True, slots=True)
class QuoteLine:
    """A quote line (``> text``)."""

    text: str


@dataclass(frozen=True, slots=True)
class Preformatted:
    """A whole preformatted block: its alt text and its lines, verbatim; ``after``, any
    text after its closing toggle (which clients do not show, though authors write it)."""

    alt: str
    lines: tuple[str, ...]
    after: str = ""


Line = TextLine | LinkLine | HeadingLine | ListItem | QuoteLine | Preformatted


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed gemtext page: its lines in order, with its title and links."""

    lines: tuple[Line, ...]

    @property
    def title(self) -> str | None:
        for line in self.lines:
            if isinstance(line, HeadingLine):
                return line.text
        return None

    @property
    def links(self) -> tuple[LinkLine, ...]:
        return tuple(line for line in self.lines if isinstance(line, LinkLine))


def parse_gemtext(text: str, base: URL | str | None = None) -> Document:
    """Parse a text/gemini document; ``base`` is the page's URL for resolving links.

    Lines end with LF or CR LF (other Unicode line breaks are text). For a document from
    a stranger, prefer :func:`iter_gemtext` or :func:`iter_links`: they hold one line at
    a time, where this holds them all.
    """
    return Document(tuple(iter_gemtext(text, base)))


def iter_gemtext(text: str, base: URL | str | None = None) -> Iterator[Line]:
    """The lines of :func:`parse_gemtext`, one at a time, as the text is read.

    Without ``base`` link URLs are not resolved (``url`` is ``raw_url``), which costs
    nothing: a caller that wants only some links resolves those with
    :func:`resolve_link`. A preformatted block comes whole when it closes.
    """
    base_text = str(base) if base is not None else None
    pre_alt: str | None = None
    pre_lines: list[str] = []
    for raw in _rows(text):
        if raw.startswith(TOGGLE):
            if pre_alt is None:
                pre_alt = raw[3:].strip()
                pre_lines = []
            else:
                yield Preformatted(pre_alt, tuple(pre_lines), raw[3:].strip())
                pre_alt = None
        elif pre_alt is not None:
            pre_lines.append(raw)
        elif raw.startswith("=>"):
            yield _link(raw, base_text)
        elif raw.startswith("#"):
            level = len(raw) - len(raw.lstrip("#"))
            level = min(level, 3)
            yield HeadingLine(level, raw[level:].strip())
        elif raw.startswith("* "):
            yield ListItem(raw[2:].strip())
        elif raw.startswith(">"):
            yield QuoteLine(raw[1:].strip())
        else:
            yield TextLine(raw)
    if pre_alt is not None:
        yield Preformatted(pre_alt, tuple(pre_lines))


def iter_links(
    text: str, base: URL | str | None = None, limit: int | None = None
) -> Iterator[LinkLine]:
    """The link lines of a document, in order, resolved against ``base``; at most
    ``limit`` of them: the text after the last one taken is not read."""
    if limit is not None and limit <= 0:
        return
    base_text = str(base) if base is not None else None
    taken = 0
    in_pre = False
    for raw in _rows(text):
        if raw.startswith(TOGGLE):
            in_pre = not in_pre
        elif not in_pre and raw.startswith("=>"):
            line = _link(raw, base_text)
            if isinstance(line, LinkLine):
                yield line
                taken += 1
                if taken == limit:
                    return


def _rows(text: str) -> Iterator[str]:
    """The lines of ``text`` without their LF or CR LF, found one at a time."""
    start = 0
    end = len(text)
    while start < end:
        stop = text.find("\n", start)
        if stop == -1:
            stop = end
        row = text[start:stop]
        yield row[:-1] if row.endswith("\r") else row
        start = stop + 1


def _link(raw: str, base: str | None) -> Line:
    parts = raw[2:].strip().split(maxsplit=1)
    if not parts:
        return TextLine(raw)  # "=>" with no URL: nothing to link to
    raw_url = parts[0]
    label = parts[1].strip() if len(parts) > 1 else ""
    return LinkLine(resolve_link(raw_url, base), label, raw_url)


def resolve_link(raw_url: str, base: str | None) -> str:
    """Resolve a link against the page URL and normalise it if it is a valid Gemini URL."""
    url = resolve_reference(base, raw_url) if base is not None else raw_url
    if url[:9].lower() == "gemini://":
        try:
            return str(parse_url(url))
        except InvalidURL:
            return url
    return url


def preformatted_line(text: str) -> str:
    """``text`` (which may come from the network) as one line that stays inside a
    preformatted block: its line breaks as spaces, and a space before it when it starts
    with the toggle (:data:`TOGGLE`), which would otherwise close the block and let what
    follows be read as gemtext (links, headings). The text stays visible as it was."""
    line = _BREAKS.sub(" ", text)
    return " " + line if line.startswith(TOGGLE) else line
