"""The query operators on a real crawl of capsules/ops.test and de.ops.test (two hosts,
two languages, pages of known sizes), the same exact result sets on every store: SQLite
searched by FTS5 and by the tantivy index, and PostgreSQL (a real cluster); malformed
operators refused with the right form, from the CLI (exit 2) and the capsule (59).

The crawl runs twice: the second starts from a page nothing links to (``ATLAS``), whose
link gives the image the first one fetched a new label, without fetching it again; on
SQLite the tantivy index is built between the runs and brought up to date after, as an
updater following the store does."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import trio
import trio.testing
from commands import answer_of, crawl_in_trio, run_main
from postgres_cluster import new_database

from capsule_server.testing import running_server
from geminibot.gemini.status import Status
from geminibot.gemini.urls import parse_request
from geminibot.index.search import SearchResult, search
from geminibot.index.tantivy_index import open_current, rebuild
from geminibot.index.updater import IndexUpdater
from geminibot.searchcap.app import SearchCapsule

CAPSULES = Path(__file__).resolve().parents[2] / "capsules"
HOSTS = ("ops.test", "de.ops.test")
TIMEOUT = 120.0

EN = "gemini://ops.test"
DE = "gemini://de.ops.test"
HOME, README, NIGHT, TELESCOPE = (
    f"{EN}/",
    f"{EN}/README.gmi",
    f"{EN}/poetry/night.gmi",
    f"{EN}/telescope.gmi",
)
MEDIUM, BIG, NOTES = f"{EN}/medium.gmi", f"{EN}/big.gmi", f"{EN}/notes.txt"
ATLAS = f"{EN}/atlas.gmi"  # linked from nowhere: the second crawl's seed
DE_HOME, DE_README, GEDICHTE = f"{DE}/", f"{DE}/README.gmi", f"{DE}/gedichte.gmi"
EN_PAGES = {HOME, README, NIGHT, TELESCOPE, MEDIUM, BIG, NOTES, ATLAS}
DE_PAGES = {DE_HOME, DE_README, GEDICHTE}
PNG, PDF, TGZ = f"{EN}/files/nebula.png", f"{EN}/files/orbits.pdf", f"{EN}/files/logbook.tar.gz"
FILES = {PNG, PDF, TGZ}


def crawl(db: str, tmp: Path, between: Callable[[], object] = lambda: None) -> None:
    """Crawl from the home page, call ``between``, crawl again from ``ATLAS``."""
    root = tmp / "capsules"
    root.mkdir()
    for host in HOSTS:
        (root / host).symlink_to(CAPSULES / host, target_is_directory=True)

    async def main() -> None:
        async with running_server(root, tmp / "certs", clock=trio.current_time) as server:
            for seed in (HOME, ATLAS):
                argv = [seed, "--db", db, "--test-range", "--json"]
                argv += ["--connect-to", f"*.test:1965:127.0.0.1:{server.port}"]
                argv += ["--allow-host", "de.ops.test"]
                with trio.fail_after(TIMEOUT):
                    proc = await crawl_in_trio(argv)
                assert proc.returncode == 0, proc.stderr
                if seed == HOME:
                    between()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.005))


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The crawl in an SQLite file, its tantivy index built after the first run and
    brought up to date by an updater after the second."""
    tmp = tmp_path_factory.mktemp("ops")
    db = str(tmp / "crawl.db")

    def index() -> None:
        with closing(sqlite3.connect(db)) as conn:
            rebuild(conn)

    crawl(db, tmp, between=index)
    with closing(sqlite3.connect(db)) as conn, IndexUpdater(conn) as updater:
        assert updater.catch_up() > 0
    return db


@pytest.fixture(scope="module")
def pg_db(tmp_path_factory: pytest.TempPathFactory, pg_cluster: str) -> str:
    db = new_database(pg_cluster)
    crawl(db, tmp_path_factory.mktemp("ops-pg"))
    return db


Finder = Callable[[str], list[SearchResult]]


