"""The HTML renderer on its own: escaping, links, structure (pure functions)."""

from __future__ import annotations

from geminibot.gemini.gemtext import parse_gemtext
from geminibot.portal.render import (
    CSP,
    TITLE_CHARS,
    Budget,
    Strip,
    esc,
    page,
    render_gemtext,
    safe_lang,
)

ROOMY = Budget(lines=1000, links=1000, chars=100_000)


def no_rewrite(url: str) -> str | None:
    return None


def test_escaping_covers_attributes_and_lone_surrogates() -> None:
    assert esc("<a href=\"x\" onclick='y'>&") == (
        "&lt;a href=&quot;x&quot; onclick=&#x27;y&#x27;&gt;&amp;"
    )
    assert esc("bad \udcff byte") == "bad \ufffd byte"


def test_links_by_scheme() -> None:
    doc = parse_gemtext(
        "=> gemini://a.test/x Gem\n=> https://w.test/?a=1&b=2 Web\n"
        "=> javascript:alert(1) JS\n=> data:text/html,<b> Data\n=> mailto:a@b.test\n"
        '=> gemini://a.test/"onmouseover=x Quote\n',
        base="gemini://a.test/",
    )
    html = render_gemtext(
        doc.lines, lambda u: "/g/" + u[9:] if u.startswith("gemini://") else None, ROOMY
    ).html
    assert '<a href="/g/a.test/x">Gem</a>' in html
    assert 'href="https://w.test/?a=1&amp;b=2"' in html
    assert "JS <code>javascript:alert(1)</code>" in html
    assert "Data <code>data:text/html,&lt;b&gt;</code>" in html
    assert 'href="mailto:a@b.test"' in html
    assert '"onmouseover' not in html  # quotes in a URL cannot leave the attribute


def test_structure() -> None:
    doc = parse_gemtext("# T\n## U\n### V\nline one\nline two\n\nnext\n* a\n> q\n```\nx\n```\n")
    html = render_gemtext(doc.lines, no_rewrite, ROOMY).html
    assert html.split("\n") == [
        "<h1>T</h1>",
        "<h2>U</h2>",
        "<h3>V</h3>",
        "<p>line one<br>",
        "line two</p>",
        "<p>next</p>",
        "<ul><li>a</li></ul>",
        "<blockquote><p>q</p></blockquote>",
        '<pre tabindex="0">x</pre>',
    ]


def test_lang_is_checked() -> None:
    assert safe_lang("en-GB,fr") == "en-GB"
    assert safe_lang('en" onload="x') is None
    assert safe_lang(None) is None


def test_page_has_no_script_and_says_noindex() -> None:
    html = page("A <title>", "<p>x</p>", home="/", strip=Strip("gemini://a.test/<x>"), lang="de")
    assert "<title>A &lt;title&gt; \u2013 geminibot portal</title>" in html
    assert '<meta name="robots" content="noindex,nofollow">' in html
    assert '<main lang="de">' in html
    assert "gemini://a.test/&lt;x&gt;" in html
    assert "<script" not in html
    assert "script-src" not in CSP and "default-src 'none'" in CSP


def links(count: int) -> str:
    return "".join(f"=> gemini://a.test/p{i} link {i}\n" for i in range(count))


def test_link_budget_edge() -> None:
    budget = Budget(lines=100, links=3, chars=100_000)
    whole = render_gemtext(parse_gemtext(links(3)).lines, no_rewrite, budget)
    cut = render_gemtext(parse_gemtext(links(4)).lines, no_rewrite, budget)
    assert (whole.cut, whole.html.count("<a ")) == (None, 3)
    assert (cut.cut, cut.html.count("<a ")) == ("links", 3)


def test_line_budget_edge() -> None:
    """A preformatted block counts its rows and its two fences."""
    budget = Budget(lines=5, links=100, chars=100_000)
    whole = render_gemtext(parse_gemtext("# a\n```\nx\ny\n```\n").lines, no_rewrite, budget)
    cut = render_gemtext(parse_gemtext("# a\n```\nx\ny\nz\n```\n").lines, no_rewrite, budget)
    assert (whole.cut, whole.title) == (None, "a")
    assert cut.cut == "lines"
    assert "<pre" not in cut.html  # the block that did not fit is left out whole


def test_character_budget_edge() -> None:
    """Escaped text counts as written (``"`` is six characters); an entity is never cut
    in half; the markup that closes the page is not counted."""
    lines = parse_gemtext('a"b').lines
    whole = render_gemtext(lines, no_rewrite, Budget(10, 10, len("<p>a&quot;b")))
    cut = render_gemtext(lines, no_rewrite, Budget(10, 10, len("<p>a&quot;b") - 1))
    assert (whole.cut, whole.html) == (None, "<p>a&quot;b</p>")
    assert (cut.cut, cut.html) == ("characters", "<p>a&quot;</p>")
    shorter = render_gemtext(lines, no_rewrite, Budget(10, 10, len("<p>a&quot;") - 1))
    assert shorter.html == "<p>a</p>"


def test_title_edge() -> None:
    """The first heading is the page's title, cut at TITLE_CHARS (it is outside the
    page's character budget)."""
    for length in (TITLE_CHARS, TITLE_CHARS + 1):
        lines = parse_gemtext("# " + "t" * length + "\n## second").lines
        assert render_gemtext(lines, no_rewrite, ROOMY).title == "t" * TITLE_CHARS
