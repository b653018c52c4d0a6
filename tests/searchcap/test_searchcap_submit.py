"""The search capsule's /submit, without a network: a URL in the crawl's scope is queued
(or made due now, if known), one out of it or trapped is refused in ``why``'s words, a
client may submit PER_CLIENT an hour, all clients PER_CAPSULE of one capsule (its queue
jumped that often at most), and every answer says what will happen."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from commands import answer_of

from geminibot.crawl.runrecord import RUN_OPTIONS, RunOptions
from geminibot.gemini.server import CURRENT_CLIENT, Resolution
from geminibot.gemini.urls import parse_request
from geminibot.searchcap import SearchCapsule
from geminibot.searchcap.submit import IN_ALL, PER_CAPSULE, PER_CLIENT, WINDOW, Submissions
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.db import connect, set_setting, transaction
from geminibot.store.reads import Reads
from geminibot.store.traps import FrontierLimits

KNOWN = "gemini://a.test/known.gmi"
LONG = "gemini://a.test/" + "x" * 80


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A crawl of a.test: its run recorded, a URL fetched, a URL trapped (too long)."""
    path = tmp_path / "crawl.db"
    conn = connect(path)
    store = SqliteStore(conn, lambda: 1_000_000.0, FrontierLimits(max_url_length=60))
    store.seed([KNOWN, LONG])
    with transaction(conn):
        set_setting(conn, RUN_OPTIONS, RunOptions(seed_hosts=("a.test",)).to_json())
        conn.execute("UPDATE urls SET state = 'done' WHERE url = ?", (KNOWN,))
    conn.close()
    return str(path)


def ask(capsule: SearchCapsule, path_query: str) -> Resolution:
    return answer_of(capsule, parse_request(f"gemini://search.test{path_query}\r\n".encode()))  # type: ignore[no-any-return]


def capsule_of(db: str, clock: Callable[[], float] = time.monotonic) -> SearchCapsule:
    from geminibot.why.reads import CheckReads

    checks = CheckReads.of(db)
    return SearchCapsule(
        Reads.of(db, limit=2, wait=5.0),
        checks=checks,
        submissions=Submissions(db, checks, clock=clock),
    )


@contextmanager
def client(address: str) -> Iterator[None]:
    """Requests from ``address`` (the server's per-client key) in the block."""
    token = CURRENT_CLIENT.set(address)
    try:
        yield
    finally:
        CURRENT_CLIENT.reset(token)


def said(answer: Resolution) -> str:
    assert answer.status == 20, (answer.status, answer.meta)
    return answer.read_body().decode("utf-8")


def state(db: str, url: str) -> str | None:
    conn = connect(db)
    try:
        row = conn.execute("SELECT state FROM urls WHERE url = ?", (url,)).fetchone()
    finally:
        conn.close()
    return None if row is None else str(row[0])


def due(db: str, url: str) -> bool:
    """Whether ``url`` is due now (made so by the store's recheck routine)."""
    conn = connect(db)
    try:
        row = conn.execute("SELECT next_visit FROM urls WHERE url = ?", (url,)).fetchone()
    finally:
        conn.close()
    return row is not None and row[0] is not None and row[0] <= time.time()


def test_submissions_are_queued_refused_and_limited(db: str) -> None:
    with closing(capsule_of(db)) as capsule:
        assert ask(capsule, "/submit").status == 10
        assert ask(capsule, "/submit?not%20a%20url").status == 59
        assert ask(capsule, "/submit?https://a.test/").status == 59
        new = said(ask(capsule, "/submit?" + quote("gemini://a.test/new.gmi", safe="")))
        assert "Queued: the crawler will fetch it soon, before the capsule's other" in new
        assert state(db, "gemini://a.test/new.gmi") == "queued"
        again = said(ask(capsule, "/submit?" + quote(KNOWN, safe="")))
        assert "Due now: the crawler will fetch it soon" in again and due(db, KNOWN)
        other = said(ask(capsule, "/submit?gemini://b.test/"))
        assert "Refused: kept out: the crawl was not told to visit this capsule:" in other
        assert "b.test is neither a seed's host nor named by --allow-host" in other
        trapped = said(ask(capsule, "/submit?" + quote(LONG, safe="")))
        assert "Refused: kept out by a trap bound" in trapped
        for n in range(PER_CLIENT - 2):  # two were queued above
            said(ask(capsule, f"/submit?gemini://a.test/{n}.gmi"))
        over = said(ask(capsule, "/submit?gemini://a.test/one-more.gmi"))
        assert f"Refused: at most {PER_CLIENT} submissions an hour from one client" in over
        assert state(db, "gemini://a.test/one-more.gmi") is None


