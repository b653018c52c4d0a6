"""What one hostile response can do to the crawler's page extraction: nothing.

A server-chosen charset that is no text encoding reads as UTF-8; a
page of a million links costs about its own size, not a million objects (item 19).
"""

from __future__ import annotations

import pytest
from fresh_python import run_python

from geminibot.crawl.page import MAX_LINKS_PER_PAGE, extract, extract_web

NO_CHARSETS = ["rot13", "base64", "hex", "zlib", "bz2", "idna", "undefined", "punycode"]
BODY = "# Caf\u00e9\n=> /next uryyb\n".encode()


@pytest.mark.parametrize("charset", NO_CHARSETS)
def test_gemini_page_in_a_charset_that_is_no_text_encoding(charset: str) -> None:
    page = extract("gemini://h.test/", "h.test", 20, f"text/gemini; charset={charset}", BODY, 0)
    assert page.page.title == "Caf\u00e9"
    assert page.links == ("gemini://h.test/next",)


@pytest.mark.parametrize("charset", NO_CHARSETS)
def test_web_page_in_a_charset_that_is_no_text_encoding(charset: str) -> None:
    html = b"<title>Caf\xc3\xa9</title><a href=/next>uryyb</a>"
    for meta, body in [
        (f"text/html; charset={charset}", html),
        ("text/html", f"<meta charset={charset}>".encode() + html),
    ]:
        page = extract_web("https://h.test/", "h.test", 200, meta, body, 0)
        assert page.page.title == "Caf\u00e9"
        assert page.links == ("https://h.test/next",)
    plain = extract_web("https://h.test/", "h.test", 200, f"text/plain; charset={charset}", BODY, 0)
    assert plain.page.title == "Caf\u00e9"  # the line marker removed


MEASURE = """
import sys, tracemalloc
from geminibot.crawl.page import extract
count = int(sys.argv[1])
body = "".join(f"=> /p{i} link {i}\\n" for i in range(count)).encode()
tracemalloc.start()
extracted = extract("gemini://h.test/", "h.test", 20, "text/gemini", body, 0.0)
peak = tracemalloc.get_traced_memory()[1]
print(len(body), peak, len(extracted.links), len(extracted.page.text))
"""


def test_a_page_of_many_links_costs_about_its_own_size() -> None:
    """Peak memory of extracting a 100,000-link page (a hundred times the cap), measured
    by tracemalloc in a fresh interpreter: the text decoded, the page text and the capped
    links, about 2.7 times the body; before the links were streamed it was some 15 times
    (a cost per link: the same ratio at any count past the cap)."""
    size, peak, links, text = map(int, run_python(MEASURE, "100000").split())
    assert links == MAX_LINKS_PER_PAGE
    assert text > 0
    assert peak < 3 * size, f"peak {peak} bytes for a {size}-byte page"
