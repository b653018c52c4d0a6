"""The derived tantivy index and link authority: built from the store, used by search
while current, FTS5 otherwise; link text and TrustRank in the ranking; the CLI."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tantivy
from commands import run_main
from pages import gemtext_page

from geminibot.index import QueryError, search
from geminibot.index.authority import compute_authority, pagerank, weight_of
from geminibot.index.documents import (
    FIELD_BOOSTS,
    STUFFED_MIN_COUNT,
    STUFFED_SHARE,
    stuffing,
    stuffing_factor,
    word_pairs,
)
from geminibot.index.query import Term, parse_query
from geminibot.index.search import text_snippet
from geminibot.index.tantivy_index import (
    RERANK_WINDOW,
    IndexUnavailable,
    index_dir,
    open_current,
    rebuild,
    status,
    write_manifest,
)
from geminibot.index.text import MARK as M
from geminibot.store.authority import has_authority
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Link, Page, store_page

WORDS = ["gemini", "capsule", "garden", "orbit", "lichen", "sextant", "kettle", "almanac"]


def put(
    conn: sqlite3.Connection,
    url: str,
    title: str = "",
    text: str = "",
    links: tuple[tuple[str, str], ...] = (),
) -> None:
    with transaction(conn):
        store_page(
            conn,
            gemtext_page(url, title, text, links=tuple(Link(t, label) for t, label in links)),
            "indexer",
        )


def filled(path: Path) -> sqlite3.Connection:
    """A store at ``path`` with the pages the tests search."""
    conn = connect(path)
    put(conn, "gemini://a.test/orrery.gmi", "Orrery guide", "How an orrery moves the planets.")
    put(conn, "gemini://b.test/misc.gmi", "Misc", "Notes, and once the word orrery.")
    # c.test's page never says "zeppelin"; two other hosts link to it saying so.
    put(conn, "gemini://c.test/airship.gmi", "Untitled", "Large and slow, filled with gas.")
    for host in ("d.test", "e.test"):
        put(
            conn,
            f"gemini://{host}/",
            "Links",
            "my links",
            (("gemini://c.test/airship.gmi", "zeppelin history"),),
        )
    # Links within c.test say "blimp": a host's links to itself are not link text.
    put(conn, "gemini://c.test/", "Home", "home", (("/airship.gmi", "blimp"),))
    for n in range(30):
        words = " ".join(WORDS[(n + k) % len(WORDS)] for k in range(12))
        put(conn, f"gemini://f.test/{n}.gmi", f"Page {n} {WORDS[n % len(WORDS)]}", words)
    return conn


@pytest.fixture
def db(tmp_path: Path) -> sqlite3.Connection:
    return filled(tmp_path / "crawl.db")


@pytest.fixture(scope="module")
def built_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """:func:`filled` with its index built, once for the module: for the tests that only
    search it."""
    conn = filled(tmp_path_factory.mktemp("built") / "crawl.db")
    rebuild(conn)
    yield conn
    conn.close()


def urls(results: list[object]) -> list[str]:
    return [r.url for r in results]  # type: ignore[attr-defined]


def test_search_uses_fts5_until_the_index_is_built_then_tantivy(db: sqlite3.Connection) -> None:
    assert status(db)["built"] is False
    assert search(db, "zeppelin") == []  # FTS5 has no link text
    with pytest.raises(QueryError, match="index rebuild"):
        search(db, "zeppelin", engine="tantivy")
    built = rebuild(db)
    assert built["pages"] == 36 and int(str(built["bytes"])) > 0
    assert status(db)["current"] is True
    assert urls(search(db, "zeppelin")) == ["gemini://c.test/airship.gmi"]
    assert search(db, "blimp") == []
    assert urls(search(db, "orrery"))[0] == "gemini://a.test/orrery.gmi"
    hit = search(db, "orrery", engine="tantivy")[0]
    assert M[0] + "orrery" + M[1] in hit.snippet and hit.title == "Orrery guide"


def test_a_stale_index_is_not_used(db: sqlite3.Connection) -> None:
    rebuild(db)
    put(db, "gemini://g.test/new.gmi", "Fresh", "a sextant arrives")
    assert open_current(db) is None
    assert status(db)["current"] is False
    assert "gemini://g.test/new.gmi" in urls(search(db, "sextant", limit=50))
    with pytest.raises(QueryError):
        search(db, "sextant", engine="tantivy")
    rebuild(db)
    assert "gemini://g.test/new.gmi" in urls(search(db, "sextant", limit=50, engine="tantivy"))


def test_a_page_deleted_from_the_store_is_never_shown(
    db: sqlite3.Connection, tmp_path: Path
) -> None:
    rebuild(db)
    with transaction(db):
        db.execute("DELETE FROM pages WHERE url = 'gemini://b.test/misc.gmi'")
    assert open_current(db) is None  # the deletion is a change the index lacks
    assert status(db)["pending"] == 1
    # An index an updater follows is searched while it lags: still never the deleted page.
    folder = index_dir(tmp_path / "crawl.db")
    manifest = json.loads((folder / "manifest.json").read_text())
    write_manifest(folder, {**manifest, "updated_at": time.time()})
    assert open_current(db) is not None
    assert urls(search(db, "orrery", engine="tantivy")) == ["gemini://a.test/orrery.gmi"]


@pytest.mark.parametrize(
    "query",
    [
        "garden",
        "garden orbit",
        '"garden orbit"',
        "gard*",
        "garden -orbit",
        "lichen OR kettle",
        '"orbit lichen"*',
        'capsule -"gemini capsule"',
        "nothingatall",
        "Ga-rden",
    ],
)
def test_both_engines_find_the_same_pages(built_db: sqlite3.Connection, query: str) -> None:
    fts = set(urls(search(built_db, query, limit=100, engine="fts5")))
    tantivy = set(urls(search(built_db, query, limit=100, engine="tantivy")))
    assert fts == tantivy


def test_rebuild_needs_a_file(tmp_path: Path) -> None:
    conn = connect(":memory:")
    with pytest.raises(IndexUnavailable, match="in memory"):
        rebuild(conn)


def test_rebuild_replaces_the_old_index(db: sqlite3.Connection, tmp_path: Path) -> None:
    rebuild(db)
    put(db, "gemini://g.test/new.gmi", "Fresh", "a sextant arrives")
    rebuild(db)
    folder = index_dir(tmp_path / "crawl.db")
    assert sorted(p.name for p in folder.parent.iterdir() if p.name.startswith("crawl.db.")) == [
        "crawl.db.search",
        "crawl.db.search.lock",
        "crawl.db.search.weights.lock",
    ]
    assert status(db)["pages"] == 37


def test_snippet_marks_words_and_prefixes() -> None:
    text = "one two Three four five six seven eight nine ten eleven twelve"
    assert text_snippet(text, [Term("three")], tokens=4) == f"…two {M[0]}Three{M[1]} four five…"
    assert (
        text_snippet(text, [Term("fiv", prefix=True)], tokens=3) == f"…{M[0]}five{M[1]} six seven…"
    )
    assert text_snippet(text, [Term("zero")]) == ""


# -- authority --------------------------------------------------------------------------


def test_pagerank_sums_to_one_and_favours_the_linked() -> None:
    rank = pagerank(4, [0, 1, 2], [3, 3, 3])
    assert abs(sum(rank) - 1) < 1e-9
    assert rank[3] == max(rank)
    trusted = pagerank(4, [0, 1, 2], [3, 3, 3], trusted=[0])
    assert trusted[1] == trusted[2] == 0.0


def farm_db(tmp_path: Path) -> sqlite3.Connection:
    """A seed host linking to good.test; five farm hosts linking only to each other."""
    conn = connect(tmp_path / "farm.db")
    put(conn, "gemini://seed.test/", "Seed", "start", (("gemini://good.test/", "good"),))
    put(conn, "gemini://good.test/", "Casino guide", "casino history, once")
    farm = [f"gemini://farm{n}.test/" for n in range(5)]
    for url in farm:
        links = tuple((other, "casino") for other in farm if other != url)
        put(conn, url, "casino casino casino", "casino " * 50, links)
    # Many links inside one host count for nothing.
    put(
        conn,
        "gemini://big.test/",
        "Big",
        "self",
        tuple((f"gemini://big.test/{n}", "x") for n in range(50)),
    )
    return conn


def authority_of(conn: sqlite3.Connection, url: str) -> float:
    return float(conn.execute("SELECT score FROM authority WHERE url = ?", (url,)).fetchone()[0])


def test_trustrank_is_not_fooled_by_a_link_farm(tmp_path: Path) -> None:
    conn = farm_db(tmp_path)
    assert not has_authority(conn)
    assert search(conn, "casino")[0].url.startswith("gemini://farm")  # text alone: spam
    compute_authority(conn, [])  # plain PageRank: the farm keeps its rank
    assert authority_of(conn, "gemini://farm0.test/") > authority_of(conn, "gemini://good.test/")
    summary = compute_authority(conn, ["gemini://seed.test/"])
    assert summary["trusted"] == 1 and summary["links"] == 21
    assert authority_of(conn, "gemini://farm0.test/") < 1e-9
    assert authority_of(conn, "gemini://good.test/") > 1
    assert search(conn, "casino")[0].url == "gemini://good.test/"
    assert search(conn, "casino", authority=False)[0].url.startswith("gemini://farm")
    rebuild(conn)
    assert search(conn, "casino", engine="tantivy")[0].url == "gemini://good.test/"


def test_an_untrusted_seed_list_falls_back_to_every_host(tmp_path: Path) -> None:
    conn = farm_db(tmp_path)
    notes: list[str] = []
    assert compute_authority(conn, ["gemini://elsewhere.test/"], notes.append)["trusted"] == 0
    assert any("every host is trusted" in n for n in notes)


# -- command line -----------------------------------------------------------------------


def geminibot(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main(args, limit=120)


def test_cli_rebuild_status_and_search(db: sqlite3.Connection, tmp_path: Path) -> None:
    path = str(tmp_path / "crawl.db")
    done = geminibot("index", "status", "--db", path)
    assert done.returncode == 1 and "uses FTS5" in done.stdout
    done = geminibot("index", "rebuild", "--db", path)
    assert done.returncode == 0, done.stderr
    assert "indexed 36 pages" in done.stdout
    assert geminibot("index", "status", "--db", path).returncode == 0
    found = geminibot("search", "zeppelin", "--db", path)
    assert found.returncode == 0 and "gemini://c.test/airship.gmi" in found.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["index", "rebuild", "--db", "{tmp}/missing.db"], 2, "no such database"),
        (["index", "rebuild", "--db", "{tmp}/empty.db"], 1, "no pages with text"),
        (
            ["index", "rebuild", "--db", "{tmp}/empty.db", "--trust", "x", "--trust-all"],
            2,
            "exclude each other",
        ),
        (["index", "status", "--db", "{tmp}/missing.db"], 2, "no such database"),
        (["index"], 2, "rebuild"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    connect(tmp_path / "empty.db").close()
    done = geminibot(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert done.returncode == code
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("damage", ["manifest", "fields", "segments"])
def test_a_damaged_index_falls_back_to_fts5(
    db: sqlite3.Connection, tmp_path: Path, damage: str
) -> None:
    rebuild(db)
    folder = index_dir(tmp_path / "crawl.db")
    if damage == "manifest":
        (folder / "manifest.json").write_text("{not json")
    elif damage == "fields":
        (folder / "manifest.json").write_text('{"format": 1}')
    else:
        for f in (folder / "tantivy").iterdir():
            f.write_bytes(b"garbage")
    assert open_current(db) is None
    assert status(db)["built"] is False
    assert urls(search(db, "orrery"))[0] == "gemini://a.test/orrery.gmi"
    rebuild(db)  # and a rebuild repairs it
    assert open_current(db) is not None


# -- two-stage ranking, phrases through pair fields, read-back in one query -------------


def test_authority_reranks_the_text_window_and_nothing_beyond_it(tmp_path: Path) -> None:
    """RERANK_WINDOW pages by text, then text × authority: the page ranked last by text
    inside the window rises to the top; the first one outside it stays where text put it."""
    conn = connect(tmp_path / "window.db")
    strong = RERANK_WINDOW - 1
    with transaction(conn):
        # Same length, so text rank follows how often "kettle" occurs: 3, then 2, then 1.
        for n in range(strong):
            store_page(conn, _kettle_page(f"gemini://s{n}.test/", 3), "indexer")
        store_page(conn, _kettle_page("gemini://inside.test/", 2), "indexer")
        store_page(conn, _kettle_page("gemini://outside.test/", 1), "indexer")
    compute_authority(conn, [])
    with transaction(conn):
        conn.execute("UPDATE authority SET score = 0.0, weight = 1.0")
        conn.execute(
            "UPDATE authority SET score = 1000.0, weight = ? WHERE url IN (?, ?)",
            (weight_of(1000.0), "gemini://inside.test/", "gemini://outside.test/"),
        )
    rebuild(conn)
    by_text = urls(search(conn, "kettle", RERANK_WINDOW + 1, engine="tantivy", authority=False))
    assert by_text[RERANK_WINDOW - 1 :] == ["gemini://inside.test/", "gemini://outside.test/"]
    ranked = urls(search(conn, "kettle", RERANK_WINDOW + 1, engine="tantivy"))
    assert ranked[0] == "gemini://inside.test/"
    assert ranked[RERANK_WINDOW] == "gemini://outside.test/"
    # Paging across the window's edge neither repeats nor skips a page.
    pages = [
        urls(search(conn, "kettle", 7, offset=start, engine="tantivy"))
        for start in range(0, RERANK_WINDOW + 1, 7)
    ]
    assert [url for page in pages for url in page] == ranked


def _kettle_page(url: str, times: int) -> Page:
    return gemtext_page(url, text=" ".join(["kettle"] * times + ["steam"] * (4 - times)))


def test_word_pairs() -> None:
    assert word_pairs(["a", "b", "c"]) == ["a_b", "b_c"]
    assert word_pairs(["a"]) == []


PHRASES = [
    "garden orbit",  # neighbours in some pages, apart in others
    "orbit garden",  # the reverse order
    "lichen sextant kettle",  # three words: both pairs, in sequence
    "red kite blue",  # both pairs occur, never in sequence
    "kite blue kite",
    "Ga-rden",  # one word to the user, two to the analyzer
    "orrery guide",  # in the title only
    "d test",  # in the url
]


@pytest.fixture(scope="module")
def phrases_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """:func:`filled` with pages of phrases, its index built, once for the module (the
    tests only search it)."""
    db = filled(tmp_path_factory.mktemp("phrases") / "crawl.db")
    put(db, "gemini://p.test/1", "Kites", "a red kite flew; blue kite too")
    put(db, "gemini://p.test/2", "Kites", "red kite blue")
    put(db, "gemini://p.test/3", "Ga rden", "garden orbit, orbit garden")
    put(db, "gemini://p.test/4", "Apart", "garden, and later an orbit")
    rebuild(db)
    yield db
    db.close()


@pytest.mark.parametrize("phrase", PHRASES)
def test_a_phrase_finds_what_a_positional_phrase_finds(
    phrases_db: sqlite3.Connection, phrase: str
) -> None:
    index = open_current(phrases_db)
    assert index is not None
    words = list(index.analyzer.analyze(phrase))
    positional = tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Should, tantivy.Query.phrase_query(index.schema, field, words))
            for field in FIELD_BOOSTS
        ]
    )
    searcher = index.index.searcher()
    expected = set(
        searcher.fast_field_values("id", [a for _, a in searcher.search(positional, 100).hits])
    )
    got = {hit.page_id for hit in index.search(parse_query(f'"{phrase}"'), 100)}
    assert got == expected


def test_a_two_word_phrase_is_one_term_of_the_pair_field(phrases_db: sqlite3.Connection) -> None:
    index = open_current(phrases_db)
    assert index is not None
    query = repr(index._query(parse_query('"garden orbit"')))
    assert '"garden_orbit"' in query
    assert "Phrase" not in query  # no positions read


def test_results_are_read_back_from_the_store_in_one_query(db: sqlite3.Connection) -> None:
    rebuild(db)
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    try:
        results = search(db, "garden", 10, engine="tantivy")
    finally:
        db.set_trace_callback(None)
    assert len(results) == 10
    # One statement of ours reads them (FTS5's own, marked "--", serve it).
    assert len([s for s in statements if "pages_fts" in s and not s.startswith("--")]) == 1


def test_stuffing_share_and_factor_at_their_edges() -> None:
    filler = [f"w{n}" for n in range(100)]
    assert stuffing(["casino"] * (STUFFED_MIN_COUNT - 1)) == 0.0  # too few to tell
    assert stuffing(["casino"] * STUFFED_MIN_COUNT) == 1.0
    assert stuffing(["casino"] * (STUFFED_MIN_COUNT - 1) + filler) == 0.0
    assert stuffing(["casino"] * 30 + filler[:70]) == 0.3
    assert stuffing_factor(STUFFED_SHARE) == 1.0
    assert stuffing_factor(0.0) == 1.0
    assert stuffing_factor(2 * STUFFED_SHARE) == 0.5
    assert stuffing_factor(1.0) == STUFFED_SHARE


def test_a_page_stuffed_with_the_word_ranks_below_one_about_it(tmp_path: Path) -> None:
    conn = connect(tmp_path / "stuffed.db")
    put(conn, "gemini://stuffed.test/", "casino casino casino", "casino " * 60)
    natural = " ".join(["A history of the casino, its rules and its games."] + WORDS * 3)
    put(conn, "gemini://good.test/", "Casino guide", natural)
    rebuild(conn)  # no link authority in this database: text and stuffing alone
    assert urls(search(conn, "casino", authority=False))[0] == "gemini://stuffed.test/"
    assert urls(search(conn, "casino")) == ["gemini://good.test/", "gemini://stuffed.test/"]