@pytest.fixture(scope="module", params=["fts5", "tantivy", "postgresql"])
def find(request: pytest.FixtureRequest) -> Iterator[Finder]:
    """A search of the crawl: ``query`` -> every result, on one engine."""
    if request.param == "postgresql":
        from geminibot.index import pg_search
        from geminibot.store import pg

        with pg.connect(request.getfixturevalue("pg_db")) as conn:
            yield lambda query: pg_search.search(conn, query, 100)
        return
    with closing(sqlite3.connect(request.getfixturevalue("sqlite_db"))) as conn:
        if request.param == "tantivy":
            assert open_current(conn) is not None
        yield lambda query: search(conn, query, 100, engine=request.param)


#: Each query of operators (alone and with words) and exactly the pages it finds.
EXPECTED: dict[str, set[str]] = {
    "stars": {NIGHT, TELESCOPE, NOTES, GEDICHTE},
    "site:ops.test": EN_PAGES | FILES,
    "site:*.ops.test": DE_PAGES,
    "site:de.ops.test site:ops.test": EN_PAGES | DE_PAGES | FILES,
    "site:*ops.test -site:ops.test": DE_PAGES,
    "stars site:ops.test": {NIGHT, TELESCOPE, NOTES},
    "stars -site:de.ops.test": {NIGHT, TELESCOPE, NOTES},
    "stars site:*.ops.test": {GEDICHTE},
    "site:elsewhere.test": set(),
    "intitle:poems": {NIGHT},
    'intitle:"lighthouse history"': {BIG},
    "intitle:lighthouse": {MEDIUM, BIG},
    "stars -intitle:poems": {TELESCOPE, NOTES, GEDICHTE},
    "poetry": {HOME, NIGHT, TELESCOPE},  # the home page links to /poetry/...
    "inurl:poetry": {NIGHT},
    "poetry -inurl:poetry": {HOME, TELESCOPE},
    "mime:text/plain": {NOTES},
    "mime:text": EN_PAGES | DE_PAGES,
    "mime:text -mime:text/gemini": {NOTES},
    "mime:image": {PNG},
    "crab nebula": {HOME, PNG},  # the words of the link to it (and the page linking)
    "supernova remnant": {ATLAS, PNG},  # a label given after the image was fetched
    "remnant in taurus mime:image": {PNG},
    "crab nebula mime:image": {PNG},
    "photograph -site:elsewhere.test": {HOME, PNG},
    "planetary orbits": {HOME, PDF},
    "filetype:pdf": {PDF},
    "orbits filetype:pdf": {PDF},
    "logbook mime:application/gzip": {TGZ},
    "observatory -mime:text/gemini": {TGZ},
    "mime:image OR mime:application/pdf size:<100": {PNG},
    "inurl:files": FILES,
    "filetype:txt": {NOTES},
    "filetype:gmi site:*.ops.test": DE_PAGES,
    "stars filetype:txt": {NOTES},
    "size:<100": {TELESCOPE, NOTES, NIGHT, PNG},
    "size:>10k": {BIG},
    "size:>1k size:<10k": {MEDIUM},
    "lighthouse size:<10k": {MEDIUM},
    "lighthouse size:>2.5k": {MEDIUM, BIG},
    "lang:de": DE_PAGES,
    "lang:de stars": {GEDICHTE},
    "lang:en stars": {NIGHT, TELESCOPE},  # a text/plain page's language is not recorded
    "stars OR lighthouse site:ops.test size:<5k": {NIGHT, TELESCOPE, NOTES, MEDIUM},
    "intitle:telescope inurl:telescope stars lang:en site:ops.test size:<1k": {TELESCOPE},
}


def test_each_operator_and_combination_finds_exactly_its_pages(find: Finder) -> None:
    found = {query: {r.url for r in find(query)} for query in EXPECTED}
    assert found == EXPECTED


@pytest.mark.parametrize("store", ["sqlite_db", "pg_db"])
def test_the_second_crawl_fetched_the_image_no_more(
    request: pytest.FixtureRequest, store: str
) -> None:
    """The image fetched by the first crawl, the second's seed by the second, each once:
    the label the image is found by on every engine (``EXPECTED``: ``supernova``) came
    without a fetch of it."""
    db = request.getfixturevalue(store)
    query = "SELECT url, count(*) FROM fetches WHERE url IN ({0}, {0}) GROUP BY url"
    if store == "pg_db":
        from geminibot.store import pg

        with pg.connect(db) as conn:
            counts = conn.execute(query.format("%s"), (PNG, ATLAS)).fetchall()
    else:
        with closing(sqlite3.connect(db)) as conn:
            counts = conn.execute(query.format("?"), (PNG, ATLAS)).fetchall()
    assert {str(url): int(n) for url, n in counts} == {PNG: 1, ATLAS: 1}


