"""A small crawl with hostile pages, written into either store (importable as
``hostile_pages``): pages of megabytes, a keyword-stuffed page with a link farm, and the
honest pages they compete with.

- ``kitchen.test``: honest recipe pages, linked from the trusted ``hub.test`` (the
  crawl's seed, so their host has a trust path);
- ``spam.test/``: titled "recipe poetry", headings "recipe", a body of
  :data:`BIG_PAGE_CHARS` characters that never says recipe, linked as "recipe" from
  :data:`FARM_HOSTS` hosts that nothing trusted links to;
- ``partyN.test/``: :data:`BIG_PAGES` pages of :data:`BIG_PAGE_CHARS` characters titled
  "garden party", whose body never says "party";
- ``edge.test/``: a body exactly :data:`~geminibot.store.pages.MAX_INDEXED_CHARS` long
  ending in :data:`LAST_WORD`, then :data:`PAST_WORD` beyond the limit;
- ``far.test/``: :data:`FAR_WORD` after the first
  :data:`~geminibot.index.search.SNIPPET_SCAN_CHARS` characters, inside the indexed text.
"""

from __future__ import annotations

from typing import Any

from pages import gemtext_page

from geminibot.index.search import SNIPPET_SCAN_CHARS
from geminibot.store.pages import MAX_INDEXED_CHARS, Link, Page

#: Pages of megabytes, as in the attack the limits answer.
BIG_PAGES = 12
BIG_PAGE_CHARS = 4_000_000
#: Hosts of the link farm that links to the stuffed page.
FARM_HOSTS = 6
LAST_WORD = "lastword"
PAST_WORD = "pastword"
FAR_WORD = "farword"
#: What the link farm calls a page of a trusted host (its link text there).
FARM_WORD = "farmword"
#: The honest recipe pages, best first by text.
RECIPES = ["gemini://kitchen.test/lentils", "gemini://kitchen.test/bread"]
SPAM = "gemini://spam.test/"
SEED = "gemini://hub.test/"

_FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod "


def filler(chars: int) -> str:
    """``chars`` characters of words that no test searches for (ends with a space)."""
    return (_FILLER * (chars // len(_FILLER) + 1))[: chars - 1] + " "


def hostile_pages() -> list[Page]:
    """The crawl's pages (see the module docstring)."""
    big = filler(BIG_PAGE_CHARS)
    pages = [
        gemtext_page(
            SEED,
            "A hub of good capsules",
            "Links to kitchens.",
            links=tuple(Link(url, "larder") for url in RECIPES),
        ),
        gemtext_page(
            RECIPES[0],
            "Lentil soup",
            "A recipe for lentil soup. This recipe takes an hour; a good recipe to share.",
        ),
        gemtext_page(RECIPES[1], "Bread", "My bread recipe: flour, water, salt and time."),
        gemtext_page(SPAM, "recipe poetry", big, headings=("recipe", "recipe poetry")),
    ]
    for n in range(FARM_HOSTS):
        url = f"gemini://farm{n}.test/"
        pages.append(
            gemtext_page(
                url,
                f"Farm {n}",
                "Nothing here.",
                links=(Link(SPAM, "recipe"), Link(RECIPES[1], FARM_WORD)),
            )
        )
    for n in range(BIG_PAGES):
        pages.append(gemtext_page(f"gemini://party{n}.test/", "garden party", big))
    edge = filler(MAX_INDEXED_CHARS - len(LAST_WORD)) + LAST_WORD
    assert len(edge) == MAX_INDEXED_CHARS
    pages.append(gemtext_page("gemini://edge.test/", "Edge", f"{edge} {PAST_WORD} more"))
    far = f"Start. {filler(SNIPPET_SCAN_CHARS)}{FAR_WORD} end."
    pages.append(gemtext_page("gemini://far.test/", "Far", far))
    return pages


def fill_sqlite(conn: Any) -> None:
    """The pages into an SQLite store, authority computed from :data:`SEED` (TrustRank),
    and its tantivy index built."""
    from geminibot.index.authority import compute_authority
    from geminibot.index.tantivy_index import rebuild
    from geminibot.store.db import transaction
    from geminibot.store.pages import store_page

    with transaction(conn):
        for page in hostile_pages():
            store_page(conn, page, "indexer")
    compute_authority(conn, [SEED])
    rebuild(conn)


def fill_postgres(url: str) -> None:
    """The pages into the PostgreSQL database at ``url``, authority computed from
    :data:`SEED`."""
    from geminibot.index.authority import compute_authority
    from geminibot.store import pg
    from geminibot.store.authority import write_postgres
    from geminibot.store.pages import write_page
    from geminibot.store.pg_sql import ENGINE

    with pg.connect(url) as conn:
        with conn.transaction():
            for page in hostile_pages():
                write_page(conn, ENGINE, page, "indexer")
        compute_authority(conn, [SEED], write=write_postgres)