def test_a_crawl_that_never_ran_takes_no_submission(tmp_path: Path) -> None:
    connect(tmp_path / "empty.db").close()
    with closing(capsule_of(str(tmp_path / "empty.db"))) as capsule:
        page = said(ask(capsule, "/submit?gemini://a.test/"))
    assert "Refused: the crawl has not run yet" in page


def test_without_submissions_there_is_no_submit(db: str) -> None:
    with closing(SearchCapsule(Reads.of(db, limit=1, wait=1.0))) as capsule:
        assert ask(capsule, "/submit?gemini://a.test/").status == 51


def test_a_capsules_queue_is_jumped_at_most_per_capsule_times_an_hour(db: str) -> None:
    """A submitted URL is claimed before its capsule's backlog, so the submissions taken
    are what could starve a capsule's crawl: from any number of clients, PER_CAPSULE URLs
    of one capsule an hour are taken, the next is refused and queues nothing, another
    capsule's are still taken, and an hour later the capsule's are taken again. The
    crawl claims the submitted URLs first, then the backlog, oldest first."""
    conn = connect(db)
    store = SqliteStore(conn, lambda: 1_000_000.0, FrontierLimits())
    backlog = [f"gemini://a.test/old/{n}.gmi" for n in range(3)]
    store.seed(backlog)
    with transaction(conn):
        scope = RunOptions(seed_hosts=("a.test", "b.test"))
        set_setting(conn, RUN_OPTIONS, scope.to_json())
    wanted = [f"gemini://a.test/new/{n}.gmi" for n in range(PER_CAPSULE + 1)]
    now = [0.0]
    with closing(capsule_of(db, lambda: now[0])) as capsule:
        for n, url in enumerate(wanted):  # each from a client of its own
            with client(f"192.0.2.{n}"):
                page = said(ask(capsule, "/submit?" + quote(url, safe="")))
            if n < PER_CAPSULE:
                assert page.count("Queued: ") == 1, page
            else:
                limit = f"Refused: at most {PER_CAPSULE} submissions an hour for one capsule"
                assert limit in page and state(db, url) is None
        with client("198.51.100.1"):
            assert "Queued: " in said(ask(capsule, "/submit?gemini://b.test/"))
        now[0] = WINDOW
        with client("198.51.100.2"):
            assert "Queued: " in said(ask(capsule, "/submit?" + quote(wanted[-1], safe="")))
    assert store.lease_host("a.test", "me") is not None
    claimed = []
    while (claim := store.claim("a.test", "me")) is not None:
        claimed.append(claim.url)
    conn.close()
    assert claimed == wanted + backlog


def test_all_clients_together_submit_at_most_in_all_an_hour(db: str) -> None:
    """The queue of submissions in all: IN_ALL URLs an hour are taken, from clients and
    capsules each under their own bound, the next is refused and queues nothing."""
    hosts = [f"h{n}.test" for n in range(IN_ALL // PER_CAPSULE + 1)]
    conn = connect(db)
    with transaction(conn):
        set_setting(conn, RUN_OPTIONS, RunOptions(seed_hosts=tuple(hosts)).to_json())
    conn.close()
    urls = [f"gemini://{host}/{n}.gmi" for host in hosts for n in range(PER_CAPSULE)]
    with closing(capsule_of(db, lambda: 0.0)) as capsule:
        for n, url in enumerate(urls[: IN_ALL + 1]):
            with client(f"192.0.2.{n // PER_CLIENT}"):
                page = said(ask(capsule, "/submit?" + quote(url, safe="")))
            if n < IN_ALL:
                assert page.count("Queued: ") == 1, page
    assert f"Refused: the queue of submissions is full ({IN_ALL} an hour)" in page
    assert state(db, urls[IN_ALL]) is None and state(db, urls[IN_ALL - 1]) == "queued"
