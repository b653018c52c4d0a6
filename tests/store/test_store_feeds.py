"""Feeds written with their page, on both stores: a feed's row and entries created by its
first fetch, updated by the next ones (an entry no longer listed kept as history, listed
again live again), the same entry of two feeds shown once by the aggregator, a feed
fetched unchanged only touched, and the URL's last visit saying it is a feed."""

from __future__ import annotations

import itertools
from typing import Any

import trio
from store_helpers import LIMITS, Clock, opened
from test_store import claim, decision, fetch, page

from geminibot.feeds.parse import Entry, Feed
from geminibot.store.crawlstore import CrawlStore, FetchedPage
from geminibot.store.database import open_database
from geminibot.store.whatsnew import feed_formats, known_feeds, new_entries

LOG, OTHER = "gemini://a.test/log/", "gemini://a.test/other.gmi"
POSTS = [f"gemini://a.test/log/{n}.gmi" for n in range(4)]


def gemsub(*posts: int, title: str = "A log") -> Feed:
    """A gemsub feed listing ``posts`` (post n dated day n)."""
    return Feed(
        "gemsub", title, None, tuple(Entry(POSTS[n], f"Post {n}", n * 86400.0) for n in posts)
    )


def commit(store: CrawlStore, url: str, feed: Feed | None, at: float, **kw: Any) -> None:
    claimed = claim(store)
    assert claimed is not None and claimed.url == url, claimed
    p = page(url, "log", f"text {feed}", content_hash=f"h{feed}")
    p = p.__class__(**{**p.__dict__, "fetched_at": at})
    store.fetched(FetchedPage(decision(url), fetch(url, at=at), p, "indexer", [], feed=feed, **kw))


def entries(kind: str, db: str) -> dict[str, Any]:
    with opened(kind, db) as (conn, mark):
        rows = conn.execute(
            "SELECT e.url, e.title, e.first_seen, e.removed_at FROM feed_entries e"
            f" JOIN feeds f ON f.id = e.feed_id WHERE f.url = {mark} ORDER BY e.url",
            (LOG,),
        ).fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def test_a_feed_and_its_entries_follow_its_fetches(
    store: CrawlStore, kind: str, db: str, clock: Clock
) -> None:
    store.seed([LOG])
    commit(store, LOG, gemsub(0, 1), at=100.0)
    visit = store.previous(LOG)
    assert visit is not None and visit.feed
    assert entries(kind, db) == {
        POSTS[0]: ("Post 0", 100.0, None),
        POSTS[1]: ("Post 1", 100.0, None),
    }
    store.revisit(clock.now, everything=True)
    commit(store, LOG, gemsub(1, 2, title="Renamed"), at=200.0)
    assert entries(kind, db) == {
        POSTS[0]: ("Post 0", 100.0, 200.0),  # no longer listed: kept, flagged
        POSTS[1]: ("Post 1", 100.0, None),
        POSTS[2]: ("Post 2", 200.0, None),
    }
    store.revisit(clock.now, everything=True)
    commit(store, LOG, gemsub(0, 1, 2), at=300.0)
    assert entries(kind, db)[POSTS[0]] == ("Post 0", 100.0, None)  # listed again: live
    with open_database(db) as database:
        [feed] = known_feeds(database, 10)
        assert (feed.url, feed.format, feed.title, feed.entries) == (LOG, "gemsub", "A log", 3)
        assert (feed.last_entry, feed.first_seen, feed.fetched_at) == (2 * 86400.0, 100.0, 300.0)
        assert feed_formats(database) == {"gemsub": 1}
    store.revisit(clock.now, everything=True)
    claimed = claim(store)
    assert claimed is not None
    same = page(LOG, "log", "same", content_hash="same")
    store.fetched(
        FetchedPage(
            decision(LOG), fetch(LOG), same.__class__(**{**same.__dict__, "fetched_at": 400.0}),
            "indexer", [], unchanged=True, was_feed=True,
        )
    )  # fmt: skip
    with open_database(db) as database:
        assert known_feeds(database, 10)[0].fetched_at == 400.0


def test_the_aggregator_shows_an_entry_of_two_feeds_once(
    store: CrawlStore, kind: str, db: str
) -> None:
    store.seed([LOG, OTHER])
    commit(store, LOG, gemsub(0, 1, 3), at=100.0)
    atom = Feed("atom", "Other", "Ann", (Entry(POSTS[3], "Post three", 3 * 86400.0),))
    commit(store, OTHER, atom, at=100.0)
    with open_database(db) as database:
        found = new_entries(database, since=86400.0, limit=10)
        assert [e.url for e in found] == [POSTS[3], POSTS[1]]  # newest first, each once
        assert new_entries(database, since=0.0, limit=1)[0].url == POSTS[3]
        assert feed_formats(database) == {"atom": 1, "gemsub": 1}


