"""The portal's own search (``/search?q=QUERY``, ``&p=N`` for page N): the crawl database
the portal reads for ``/check`` (``--db``) searched as ``geminibot search`` and the search
capsule search it, operators included; results in HTML, each searched word in ``<mark>``
(the capsule's ``⟦ ⟧`` are for gemtext), each result linked to its portal address.
Pure HTML from results; the reads happen in :mod:`geminibot.portal.app`."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from geminibot.index.search import SearchResult
from geminibot.index.search_cli import search_function
from geminibot.index.text import render_marks
from geminibot.portal.render import esc
from geminibot.store.database import Database

#: Results a page, and the furthest page.
PAGE_SIZE = 10
MAX_PAGE = 50
#: The search box's label (the query syntax in short).
SEARCH_LABEL = 'Search (words, "a phrase", -word, site:, intitle:, mime:, size:<10k, lang:de)'


def find_page(query: str, page: int, database: Database) -> tuple[list[SearchResult], bool]:
    """Page ``page`` of the results for ``query`` in ``database`` (either store), and
    whether another page follows."""
    find = search_function(database)
    found = find(database.connection, query, PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE)
    return found[:PAGE_SIZE], len(found) > PAGE_SIZE


def search_form(asked: str = "") -> str:
    """The search box (GET ``/search``, field ``q``), holding what was asked."""
    return (
        '<form method="get" action="/search" role="search">\n'
        f'<label for="q">{esc(SEARCH_LABEL)}</label>\n'
        f'<input id="q" name="q" type="search" value="{esc(asked)}" required>\n'
        '<button type="submit">Search</button>\n</form>'
    )


def results_html(
    asked: str,
    results: list[SearchResult],
    page: int,
    more: bool,
    href: Callable[[str], str | None],
) -> str:
    """The results page: the box, then each result (title linked, URL, snippet with its
    searched words in ``<mark>``, type and size), then links to the pages around it."""
    parts = [f"<h1>Search: {esc(asked)}</h1>", search_form(asked)]
    if not results:
        parts.append("<p>No results.</p>" if page == 1 else "<p>No more results.</p>")
    for result in results:
        target = href(result.url) or result.url
        snippet = render_marks(esc(result.snippet), "<mark>", "</mark>")
        parts.append(
            f'<section class="result">\n<h2><a href="{esc(target)}">'
            f"{esc(result.title or result.url)}</a>{esc(result.language_note(None))}</h2>\n"
            f'<p class="link"><code>{esc(result.url)}</code> · {esc(result.kind())}</p>\n'
            f"<p>{snippet}</p>\n</section>"
        )
    around = []
    if page > 1:
        around.append(f'<a href="/search?{_query(asked, page - 1)}">Previous page</a>')
    if more and page < MAX_PAGE:
        around.append(f'<a href="/search?{_query(asked, page + 1)}">Next page</a>')
    if around:
        parts.append('<p class="link">' + " · ".join(around) + "</p>")
    return "\n".join(parts)


def _query(asked: str, page: int) -> str:
    return esc(urlencode({"q": asked, "p": page}))
