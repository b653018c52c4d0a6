"""What a page says about itself, made readable: its title, its text without front matter,
the words of a URL, and the highlighted words of a snippet (pure functions).

- :func:`page_title`: the first heading, else the title of the page's front matter, else
  its first line of text, else a readable form of its file name (:func:`name_title`); Markdown
  and gemtext markers and HTML tags removed, at most :data:`MAX_TITLE_LENGTH` characters,
  cut at a word (:func:`clean_title`).
- :func:`split_front_matter`: a Hugo/Jekyll front matter block (``+++ ... +++`` or
  ``--- ... ---``) at the top of a page, which is metadata, not text to show or search.
- :func:`url_words`: the words of a URL's path (segments split on ``-``, ``_``, ``.``,
  ``/``), which stand for an unlabeled link's text; a page's text holds each of its
  links' URL words (host and path) beside the link's label.
- :data:`MARK`: the two characters marking a searched word in a snippet, private-use
  code points that page text is cleared of (:func:`unmarked`), so that each display
  renders them its own way and a page's own brackets are never taken for them.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

#: Longest title kept, in characters (cut at a word, the cut shown by "…").
MAX_TITLE_LENGTH = 120
#: Most lines a front matter block may span; a longer "block" is text, not front matter.
MAX_FRONT_MATTER_LINES = 60
#: Start and end of a highlighted word in a snippet (private-use code points).
MARK = ("\ue000", "\ue001")
#: Longest URL read for its words, in characters (URLs are bounded before, but be safe).
MAX_URL_WORDS_CHARS = 2_000

_TOML_TITLE = re.compile(r"""\btitle\s*[=:]\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\n]+))""")
_HTML_TAG = re.compile(r"<[^<>]{0,2000}>")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_LEADING = re.compile(r"^(?:\s*(?:=>|#{1,6}|[*+>-]|\d+[.)]|```)\s*)+")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`+|~~)")
_SPACE = re.compile(r"\s+")
_URL_SPLIT = re.compile(r"[-_./\s~+,;=&?!:()\[\]{}'\"]+")
_EXTENSIONS = frozenset({"gmi", "gemini", "gmni", "md", "txt", "html", "htm"})


def split_front_matter(text: str) -> tuple[str, str]:
    """(the front matter's title or "", ``text`` without its front matter block).

    A block opens on the first non-blank line with ``+++`` or a line ``---`` and closes at
    the next line ending in the same marker, within :data:`MAX_FRONT_MATTER_LINES`
    lines; ``+++ key = "value" ... +++`` on one line is a block too."""
    stripped = text.lstrip()
    marker = "+++" if stripped.startswith("+++") else "---" if stripped.startswith("---\n") else ""
    if not marker:
        return "", text
    lines = stripped.split("\n", MAX_FRONT_MATTER_LINES + 1)
    first = lines[0].rstrip()
    if marker == "+++" and len(first) > 6 and first.endswith("+++"):
        return _front_title(first[3:-3]), "\n".join(lines[1:])
    for n, line in enumerate(lines[1 : MAX_FRONT_MATTER_LINES + 1], 1):
        if line.rstrip().endswith(marker) and (marker == "+++" or line.rstrip() == marker):
            block = "\n".join([first[3:], *lines[1:n], line.rstrip()[: -len(marker)]])
            return _front_title(block), "\n".join(lines[n + 1 :])
    return "", text


def _front_title(block: str) -> str:
    m = _TOML_TITLE.search(block)
    if m is None:
        return ""
    value = m.group(1) if m.group(1) is not None else m.group(2) or m.group(3) or ""
    return value.replace('\\"', '"').strip().strip("'\"")


def clean_title(text: str, limit: int = MAX_TITLE_LENGTH) -> str:
    """``text`` as a title: HTML tags, Markdown links and emphasis, and the line markers of
    gemtext and Markdown (``#``, ``=>``, ``*``, ``>``, list numbers) removed; one line; at
    most ``limit`` characters, cut at a word."""
    line = _SPACE.sub(" ", _MD_LINK.sub(r"\1", _HTML_TAG.sub(" ", text[: limit * 20])))
    line = _EMPHASIS.sub("", _LEADING.sub("", line)).strip()
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-–—") + "…"


def name_title(url: str) -> str:
    """A readable form of ``url``'s file name: ``/posts/my_first-post.gmi`` -> ``my first
    post``; a folder's name, or the host's for its root."""
    try:
        parts = urlsplit(url[:MAX_URL_WORDS_CHARS])
    except ValueError:
        return clean_title(url)
    segments = [s for s in unquote(parts.path).split("/") if s]
    if not segments:
        return clean_title(parts.hostname or url)
    name = segments[-1]
    stem, dot, ext = name.rpartition(".")
    if dot and stem and ext.lower() in _EXTENSIONS:
        name = stem
    if name.lower() in {"index", "default"} and len(segments) > 1:
        name = segments[-2]
    return clean_title(" ".join(w for w in re.split(r"[-_\s]+", name) if w)) or clean_title(url)


def page_title(heading: str | None, front: str, first_line: str, url: str) -> str:
    """The title of a page (see the module docstring): the first of ``heading``, ``front``
    (its front matter's title) and ``first_line`` that leaves text once cleaned, else
    :func:`name_title` of ``url``."""
    for candidate in (heading, front, first_line):
        if candidate:
            title = clean_title(candidate)
            if any(c.isalnum() for c in title):
                return title
    return name_title(url)


def url_words(url: str, *, whole: bool = False) -> str:
    """The words of ``url``'s path (with ``whole``, of its host name, path, query and
    fragment), percent-decoded and split on ``-``, ``_``, ``.``, ``/`` (and other
    punctuation): ``/images/eiffel_outside.jpg`` -> ``images eiffel outside jpg``; the
    extensions of pages (``.gmi``, ``.md``...) left out."""
    try:
        parts = urlsplit(url[:MAX_URL_WORDS_CHARS])
    except ValueError:
        return ""
    text = unquote(parts.path)
    if whole:
        text = " ".join((parts.hostname or "", text, unquote(parts.query), parts.fragment))
    words = [w for w in _URL_SPLIT.split(text) if w]
    return " ".join(w for w in words if w.lower() not in _EXTENSIONS)


def unmarked(text: str) -> str:
    """``text`` without the :data:`MARK` characters (page text, before it is marked)."""
    return text.replace(MARK[0], "").replace(MARK[1], "")


def render_marks(snippet: str, start: str, end: str) -> str:
    """``snippet`` with its :data:`MARK` pairs shown as ``start`` and ``end``; where the
    text itself holds ``start`` or ``end``, they are removed first, so that what is shown
    as a highlight is one."""
    for literal in (start, end):
        if literal:
            snippet = snippet.replace(literal, "")
    return snippet.replace(MARK[0], start).replace(MARK[1], end)


def mark_spans(snippet: str) -> tuple[str, list[tuple[int, int]]]:
    """``snippet`` without its marks, and the (start, end) character offsets of each
    highlighted stretch in that text (for ``--json``)."""
    spans: list[tuple[int, int]] = []
    plain: list[str] = []
    length = 0
    start = 0
    for char in snippet:
        if char == MARK[0]:
            start = length
        elif char == MARK[1]:
            spans.append((start, length))
        else:
            plain.append(char)
            length += 1
    return "".join(plain), spans