def test_a_label_given_later_follows_the_first(find: Finder) -> None:
    """The image's title is still the label of the page that linked to it first."""
    (image,) = find("supernova mime:image")
    assert (image.url, image.title) == (PNG, "Photograph of the Crab Nebula")


def test_operators_alone_list_the_scope_with_titles_and_snippets(find: Finder) -> None:
    results = find("site:*.ops.test")
    assert {r.title for r in results} == {
        "Deutsche Seiten",
        "Über diese Kapsel",
        "Gedichte über Sterne",
    }
    assert all(r.snippet for r in results)
    assert all(r.size > 0 and r.mime == "text/gemini" for r in results)


@pytest.mark.parametrize(
    ("query", "form"),
    [
        ("stars site:", "site:example.org"),
        ("size:10k", "size:<10k"),
        ("size:<ten", "size:<10k"),
        ("-size:>1k stars", "size:<10k"),
        ("filetype:qqq", "filetype:pdf"),
        ("mime:/gemini", "mime:image"),
        ("intitle:", "intitle:word"),
        ("lang:deutsch", "lang:de"),
        ("-lang:de stars", "lang:de"),
        ("site:exa$mple.org", "site:example.org"),
    ],
)
def test_a_malformed_operator_is_one_clear_line(sqlite_db: str, query: str, form: str) -> None:
    """CLI: exit 2 with one line naming the right form; the capsule: 59 with it."""
    proc = run_main(["search", query, "--db", sqlite_db])
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and form in lines[0] and "Traceback" not in proc.stderr
    with closing(SearchCapsule.of(sqlite_db)) as capsule:
        answer = answer_of(
            capsule, parse_request(f"gemini://localhost/search?{quote(query)}".encode())
        )
    assert answer.status == Status.BAD_REQUEST
    assert form in answer.meta


