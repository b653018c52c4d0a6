"""HTML to what the index keeps: title, headings, text, links, language, robots meta (pure).

Built on the standard library's ``html.parser`` (a tolerant tokenizer; no dependency
added). :func:`parse_html` never raises and reads at most :data:`MAX_HTML_CHARS`, in time
linear in its length (:data:`MAX_PENDING_CHARS`).

- Text: every text node outside ``script``, ``style``, ``noscript``, ``template``, ``svg``
  and ``head`` (the ``title`` apart), one line per block element, whitespace collapsed.
- Title: ``<title>``, else the first heading. Headings: ``h1`` to ``h6``.
- Links: ``<a href>`` and ``<area href>`` in page order, resolved against ``<base href>``
  (the first one, if it is an http(s) URL) or the page URL; ``javascript:``, ``mailto:``
  and ``data:`` links and fragment-only links are dropped; at most :data:`MAX_LINKS` are
  kept.
- ``<meta name="robots">`` (and ``name="geminibot"``): ``noindex`` and ``nofollow`` (``none``
  means both) are reported, so the crawler can obey them; so does an ``X-Robots-Tag``
  header given by the caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from geminibot.urls import resolve_reference

#: Most characters of a document parsed (the body is already capped by the client).
MAX_HTML_CHARS = 4 * 1024 * 1024
#: Most links kept from one page.
MAX_LINKS = 1_000
#: Longest tag, comment or declaration read as one (characters): one still unfinished
#: after this many is dropped up to the next ">", and one unfinished at the end of the
#: document longer than MAX_PENDING_AT_END is dropped (as a browser drops an unclosed
#: comment). Python's
#: html.parser searches an unfinished construct again on each feed and, at the end, once
#: for every "<" in it: without these bounds 100 KB of "<a b='>'" took two minutes.
MAX_PENDING_CHARS = 64 * 1024
MAX_PENDING_AT_END = 4096
_FEED_CHARS = 64 * 1024
#: A "<" that starts no tag, comment or declaration: text, which html.parser hands over one
#: character at a time (a page of them took 40 s); as "&lt;" it is text at once.
_LONE_LT = re.compile(r"<(?![A-Za-z/!?])")
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
_BLOCK = frozenset(
    {
        *("address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt"),
        *("fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4"),
        *("h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section"),
        *("table", "td", "th", "tr", "ul", "title"),
    }
)
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}
    | {"track", "wbr"}
)
_DROPPED_SCHEMES = ("javascript:", "mailto:", "data:", "tel:", "about:")
_SPACE = re.compile(r"\s+")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


@dataclass(frozen=True)
class HTMLLink:
    """A link of an HTML page: where it leads and its text."""

    url: str
    """Resolved against the base URL (not normalised: the caller knows the schemes)."""
    label: str


@dataclass(frozen=True)
class HTMLDocument:
    """What the crawler keeps of an HTML page: title, headings, text, links, language and its
    robots meta directives."""

    title: str = ""
    headings: tuple[str, ...] = ()
    text: str = ""
    links: tuple[HTMLLink, ...] = ()
    lang: str | None = None
    noindex: bool = False
    nofollow: bool = False


def sniff_charset(body: bytes) -> str | None:
    """The charset a ``<meta>`` in the first 1024 bytes declares, if any."""
    m = _META_CHARSET.search(body[:1024])
    return m.group(1).decode("ascii").lower() if m else None


def robots_directives(value: str) -> tuple[bool, bool]:
    """(noindex, nofollow) from a robots meta or X-Robots-Tag value (user-agent prefixes
    such as ``googlebot: noindex`` are read only for ``geminibot``)."""
    noindex = nofollow = False
    for part in value.lower().split(","):
        name, colon, rest = part.partition(":")
        if colon and name.strip() not in ("geminibot", "*"):
            continue
        words = set((rest if colon else part).split())
        noindex = noindex or bool(words & {"noindex", "none"})
        nofollow = nofollow or bool(words & {"nofollow", "none"})
    return noindex, nofollow


def _drop_pending(parser: HTMLParser, limit: int) -> bool:
    """Drop the parser's unfinished construct if it is longer than ``limit``."""
    pending: str = getattr(parser, "rawdata", "")
    if len(pending) <= limit:
        return False
    parser.rawdata = ""
    return True


@dataclass
class _State:
    """What :class:`_Parser` has read so far of one page."""

    base: str
    stack: list[str] = field(default_factory=list)
    skip_depth: int = 0
    lines: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    title: list[str] = field(default_factory=list)
    in_title: bool = False
    heading: list[str] | None = None
    headings: list[str] = field(default_factory=list)
    link: tuple[str, list[str]] | None = None
    links: list[HTMLLink] = field(default_factory=list)
    base_seen: bool = False
    lang: str | None = None
    noindex: bool = False
    nofollow: bool = False