def test_a_submission_is_made_due_or_queued(store: CrawlStore, db: str) -> None:
    """A known URL is made due now by the store's recheck routine (the crawl queues it
    as any URL due); an unknown one is queued as a seed."""
    from geminibot.store.submissions import submit

    store.seed([LOG])
    commit(store, LOG, gemsub(0), at=100.0)
    assert store.state_of(LOG) == ("done", None)
    assert submit(db, LOG, lambda: 200.0) == "due now"
    assert store.revisit(200.0) == 1 and store.state_of(LOG) == ("queued", None)
    assert submit(db, LOG, lambda: 200.0) == "already queued"
    assert submit(db, POSTS[3], lambda: 200.0) == "queued"
    assert store.state_of(POSTS[3]) == ("queued", None)


def test_a_new_url_submitted_is_new_work_after_the_mark(store: CrawlStore, db: str) -> None:
    """A continuous crawl marks the newest URL at each look (its run, every DUE_POLL; its
    sleep, from the run's last look); a URL submitted after it (queued: new to the store)
    is new work for its host, to the run and to the sleep; one met before the mark is not."""
    from geminibot.crawl.continuous import any_due
    from geminibot.store.submissions import submit

    assert store.newest_url() == 0  # (no URL yet)
    store.seed([LOG])
    mark = store.newest_url()
    assert store.queued_since(0) == {"a.test": 1} and store.queued_since(mark) == {}
    with open_database(db) as database:
        assert not any_due(database, 100.0, mark) and not any_due(database, 100.0)
    assert submit(db, POSTS[0], lambda: 100.0) == "queued"
    assert submit(db, "gemini://other.test/new.gmi", lambda: 100.0) == "queued"
    assert store.queued_since(mark) == {"a.test": 1, "other.test": 1}
    assert store.queued_since(store.newest_url()) == {}
    claim(store, "other.test")  # (being fetched: no longer new work)
    assert store.queued_since(mark) == {"a.test": 1}
    with open_database(db) as database:
        assert any_due(database, 100.0, mark) and not any_due(database, 100.0)
        assert not any_due(database, 100.0, store.newest_url())


def test_a_page_that_stops_being_a_feed_keeps_its_entries_as_history(
    store: CrawlStore, kind: str, db: str, clock: Clock
) -> None:
    store.seed([LOG])
    commit(store, LOG, gemsub(0, 1), at=100.0)
    store.revisit(clock.now, everything=True)
    commit(store, LOG, None, at=200.0, was_feed=True)
    assert entries(kind, db) == {
        POSTS[0]: ("Post 0", 100.0, 200.0),
        POSTS[1]: ("Post 1", 100.0, 200.0),
    }
    with open_database(db) as database:
        assert known_feeds(database, 10)[0].entries == 0
        assert new_entries(database, since=0.0, limit=10) == []


async def test_a_run_takes_a_url_submitted_during_it(
    kind: str, db: str, autojump_clock: object
) -> None:
    """A continuous crawl's run looks for new work every DUE_POLL (its ``poll_due``): a
    URL the store never met, submitted mid-run on a host not asked yet, is fetched by that
    run within the poll, its policy files first, while the slow host's pages go on at its
    pace; the run's last look is the mark its sleep starts from."""
    from crawl.crawl_fakes import FakeSite, gmi

    from geminibot.crawl.adapters import FetchResult
    from geminibot.crawl.build import build_crawler
    from geminibot.crawl.clock import TrioWallClock
    from geminibot.crawl.settings import CrawlOptions
    from geminibot.store.crawlstore import SqliteStore
    from geminibot.store.db import connect
    from geminibot.store.pgstore import PgStore
    from geminibot.store.recheck import DUE_POLL
    from geminibot.store.submissions import submit

    new = "gemini://b.test/new.gmi"
    fake = FakeSite(
        {
            "gemini://a.test/robots.txt": FetchResult(
                20, "text/plain", b"User-agent: *\nCrawl-delay: 30\n"
            ),
            "gemini://a.test/": gmi("# Home\n" + "".join(f"=> /{i}.gmi\n" for i in range(4))),
            **{f"gemini://a.test/{i}.gmi": gmi(f"# Page {i}\n") for i in range(4)},
            new: gmi("# New\n"),
        }
    )  # (b.test has no policy files: 51, all allowed)
    clock = TrioWallClock(lambda: 1.7e9)
    store: CrawlStore = (
        SqliteStore(connect(db), clock.now, LIMITS)
        if kind == "sqlite"
        else PgStore(db, clock.now, LIMITS, lease_seconds=60)
    )
    options = CrawlOptions(test_range=True, allow_hosts=("b.test",))
    crawler = build_crawler(store, options, clock, fetch=fake.fetch, poll_due=DUE_POLL)
    crawler.seed(["gemini://a.test/"])
    asked: list[float] = []

    def submitting(url: str) -> None:
        if url == "gemini://a.test/1.gmi":  # a minute into a run of three
            assert submit(db, new, clock.now) == "queued"
            asked.append(trio.current_time())

    fake.on_request = submitting
    progress = await crawler.run()
    try:
        assert progress.newest_url == store.newest_url()
    finally:
        store.close()
    fetched = [url for _, url in fake.log]
    b_test = [url for url in fetched if url.startswith("gemini://b.test/")]
    assert b_test[-1] == new and len(b_test) == 4  # robots.txt, robots2.txt, agents.txt
    assert fetched.index(new) < fetched.index("gemini://a.test/3.gmi")  # within the run
    (at,) = [at for at, url in fake.log if url == new]
    assert at - asked[0] <= DUE_POLL
    a_pages = [
        at for at, url in fake.log if url.startswith("gemini://a.test/") and ".txt" not in url
    ]
    assert all(b - a >= 30.0 for a, b in itertools.pairwise(a_pages))  # a.test's pace held


