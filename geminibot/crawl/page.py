"""From one Gemini (or http(s): :func:`extract_web`) response to what the index keeps and the frontier grows by (pure).

- ``20`` with ``text/gemini``: title (:func:`geminibot.index.text.page_title`),
  headings, text (every line, each link's label, preformatted blocks with their alt text
  and any text after their closing toggle, front matter too; after them all, the words of
  each link's URL as written), links (resolved and normalised);
- ``20`` with another ``text/*``: decoded text (its title: the first Markdown heading or
  the first line after any front matter), no links;
- ``20`` with anything else: metadata only (MIME type, size, content hash);
- ``3x``: the redirect target is recorded and becomes a link;
- other statuses: the status and meta line only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from types import MappingProxyType

from geminibot.gemini.errors import InvalidMeta
from geminibot.gemini.gemtext import HeadingLine, LinkLine, Preformatted, iter_gemtext
from geminibot.gemini.gemtext import resolve_link as resolve
from geminibot.gemini.response import MimeType, decode_text, decodes_as_declared, parse_mime
from geminibot.http.html import parse_html, robots_directives, sniff_charset
from geminibot.index.text import (
    clean_title,
    name_title,
    page_title,
    split_front_matter,
    unmarked,
    url_words,
)
from geminibot.store.pages import Link, Page, file_text

#: Most links taken from one page, and whose URL words go into its text (the rest are
#: ignored but for their labels; a trap bound).
MAX_LINKS_PER_PAGE = 1_000


@dataclass(frozen=True)
class Extracted:
    """A fetched page as the index takes it, and the links found in it."""

    page: Page
    links: tuple[str, ...]  # absolute URLs to consider for the frontier, in page order


class _Joined:
    """Non-empty strings joined by newlines, kept as a few large pieces, not one per line."""

    _BATCH = 4096

    def __init__(self) -> None:
        self._done: list[str] = []
        self._batch: list[str] = []

    def add(self, word: str) -> None:
        if word:
            self._batch.append(word)
            if len(self._batch) >= self._BATCH:
                self._done.append("\n".join(self._batch))
                self._batch = []

    def text(self) -> str:
        return "\n".join([*self._done, *self._batch] if self._batch else self._done)


def content_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def extract(
    url: str, host: str, status: int, meta: str, body: bytes, fetched_at: float
) -> Extracted:
    """What one response contributes (see module docstring); never raises."""
    base = Page(url=url, host=host, status=status, meta=meta, fetched_at=fetched_at)
    if 30 <= status <= 39:
        target = resolve(meta.strip(), url)
        return Extracted(replace(base, redirect_to=target, links=(Link(target),)), (target,))
    if not 20 <= status <= 29:
        return Extracted(base, ())
    try:
        mime = parse_mime(meta)
    except InvalidMeta:
        return Extracted(replace(base, size=len(body), content_hash=content_hash(body)), ())
    base = replace(base, size=len(body), content_hash=content_hash(body), mime=mime.essence)
    if not mime.essence.startswith("text/"):
        return Extracted(file_page(base, url) if is_file_type(mime.essence) else base, ())
    decoded = decode_text(body, mime)
    base = replace(base, charset_ok=decodes_as_declared(body, decoded, mime))
    text = unmarked(decoded)
    if not mime.is_gemtext:
        return Extracted(_text_page(base, text, url, mime.essence), ())
    return _gemtext_page(base, mime, text, url)


#: Non-text answers made searchable by their links: these major types, and these types.
FILE_MAJOR_TYPES = frozenset({"image", "audio", "video"})
FILE_TYPES = frozenset(
    {
        "application/pdf",
        "application/epub+zip",
        "application/zip",
        "application/gzip",
        "application/x-gzip",
        "application/x-tar",
        "application/x-bzip2",
        "application/x-xz",
        "application/x-7z-compressed",
        "application/vnd.rar",
        "application/x-rar-compressed",
    }
)


def is_file_type(essence: str) -> bool:
    """Whether answers of the MIME type ``essence`` are files found by their links."""
    return essence in FILE_TYPES or essence.split("/", 1)[0] in FILE_MAJOR_TYPES


def file_page(base: Page, url: str) -> Page:
    """A file (image, audio, video, PDF, archive) as a searchable document, its body never
    read: its text the words of its path and file name and its MIME type, its title its
    file name; the store adds the labels of the links to it
    (:func:`geminibot.store.pages.with_labels`)."""
    essence = base.mime or ""
    return replace(base, title=name_title(url), text=file_text(url_words(url), essence))


def _text_page(base: Page, text: str, url: str, essence: str) -> Page:
    """A text page other than gemtext: its text, and its title (of Markdown, the first
    heading in its first lines; front matter is not a first line)."""
    front, rest = split_front_matter(text)
    first = ""
    heading = None
    for n, line in enumerate(rest.splitlines()):
        if heading is not None or n >= _TITLE_SCAN_LINES or (first and essence != MARKDOWN):
            break
        if line.startswith("#") and essence == MARKDOWN:
            heading = line
        first = first or line.strip()
    return replace(base, title=page_title(heading, front, first, url), text=text)


def _gemtext_page(base: Page, mime: MimeType, text: str, url: str) -> Extracted:
    """A text/gemini page: title, headings, text and links."""
    # One line at a time, links resolved only up to the cap: a page of a million links
    # costs its text, not a million objects.
    front, rest = split_front_matter(text)
    title: str | None = None
    first = label = ""  # the first line of text; the first link's label
    links: list[Link] = []
    headings: list[str] = []
    words = _Joined()
    words.add(text[: len(text) - len(rest)].strip())  # front matter: searched, not shown
    addresses = _Joined()  # links' URL words, after the text: snippets show the text first
    for line in iter_gemtext(rest):
        if isinstance(line, LinkLine):
            words.add(line.label)
            if len(links) < MAX_LINKS_PER_PAGE:  # past it, a link's URL is not even read
                target = resolve(line.raw_url, url)
                links.append(Link(target, line.label))
                addresses.add(url_words(line.raw_url, whole=True))  # as written: #fragment too
            label = label or line.label.strip()
        elif isinstance(line, HeadingLine):
            title = line.text if title is None else title
            headings.append(line.text)
        elif isinstance(line, Preformatted):
            words.add(line.alt)
            for row in line.lines:
                words.add(row)
            words.add(line.after)
        else:
            words.add(line.text)
            first = first or line.text.strip()
    page = replace(
        base,
        lang=mime.lang,
        title=page_title(title, front, first or label, url),
        headings=tuple(headings),
        text="\n".join(t for t in (words.text(), addresses.text()) if t),
        links=tuple(links),
    )
    return Extracted(page, tuple(link.target for link in links))


MARKDOWN = "text/markdown"
#: Lines of a Markdown page looked at for a heading to be its title.
_TITLE_SCAN_LINES = 50
#: MIME types read as HTML.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def extract_web(
    url: str,
    host: str,
    status: int,
    meta: str,
    body: bytes,
    fetched_at: float,
    robots_tag: str = "",
) -> Extracted:
    """What one http(s) response contributes; ``meta`` is the Content-Type of a 2xx and
    the Location of a 3xx, ``robots_tag`` the X-Robots-Tag header. Never raises.

    HTML is read by :func:`geminibot.http.html.parse_html`; ``noindex`` (meta robots or
    X-Robots-Tag) keeps metadata only, ``nofollow`` keeps no links."""
    base = Page(url=url, host=host, status=status, meta=meta, fetched_at=fetched_at)
    if 300 <= status <= 399:
        if not meta.strip():
            return Extracted(base, ())
        target = resolve(meta.strip(), url)
        return Extracted(replace(base, redirect_to=target, links=(Link(target),)), (target,))
    if not 200 <= status <= 299:
        return Extracted(base, ())
    base = replace(base, size=len(body), content_hash=content_hash(body))
    try:
        mime = parse_mime(meta) if meta.strip() else None
    except InvalidMeta:
        mime = None
    if mime is None:
        return Extracted(base, ())
    base = replace(base, mime=mime.essence)
    header_noindex, header_nofollow = robots_directives(robots_tag)
    if mime.essence in HTML_TYPES:
        return _html_page(base, mime, body, url, header_noindex, header_nofollow)
    if not mime.essence.startswith("text/") or header_noindex:
        return Extracted(base, ())
    return Extracted(_text_page(base, unmarked(decode_text(body, mime)), url, mime.essence), ())


def _html_page(
    base: Page, mime: MimeType, body: bytes, url: str, noindex: bool, nofollow: bool
) -> Extracted:
    """An HTML page (charset sniffed if the header gives none); ``noindex`` and
    ``nofollow`` are the X-Robots-Tag's, the page's own meta robots are added."""
    if "charset" not in mime.params:
        sniffed = sniff_charset(body)
        if sniffed:
            mime = MimeType(mime.essence, MappingProxyType({"charset": sniffed}))
    doc = parse_html(decode_text(body, mime), url)
    if noindex or doc.noindex:
        return Extracted(base, ())
    links = () if nofollow or doc.nofollow else doc.links[:MAX_LINKS_PER_PAGE]
    page = replace(
        base,
        lang=doc.lang,
        title=clean_title(doc.title) or name_title(url),
        headings=doc.headings,
        text=doc.text,
        links=tuple(Link(link.url, link.label) for link in links),
    )
    return Extracted(page, tuple(link.url for link in links))
