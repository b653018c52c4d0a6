"""Titles, front matter, a URL's words and snippet marks (geminibot.index.text), and what
extraction makes of them."""

from __future__ import annotations

import pytest

from geminibot.crawl.page import MAX_LINKS_PER_PAGE, extract
from geminibot.index.query import Term
from geminibot.index.search import text_snippet
from geminibot.index.text import (
    MARK,
    MAX_TITLE_LENGTH,
    clean_title,
    mark_spans,
    name_title,
    render_marks,
    split_front_matter,
    url_words,
)

URL = "gemini://h.test/notes/my_first-post.gmi"


def extracted(body: str, mime: str = "text/gemini", url: str = URL) -> tuple[str, str]:
    page = extract(url, "h.test", 20, mime, body.encode(), 0.0).page
    return page.title, page.text or ""


@pytest.mark.parametrize(
    ("body", "mime", "title"),
    [
        ("intro\n## The heading\ntext", "text/gemini", "The heading"),
        ("\n\nFirst words of text\n## Later", "text/gemini", "Later"),
        ("\n\nFirst words of text\nmore", "text/gemini", "First words of text"),
        ("=> other.gmi A link label\n", "text/gemini", "A link label"),
        ("=> other.gmi\n```\nart\n```\n", "text/gemini", "my first post"),
        ("", "text/gemini", "my first post"),
        ("# Baking **Cheatsheet**\n\ntext", "text/markdown", "Baking Cheatsheet"),
        ("intro line\n# Heading", "text/markdown", "Heading"),
        ("# not a heading in plain text\nx", "text/plain", "not a heading in plain text"),
        (
            '+++ type = "blog" title = "[GSoC] ARM port" +++\n\nbody',
            "text/gemini",
            "[GSoC] ARM port",
        ),
        ('+++\ntitle = "Spaced"\n+++\nbody', "text/gemini", "Spaced"),
        ("---\ntitle: Getting it to run\n---\nbody", "text/gemini", "Getting it to run"),
        ("### [A link](gemini://x.test/) and <b>tags</b>", "text/gemini", "A link and tags"),
    ],
)
def test_title_of_a_page(body: str, mime: str, title: str) -> None:
    assert extracted(body, mime)[0] == title


def test_long_title_is_cut_at_a_word() -> None:
    words = " ".join(f"word{n}" for n in range(400))
    for body in (f"# {words}", words, "\n".join([words] * 20)):
        title, _ = extracted(body)
        assert len(title) <= MAX_TITLE_LENGTH and title.endswith("…")
        assert title[:-1].split(" ")[-1] in words.split(" ")  # whole words only
    assert clean_title("x" * 500) == "x" * (MAX_TITLE_LENGTH - 1) + "…"  # one long word


def test_front_matter_is_searched_but_not_a_snippet() -> None:
    body = '+++\ntype = "blog"\ntitle = "T"\nauthor = "zhihong"\n+++\n\nThe real text.'
    _, text = extracted(body)
    assert "zhihong" in text and "The real text." in text
    found = text_snippet(split_front_matter(text)[1], [Term("real")])
    assert "zhihong" not in found and "real" in found
    assert split_front_matter("---\ntitle: x\n---\nrest") == ("x", "rest")
    assert split_front_matter("--- not front matter\n") == ("", "--- not front matter\n")
    unclosed = "+++\n" + "key = 1\n" * 100 + "+++\ntext"
    assert split_front_matter(unclosed) == ("", unclosed)  # too long to be front matter


def test_name_title() -> None:
    assert name_title("gemini://h.test/a/eiffel_outside-view.gmi") == "eiffel outside view"
    assert name_title("gemini://h.test/recipes/index.gmi") == "recipes"
    assert name_title("gemini://h.test/") == "h.test"
    assert name_title("gemini://h.test/f%C3%BCr%20alle.txt") == "für alle"


def test_url_words() -> None:
    assert url_words("gemini://h.test/images/eiffel_outside.jpg") == "images eiffel outside jpg"
    assert (
        url_words("gemini://h.test/gemlog/2024-05-21_New.Hobby.gmi")
        == "gemlog 2024 05 21 New Hobby"
    )
    assert url_words("gemini://h.test/") == ""
    assert url_words("https://www.drew.example/2020/How-to.html?p=1062#n40", whole=True) == (
        "www drew example 2020 How to p 1062 n40"
    )


def test_unlabeled_link_words_are_in_the_page_text() -> None:
    _, text = extracted("Look:\n=> /images/eiffel_outside.jpg\n=> /b.gmi Labelled\n")
    assert "eiffel outside" in text and "Labelled" in text


def test_marks_cannot_be_confused_with_the_text() -> None:
    snippet = f'["OpenJDK] {MARK[0]}port{MARK[1]} ⟦x⟧'
    assert render_marks(snippet, "⟦", "⟧") == '["OpenJDK] ⟦port⟧ x'
    assert mark_spans(snippet) == ('["OpenJDK] port ⟦x⟧', [(11, 15)])
    _, text = extracted(f"page text with {MARK[0]}fake{MARK[1]} marks")
    assert MARK[0] not in text and MARK[1] not in text


def test_every_link_says_its_url_words_and_preformatted_alt_text_is_text() -> None:
    body = (
        "=> xfs.gmi#id1 Directories\n"
        "=> https://www.salixos.example/forum/viewtopic.php?p=1062 Shador's script\n"
        "``` home/pi/RetroPie/splashscreens ```\n"
        "``` home/pi/RetroPie/RDmanuals ```\n"
    )
    _, text = extracted(body)
    for word in (
        "xfs",
        "id1",
        "salixos",
        "viewtopic",
        "1062",
        "splashscreens",
        "RDmanuals",
        "Directories",
    ):
        assert word in text.split() or word in text


def test_a_page_of_many_links_gives_url_words_of_the_first_only() -> None:
    body = "".join(f"=> /w{n}.gmi label{n}\n" for n in range(MAX_LINKS_PER_PAGE + 5))
    _, text = extracted(body)
    assert f"w{MAX_LINKS_PER_PAGE - 1}" in text.split()
    assert f"w{MAX_LINKS_PER_PAGE}" not in text.split()
    assert f"label{MAX_LINKS_PER_PAGE + 4}" in text.split()  # labels are all text