def test_operators_from_the_cli_and_the_capsule(sqlite_db: str) -> None:
    proc = run_main(["search", "stars", "site:ops.test", "size:<100", "--db", sqlite_db, "--json"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 3
    proc = run_main(["search", "--host", "*.ops.test", "stars", "--db", sqlite_db])
    assert proc.returncode == 0 and GEDICHTE in proc.stdout and NIGHT not in proc.stdout
    proc = run_main(["search", "crab", "nebula", "mime:image", "--db", sqlite_db])
    assert proc.returncode == 0 and "Photograph of the Crab Nebula [image/png, 67 B]" in proc.stdout
    with closing(SearchCapsule.of(sqlite_db)) as capsule:
        request = f"gemini://localhost/search?{quote('filetype:pdf')}"
        answer = answer_of(capsule, parse_request(request.encode()))
        assert f"=> {PDF} Paper on planetary orbits" in answer.body.decode()
        assert "ops.test · application/pdf, 142 B · " in answer.body.decode()
        request = f"gemini://localhost/search?{quote('site:*.ops.test lang:de')}"
        answer: Any = answer_of(capsule, parse_request(request.encode()))
    assert answer.status == Status.SUCCESS
    body = answer.body.decode()
    assert body.count("=> gemini://de.ops.test/") == 3


@pytest.fixture(scope="module", params=["fts5", "tantivy", "postgresql"])
def explained(request: pytest.FixtureRequest) -> Iterator[Finder]:
    """The search of :func:`find`, each result with its score's parts."""
    if request.param == "postgresql":
        from geminibot.index import pg_search
        from geminibot.store import pg

        with pg.connect(request.getfixturevalue("pg_db")) as conn:
            yield lambda query: pg_search.search(conn, query, 100, explain=True)
        return
    with closing(sqlite3.connect(request.getfixturevalue("sqlite_db"))) as conn:
        yield lambda query: search(conn, query, 100, engine=request.param, explain=True)


@pytest.mark.parametrize(
    "query", ["stars", "intitle:telescope stars", "lighthouse OR poems", "site:ops.test"]
)
def test_the_parts_of_each_score_add_up_to_it(explained: Finder, query: str) -> None:
    results = explained(query)
    assert results
    for result in results:
        assert result.parts, result.url
        assert sum(result.parts.values()) == pytest.approx(-result.score, rel=1e-4)
        shown = result.as_json()
        parts = shown["score_parts"]
        assert isinstance(parts, dict)
        assert sum(parts.values()) == pytest.approx(shown["score"], abs=1e-3)
    if query.startswith("intitle:"):  # the title holds the words that rank it
        assert max(results[0].parts, key=lambda name: results[0].parts[name]) == "title"  # type: ignore[index]


def test_explain_from_the_cli_and_the_verbose_capsule(sqlite_db: str) -> None:
    proc = run_main(["search", "stars", "--explain", "--db", sqlite_db])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    scores = [line.strip() for line in lines if line.strip().startswith("score ")]
    assert len(scores) == 4 and all(" = " in s for s in scores)
    assert sum(line.strip().startswith("fetched ") for line in lines) == 4
    for line in scores:  # score S = part + part ...
        total, _, parts = line.removeprefix("score ").partition(" = ")
        values = [float(p.rsplit(" ", 1)[1]) for p in parts.replace(" - ", " + -").split(" + ")]
        assert sum(values) == pytest.approx(float(total), rel=1e-2)
    with closing(SearchCapsule.of(sqlite_db)) as capsule:
        answer: Any = answer_of(capsule, parse_request(b"gemini://localhost/v/search?stars"))
        assert answer.status == Status.SUCCESS
        body = answer.body.decode()
        assert body.count("\nscore ") == 4 and body.count("fetched ") == 4
        assert "text/plain, 68 B" in body
        lucky: Any = answer_of(capsule, parse_request(b"gemini://localhost/lucky?poems%20stars"))
        assert (lucky.status, lucky.meta) == (Status.REDIRECT_TEMPORARY, NIGHT)
        none: Any = answer_of(capsule, parse_request(b"gemini://localhost/lucky?zzzqqq"))
        assert none.status == Status.NOT_FOUND and "zzzqqq" in none.meta
        ask: Any = answer_of(capsule, parse_request(b"gemini://localhost/lucky"))
        assert ask.status == Status.INPUT
        bad: Any = answer_of(capsule, parse_request(b"gemini://localhost/lucky?size:big"))
        assert bad.status == Status.BAD_REQUEST and "size:<10k" in bad.meta


async def portal_get(db: str, path: str, params: dict[str, str]) -> tuple[int, str]:
    import httpx

    from geminibot.portal.app import PortalApp
    from geminibot.portal.limits import PortalLimits
    from geminibot.portal.upstream import Upstream, UpstreamGuard
    from geminibot.why.reads import CheckReads

    upstream = Upstream(PortalLimits(), guard=UpstreamGuard([], test_range=True))
    app = PortalApp(upstream, checks=CheckReads.of(db))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://portal.test") as web:
        response = await web.get(path, params=params)
    return response.status_code, response.text


@pytest.mark.parametrize("store", ["sqlite_db", "pg_db"])
def test_the_portal_searches_with_operators_and_marks_words(
    request: pytest.FixtureRequest, store: str
) -> None:
    db = request.getfixturevalue(store)
    status, page = trio.run(portal_get, db, "/search", {"q": "stars site:ops.test"})
    assert status == 200
    assert page.count('<section class="result">') == 3
    assert "<mark>stars</mark>" in page and "⟦" not in page and "\ue000" not in page
    assert 'href="/gemini/ops.test/poetry/night.gmi"' in page
    assert 'name="q" type="search" value="stars site:ops.test"' in page
    status, page = trio.run(portal_get, db, "/search", {"q": "stars size:huge"})
    assert status == 400 and "size:&lt;10k" in page and 'action="/search"' in page
    status, page = trio.run(portal_get, db, "/", {})
    assert status == 200 and 'action="/search"' in page