async def test_a_url_submitted_or_rechecked_mid_run_is_its_hosts_next(
    kind: str, db: str, autojump_clock: object
) -> None:
    """A host with a backlog (30 queued pages, ``Crawl-delay: 30``) being crawled: a URL
    the store never met submitted mid-run, then one of the backlog's last URLs submitted
    (already queued), then the home page rechecked (fetched: due now, queued by the run's
    poll), are each the next URL fetched from the host, at its pace; the backlog then
    goes on oldest first, and no URL keeps its priority once fetched."""
    from crawl.crawl_fakes import FakeSite, gmi

    from geminibot.crawl.adapters import FetchResult
    from geminibot.crawl.build import build_crawler
    from geminibot.crawl.clock import TrioWallClock
    from geminibot.crawl.settings import CrawlOptions
    from geminibot.store.crawlstore import SqliteStore
    from geminibot.store.db import connect
    from geminibot.store.pgstore import PgStore
    from geminibot.store.recheck import DUE_POLL
    from geminibot.store.submissions import submit
    from geminibot.store.traps import FrontierLimits

    home, new = "gemini://a.test/", "gemini://a.test/new.gmi"
    backlog = [f"gemini://a.test/{i}.gmi" for i in range(30)]
    fake = FakeSite(
        {
            "gemini://a.test/robots.txt": FetchResult(
                20, "text/plain", b"User-agent: *\nCrawl-delay: 30\n"
            ),
            home: gmi("# Home\n" + "".join(f"=> /{i}.gmi\n" for i in range(30))),
            **{url: gmi(f"# Page {url}\n") for url in backlog},
            new: gmi("# New\n"),
        }
    )
    clock = TrioWallClock(lambda: 1.7e9)
    store: CrawlStore = (
        SqliteStore(connect(db), clock.now, FrontierLimits())
        if kind == "sqlite"
        else PgStore(db, clock.now, FrontierLimits(), lease_seconds=60)
    )
    crawler = build_crawler(
        store, CrawlOptions(test_range=True), clock, fetch=fake.fetch, poll_due=DUE_POLL
    )
    crawler.seed([home])
    asked = {  # when this URL is requested: submit that one (and what it becomes)
        backlog[2]: (new, "queued"),
        new: (backlog[20], "already queued"),
        backlog[20]: (home, "due now"),
    }

    def submitting(url: str) -> None:
        if url in asked:
            wanted, what = asked.pop(url)
            assert submit(db, wanted, clock.now) == what

    fake.on_request = submitting
    await crawler.run()
    try:
        with open_database(db) as database:
            (first,) = database.query("SELECT count(*) FROM urls WHERE priority != 0").fetchone()
    finally:
        store.close()
    assert asked == {} and first == 0
    pages = [(at, url) for at, url in fake.log if not url.endswith(".txt")]
    assert [url for _, url in pages] == [
        home,
        *backlog[:3],
        new,
        backlog[20],
        home,
        *backlog[3:20],
        *backlog[21:],
    ]
    assert all(b - a >= 30.0 for (a, _), (b, _) in itertools.pairwise(pages))  # its pace