class _Parser(HTMLParser):
    """Reads an HTML page into :class:`_State` (the standard library's tolerant parser)."""

    def __init__(self, base: str) -> None:
        super().__init__(convert_charrefs=True)
        self.s = _State(base)

    def _flush(self) -> None:
        line = _SPACE.sub(" ", "".join(self.s.current)).strip()
        if line:
            self.s.lines.append(line)
        self.s.current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        s = self.s
        a = {k: (v or "") for k, v in attrs}
        self._read_document_tag(tag, a)
        if tag in _VOID:
            if tag == "br":
                self._flush()
            elif tag == "area":
                self._add_link(a.get("href"), a.get("alt", ""))
            return
        s.stack.append(tag)
        if tag in _SKIP:
            s.skip_depth += 1
        if tag in _BLOCK:
            self._flush()
        if tag in _HEADINGS:
            s.heading = []
        if tag == "a":
            s.current.append(" ")  # adjacent links are separate words
            if "href" in a:
                s.link = (a["href"], [])

    def _read_document_tag(self, tag: str, a: dict[str, str]) -> None:
        """What <html lang>, <base>, <meta name=robots>, <title> and <body> say of the
        document as a whole."""
        s = self.s
        if tag == "html" and a.get("lang"):
            s.lang = a["lang"].strip()[:35] or None
        elif tag == "base" and "href" in a and not s.base_seen:
            s.base_seen = True
            base = resolve_reference(s.base, a["href"].strip())
            if base.lower().startswith(("http://", "https://")):  # not javascript:, data:
                s.base = base
        elif tag == "meta" and a.get("name", "").lower() in ("robots", "geminibot"):
            noindex, nofollow = robots_directives(a.get("content", ""))
            s.noindex, s.nofollow = s.noindex or noindex, s.nofollow or nofollow
        elif tag == "title":
            s.in_title = True
        elif tag == "body" and "head" in s.stack:
            self.handle_endtag("head")  # a <head> left open ends where the body starts

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        s = self.s
        if tag not in s.stack:
            return  # a stray end tag closes nothing
        while s.stack:
            open_tag = s.stack.pop()
            self._close(open_tag)
            if open_tag == tag:
                break

    def _close(self, tag: str) -> None:
        s = self.s
        if tag in _SKIP:
            s.skip_depth -= 1
        if tag == "title":
            s.in_title = False
        if tag in _HEADINGS and s.heading is not None:
            text = _SPACE.sub(" ", "".join(s.heading)).strip()
            if text:
                s.headings.append(text)
            s.heading = None
        if tag == "a":
            s.current.append(" ")
            if s.link is not None:
                href, label = s.link
                self._add_link(href, _SPACE.sub(" ", "".join(label)).strip())
                s.link = None
        if tag in _BLOCK:
            self._flush()

    def _add_link(self, href: str | None, label: str) -> None:
        s = self.s
        if href is None or len(s.links) >= MAX_LINKS:
            return
        href = href.strip()
        if not href or href.startswith("#") or href.lower().startswith(_DROPPED_SCHEMES):
            return
        target = resolve_reference(s.base, href).partition("#")[0]
        if target.lower().startswith(_DROPPED_SCHEMES):
            return
        s.links.append(HTMLLink(target, label))

    def handle_data(self, data: str) -> None:
        s = self.s
        if s.in_title:
            s.title.append(data)
            return
        if s.skip_depth:
            return
        s.current.append(data)
        if s.heading is not None:
            s.heading.append(data)
        if s.link is not None:
            s.link[1].append(data)


def parse_html(text: str, url: str) -> HTMLDocument:
    """Read an HTML document fetched from ``url``; never raises (see module docstring)."""
    parser = _Parser(url)
    try:
        text = _LONE_LT.sub("&lt;", text[:MAX_HTML_CHARS])
        skipping = False
        for start in range(0, len(text), _FEED_CHARS):
            chunk = text[start : start + _FEED_CHARS]
            if skipping:  # the rest of a construct dropped for its length, up to its ">"
                end = chunk.find(">")
                if end == -1:
                    continue
                chunk, skipping = chunk[end + 1 :], False
            parser.feed(chunk)
            skipping = _drop_pending(parser, MAX_PENDING_CHARS)
        _drop_pending(parser, MAX_PENDING_AT_END)
        parser.close()
    except Exception:  # html.parser is tolerant; keep whatever was read before a fault
        pass
    s = parser.s
    while s.stack:
        parser._close(s.stack.pop())
    parser._flush()
    title = _SPACE.sub(" ", "".join(s.title)).strip() or (s.headings[0] if s.headings else "")
    return HTMLDocument(
        title=title,
        headings=tuple(s.headings),
        text="\n".join(s.lines),
        links=tuple(s.links),
        lang=s.lang,
        noindex=s.noindex,
        nofollow=s.nofollow,
    )
