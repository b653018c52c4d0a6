"""HTML for the portal: text/gemini rendered to clean, accessible HTML, and the portal's own
pages (refusal, error, input form, home). Pure functions: strings in, strings out.

Everything that came from the network (page text, link labels and URLs, meta lines,
policy file lines, certificate data) goes through :func:`esc` before it reaches HTML.
No page has JavaScript; the one style sheet is inline and pinned by its hash in the
Content-Security-Policy (:data:`CSP`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html import escape

from geminibot.gemini.gemtext import (
    HeadingLine,
    Line,
    LinkLine,
    ListItem,
    Preformatted,
    QuoteLine,
    TextLine,
)

#: Schemes a link may keep as it is (external links are left alone); any other scheme
#: (``javascript:``, ``data:``, ``file:``...) is shown as text, never as a link.
LINKABLE_SCHEMES = frozenset(
    {"gemini", "http", "https", "gopher", "finger", "spartan", "titan", "mailto", "news", "ftp"}
)
PORTAL_NAME = "geminibot portal"

CSS = """
:root{color-scheme:light dark;--bg:#fdfdfb;--fg:#1d1d1f;--muted:#5b5b66;--link:#0645ad;
--visited:#5a3696;--strip:#eef1f6;--line:#d5d9e0;--pre:#f3f3f0;--warn:#8a1c1c;--ok:#1e5e2f}
@media (prefers-color-scheme:dark){:root{--bg:#16181d;--fg:#e6e6e6;--muted:#a3a8b3;
--link:#8ab4f8;--visited:#c58af9;--strip:#20242c;--line:#343a46;--pre:#1e2128;
--warn:#ff8a80;--ok:#81c995}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:1.05rem/1.6 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.strip{background:var(--strip);border-bottom:1px solid var(--line);padding:.5rem 1rem;
font-size:.85rem;color:var(--muted)}
.strip p{margin:.15rem auto;max-width:46rem;overflow-wrap:anywhere}
.strip .url{color:var(--fg);font-family:ui-monospace,Menlo,Consolas,monospace}
.strip .home{font-weight:600;color:var(--fg);text-decoration:none}
main,footer{max-width:46rem;margin:0 auto;padding:1rem}
footer{color:var(--muted);font-size:.8rem;border-top:1px solid var(--line)}
h1,h2,h3{line-height:1.25;margin:1.4rem 0 .6rem}
h1{font-size:1.9rem}h2{font-size:1.45rem}h3{font-size:1.2rem}
p{margin:.5rem 0}
a{color:var(--link)}a:visited{color:var(--visited)}
p.link{margin:.25rem 0}p.link a::before{content:"\\2192\\00a0";color:var(--muted)}
a.external::after{content:"\\00a0\\2197";font-size:.8em}
blockquote{margin:.8rem 0;padding:.1rem 1rem;border-left:4px solid var(--line);
color:var(--muted);font-style:italic}
pre{background:var(--pre);padding:.8rem;overflow-x:auto;border-radius:4px;
font:.9rem/1.35 ui-monospace,Menlo,Consolas,monospace}
ul{padding-left:1.4rem}
code{font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
.notice{border:1px solid var(--line);border-left:6px solid var(--warn);padding:.6rem 1rem;
background:var(--strip);border-radius:4px}
.rule{font-size:1rem;border-left-color:var(--warn)}
.ok{color:var(--ok)}.warn{color:var(--warn)}
form{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:1rem 0}
label{flex-basis:100%}
input{flex:1;min-width:12rem;font:inherit;padding:.4rem;border:1px solid var(--line);
background:var(--bg);color:var(--fg);border-radius:4px}
button{font:inherit;padding:.4rem 1rem;border-radius:4px;border:1px solid var(--line);
background:var(--strip);color:var(--fg);cursor:pointer}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid var(--line)}
figcaption,.window{color:var(--muted);font-size:.85rem}
table{border-collapse:collapse}td,th{padding:.1rem .5rem;border-bottom:1px solid var(--line);text-align:left}
td.n{text-align:right;white-space:nowrap}
""".strip()
_CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
#: The Content-Security-Policy of every HTML page: no script at all, only the inline style
#: sheet above, forms post back to the portal, nothing embeds the portal.
CSP = (
    f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
#: The CSP of a page with images inline (the census's charts): :data:`CSP`, and images
#: from ``data:`` URLs.
CSP_INLINE_IMAGES = CSP.replace("img-src 'self'", "img-src 'self' data:")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LANG = re.compile(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*")


def esc(text: str) -> str:
    """Text for HTML content or a quoted attribute; lone surrogates become U+FFFD."""
    return escape(_SURROGATE.sub("\ufffd", text), quote=True)


def safe_lang(value: str | None) -> str | None:
    """The first tag of a text/gemini ``lang`` parameter, if it is a well-formed tag."""
    if not value:
        return None
    first = value.split(",")[0].strip()
    return first if _LANG.fullmatch(first) else None


@dataclass(frozen=True, slots=True)
class Strip:
    """What the header strip shows about the page's Gemini side."""

    gemini_url: str
    certificate: str | None = None
    trust: str | None = None  # "new", "trusted", "changed"
    previous: str | None = None


def scheme_of(url: str) -> str | None:
    m = re.match(r"([A-Za-z][A-Za-z0-9+.\-]*):", url)
    return m.group(1).lower() if m else None


@dataclass(frozen=True, slots=True)
class Budget:
    """The most one page may cost to render: gemtext lines read, links resolved, and
    characters of HTML written (see :mod:`geminibot.portal.limits`)."""

    lines: int
    links: int
    chars: int


@dataclass(frozen=True, slots=True)
class Rendered:
    """A page body as HTML; ``cut`` names the budget that stopped it (None: whole)."""

    html: str
    title: str | None = None
    cut: str | None = None


class _Out:
    """HTML written against a character budget; :meth:`text` escapes and cuts."""

    def __init__(self, chars: int) -> None:
        self.parts: list[str] = []
        self.left = chars
        self.full = False

    def raw(self, html: str) -> None:
        if html:
            self.parts.append(html)
        self.left -= len(html)

    def text(self, text: str) -> None:
        """``text`` escaped, as much of it as the budget holds (never half an entity)."""
        for start in range(0, len(text), _SLICE):
            piece = esc(text[start : start + _SLICE])
            if len(piece) > self.left:
                piece = piece[: max(0, self.left)]
                amp = piece.rfind("&")
                if amp > piece.rfind(";"):
                    piece = piece[:amp]
                self.full = True
            self.raw(piece)
            if self.full:
                return


#: Characters of a page's first heading kept as its title (the title is outside the
#: page's character budget).
TITLE_CHARS = 200
#: Characters escaped at a time (bounds the copy one long line makes).
_SLICE = 64 * 1024
_GROUPS: dict[type, str] = {ListItem: "ul", QuoteLine: "blockquote", TextLine: "p"}


def render_gemtext(
    lines: Iterable[Line], href: Callable[[str], str | None], budget: Budget
) -> Rendered:
    """Gemtext lines (:func:`~geminibot.gemini.gemtext.iter_gemtext`, read lazily) as HTML,
    within ``budget``: the lines after the budget runs out are never read. ``href`` maps
    a link's absolute URL to the address the page should use (a portal address for Gemini
    pages it serves), or None to keep the URL as written (external schemes); a scheme
    outside :data:`LINKABLE_SCHEMES` is text. Consecutive text lines make one paragraph
    (their line breaks kept), consecutive list items one list, quote lines one quote."""
    out = _Out(budget.chars)
    title: str | None = None
    group: str | None = None  # the open paragraph, list or quote
    read = links = 0
    cut: str | None = None
    for line in lines:
        read += len(line.lines) + 2 if isinstance(line, Preformatted) else 1
        links += isinstance(line, LinkLine)
        if read > budget.lines or links > budget.links:
            cut = "lines" if read > budget.lines else "links"
            break
        if title is None and isinstance(line, HeadingLine):
            title = line.text[:TITLE_CHARS]
        kind = _GROUPS.get(type(line))
        if isinstance(line, TextLine) and not line.text.strip():
            kind = None
        if kind is None or kind != group:
            out.raw(_CLOSE.get(group, ""))
            group = None
            if kind is None and isinstance(line, TextLine):  # blank: ends a paragraph
                continue
            out.raw(("\n" if out.parts else "") + _OPEN.get(kind, ""))
            group = kind
        elif kind == "p":
            out.raw("<br>\n")
        _line(line, href, out)
        if out.full:
            cut = "characters"
            break
    out.raw(_CLOSE.get(group, ""))
    return Rendered("".join(out.parts), title, cut)


_OPEN: dict[str | None, str] = {"ul": "<ul>", "blockquote": "<blockquote>", "p": "<p>"}
_CLOSE: dict[str | None, str] = {"ul": "</ul>", "blockquote": "</blockquote>", "p": "</p>"}


def _line(line: Line, href: Callable[[str], str | None], out: _Out) -> None:
    if isinstance(line, ListItem):
        out.raw("<li>")
        out.text(line.text)
        out.raw("</li>")
    elif isinstance(line, QuoteLine):
        if line.text:
            out.raw("<p>")
            out.text(line.text)
            out.raw("</p>")
    elif isinstance(line, TextLine):
        out.text(line.text)  # a blank line: nothing (it ends a paragraph)
    elif isinstance(line, HeadingLine):
        out.raw(f"<h{line.level}>")
        out.text(line.text)
        out.raw(f"</h{line.level}>")
    elif isinstance(line, LinkLine):
        out.raw(f'<p class="link">{link_html(line.url, line.label, href)}</p>')
    elif isinstance(line, Preformatted):
        label = f' aria-label="{esc(line.alt)}"' if line.alt else ""
        out.raw(f'<pre{label} tabindex="0">')
        out.text("\n".join(line.lines))
        out.raw("</pre>")


def render_text(text: str, budget: Budget) -> Rendered:
    """Plain text (any text type but gemtext) as one preformatted block within ``budget``."""
    out = _Out(budget.chars)
    out.raw('<pre tabindex="0">')
    out.text(text)
    out.raw("</pre>")
    return Rendered("".join(out.parts), None, "characters" if out.full else None)


def link_html(url: str, label: str, href: Callable[[str], str | None]) -> str:
    text = esc(label or url)
    target = href(url)
    if target is not None:
        return f'<a href="{esc(target)}">{text}</a>'
    if scheme_of(url) in LINKABLE_SCHEMES:
        title = f' title="{esc(url)}"' if label else ""
        return f'<a class="external" href="{esc(url)}" rel="noopener noreferrer"{title}>{text}</a>'
    return f"{text} <code>{esc(url)}</code>"


def page(
    title: str,
    body: str,
    *,
    home: str,
    strip: Strip | None = None,
    lang: str | None = None,
    about: str = "",
) -> str:
    """A whole HTML page around ``body`` (HTML already escaped)."""
    lang_attr = f' lang="{esc(lang)}"' if lang else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="robots" content="noindex,nofollow">\n'
        f"<title>{esc(title)} \u2013 {PORTAL_NAME}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + strip_html(strip, home)
        + f"<main{lang_attr}>\n{body}\n</main>\n"
        + "<footer><p>This portal shows Gemini capsules to web browsers and obeys each "
        "capsule's robots.txt for the <code>webproxy</code> virtual agent (and "
        "robots2.txt and agents.txt): a page a capsule keeps from web proxies is not "
        f"shown. {about}</p></footer>\n</body>\n</html>\n"
    )


def strip_html(strip: Strip | None, home: str) -> str:
    parts = [f'<a class="home" href="{esc(home)}">{PORTAL_NAME}</a>']
    if strip is None:
        return f'<header class="strip"><p>{parts[0]}</p></header>\n'
    url = esc(strip.gemini_url)
    parts.append(f'<span class="url">{url}</span>')
    parts.append(f'<a href="{url}">open in a Gemini client</a>')
    html = '<header class="strip" aria-label="Gemini page">\n<p>' + " \u00b7 ".join(parts) + "</p>"
    if strip.certificate:
        fp = f"<code>{esc(strip.certificate)}</code>"
        if strip.trust == "changed":
            was = f" (pinned before: <code>{esc(strip.previous or '?')}</code>)"
            note = f'<span class="warn">certificate CHANGED since first seen</span>{was}'
        elif strip.trust == "new":
            note = "first seen now: pinned (trust on first use)"
        else:
            note = '<span class="ok">matches the pinned certificate</span>'
        html += f'\n<p class="cert">certificate SHA-256 {fp} \u2014 {note}</p>'
    return html + "\n</header>\n"


def notice(heading: str, paragraphs: Iterable[str]) -> str:
    """A heading and paragraphs of already escaped HTML."""
    return f"<h1>{esc(heading)}</h1>\n" + "\n".join(f"<p>{p}</p>" for p in paragraphs)


def input_form(prompt: str, action: str, *, sensitive: bool) -> str:
    """The form for a ``10`` (text) or ``11`` (password) prompt; it posts to ``action``."""
    kind = "password" if sensitive else "text"
    note = (
        "<p>This is sensitive input (status 11): it is sent to the capsule and not kept in "
        "your browser's address bar.</p>"
        if sensitive
        else ""
    )
    return (
        f"<h1>{esc(prompt) or 'Input requested'}</h1>\n{note}\n"
        f'<form method="post" action="{esc(action)}">\n'
        f'<label for="input">{esc(prompt) or "Your input"}</label>\n'
        f'<input id="input" name="input" type="{kind}" required maxlength="1024" '
        'autocomplete="off">\n<button type="submit">Send</button>\n</form>'
    )


def quote_block(text: str) -> str:
    return f'<p class="notice rule"><code>{esc(text)}</code></p>'
