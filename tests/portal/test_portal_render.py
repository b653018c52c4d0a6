"""The HTML renderer on its own: escaping, links, structure (pure functions)."""

from __future__ import annotations

from geminibot.gemini.gemtext import parse_gemtext
from geminibot.portal.render import CSP, Strip, esc, page, render_gemtext, safe_lang


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
    html = render_gemtext(doc, lambda u: "/g/" + u[9:] if u.startswith("gemini://") else None)
    assert '<a href="/g/a.test/x">Gem</a>' in html
    assert 'href="https://w.test/?a=1&amp;b=2"' in html
    assert "JS <code>javascript:alert(1)</code>" in html
    assert "Data <code>data:text/html,&lt;b&gt;</code>" in html
    assert 'href="mailto:a@b.test"' in html
    assert '"onmouseover' not in html  # quotes in a URL cannot leave the attribute


def test_structure() -> None:
    doc = parse_gemtext("# T\n## U\n### V\nline one\nline two\n\nnext\n* a\n> q\n```\nx\n```\n")
    html = render_gemtext(doc, no_rewrite)
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
