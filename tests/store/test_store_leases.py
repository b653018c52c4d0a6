"""Several crawl processes on one PostgreSQL store: a host is leased to one at a time, a
dead holder's host is taken over when its lease expires (its claims queued again, its pace
carried on), links two processes find are kept once. Each ``PgStore`` here stands for one
process; a lease of 0 seconds is one that has already expired (no sleeping)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio
from crawl.crawl_fakes import FakeSite, gmi
from store_helpers import LIMITS, Clock
from test_store import A, B, decision, fetch, page

from geminibot.crawl.adapters import FetchResult
from geminibot.crawl.build import build_crawler
from geminibot.crawl.clock import TrioWallClock
from geminibot.crawl.crawler import HELD_BACKOFF
from geminibot.crawl.settings import CrawlOptions
from geminibot.store.crawlstore import FetchedPage, HostState
from geminibot.store.pgstore import PgStore


@pytest.fixture
def two(pg_db: str, clock: Clock) -> Iterator[tuple[PgStore, PgStore]]:
    one = PgStore(pg_db, clock, LIMITS, lease_seconds=60)
    other = PgStore(pg_db, clock, LIMITS, lease_seconds=60)
    yield one, other
    one.close()
    other.close()


def test_one_holder_at_a_time(two: tuple[PgStore, PgStore]) -> None:
    p1, p2 = two
    p1.seed([A, A + "1", B])
    assert p1.lease_host("a.test", "p1") is not None
    assert p2.lease_host("a.test", "p2") is None
    assert p2.claim("a.test", "p2") is None  # no claim without the lease
    assert p1.lease_host("a.test", "p1") is not None  # renewed
    claimed = p1.claim("a.test", "p1")
    assert claimed is not None and claimed.url == A
    held = p2.work_elsewhere("p2")
    assert held["b.test"] == 0 and 50 < held["a.test"] <= 60
    assert p2.recover() == 0  # a live holder's claim is not taken
    p1.release_host("a.test", "p1")
    assert p2.lease_host("a.test", "p2") is not None


def test_expired_lease_taken_over_with_its_claims_and_pace(pg_db: str, clock: Clock) -> None:
    dying = PgStore(pg_db, clock, LIMITS, lease_seconds=0)  # its lease is over at once
    heir = PgStore(pg_db, clock, LIMITS, lease_seconds=60)
    try:
        dying.seed([A, A + "1"])
        assert dying.lease_host("a.test", "dead") is not None
        # (the claim renews only a live lease: this one expired, so the claim fails)
        assert dying.claim("a.test", "dead") is None
        # A holder that was mid-request when it died: its URL is leased, its pace committed.
        with dying.engine.pool.connection() as conn:
            conn.execute("UPDATE urls SET state = 'leased', lease = 'dead' WHERE url = %s", (A,))
        dying.log_fetch(fetch(A + "robots.txt", at=50.0))
        lease = heir.lease_host("a.test", "heir")
        assert lease is not None
        assert lease.state == HostState(50.5, 0.5, 52.0, 1)
        assert heir.state_of(A) == ("queued", None)
        first = heir.claim("a.test", "heir")
        assert first is not None and first.url == A
        assert heir.lease_host("a.test", "heir") == type(lease)(None)  # no news when renewed
    finally:
        dying.close()
        heir.close()


def mock_wall_clock() -> float:
    return 1.7e9 + trio.current_time()


def test_links_found_twice_are_kept_once(two: tuple[PgStore, PgStore]) -> None:
    p1, p2 = two
    p1.seed([A, B])
    for store, host, url, me in ((p1, "a.test", A, "p1"), (p2, "b.test", B, "p2")):
        assert store.lease_host(host, me) is not None
        claimed = store.claim(host, me)
        assert claimed is not None
        links = [(A + "shared", 1, url), (B + "shared", 1, url)]
        woken = store.fetched(
            FetchedPage(
                decision(url, host=host), fetch(url, host), page(url, "", "x"), "indexer", links
            )
        )
        assert woken == ({"a.test": 1, "b.test": 1} if me == "p1" else {})
    assert p1.queued() == 2
    stats = p1.hosts_with_work()
    assert stats == {"a.test": 1, "b.test": 1}


def test_hold_host_right_before_a_request(two: tuple[PgStore, PgStore]) -> None:
    """The check made after every wait: the host and the claim still this process's."""
    p1, p2 = two
    p1.seed([A, A + "1"])
    assert p1.lease_host("a.test", "p1") is not None
    assert p1.hold_host("a.test", "p1", None)  # a policy file: no claim yet
    claimed = p1.claim("a.test", "p1")
    assert claimed is not None and p1.hold_host("a.test", "p1", claimed.url)
    assert not p1.hold_host("a.test", "p1", A + "1")  # not its claim
    assert not p2.hold_host("a.test", "p2", None)  # not its host
    expire(p1, "a.test")  # the wait outlasted the lease, and nobody took the host
    assert p1.hold_host("a.test", "p1", claimed.url)  # still its own: renewed
    assert p2.lease_host("a.test", "p2") is None
    expire(p1, "a.test")
    assert p2.lease_host("a.test", "p2") is not None  # taken over: the claim queued again
    assert not p1.hold_host("a.test", "p1", claimed.url)
    p2.release_host("a.test", "p2")  # ... and let go again: still not p1's
    assert not p1.hold_host("a.test", "p1", claimed.url)


def expire(store: PgStore, host: str) -> None:
    """``host``'s lease runs out now (as after a wait longer than the lease)."""
    with store.engine.pool.connection() as conn:
        conn.execute("UPDATE host_leases SET lease_until = 0 WHERE host = %s", (host,))


async def test_a_host_taken_over_while_it_waited_for_its_turn_is_not_asked_twice(
    pg_db: str, autojump_clock: object
) -> None:
    """The host waits for its turn (the Crawl-delay) in the scheduler's heap, its lease
    kept, not renewed; meanwhile its lease runs out, another process takes the host over,
    fetches A and lets the host go. At its turn the worker takes the lease again and
    finds A done: A is fetched once, by the other process."""
    delay = 30.0
    wall = mock_wall_clock
    mine = PgStore(pg_db, wall, LIMITS, lease_seconds=60)
    other = PgStore(pg_db, wall, LIMITS, lease_seconds=60)
    robots = FetchResult(20, "text/plain", f"User-agent: *\nCrawl-delay: {delay}\n".encode())
    site = FakeSite({"gemini://a.test/robots.txt": robots, A: gmi("# A\n")})
    crawler = build_crawler(mine, CrawlOptions(), TrioWallClock(wall), fetch=site.fetch)

    def waiting() -> bool:
        due = crawler.scheduler.next_due()
        return due is not None and due[0] == "a.test" and mine.state_of(A) == ("queued", None)

    async def take_over() -> None:
        for _ in range(10_000):  # until the worker waits for A's turn (policy files first)
            if waiting():
                break
            await trio.sleep(0.05)
        assert waiting()
        expire(other, "a.test")
        assert other.lease_host("a.test", "other") is not None
        taken = other.claim("a.test", "other")
        assert taken is not None and taken.url == A
        done = FetchedPage(decision(A), fetch(A), page(A, "A", "a"), "indexer", [])
        other.fetched(done)
        other.release_host("a.test", "other")

    try:
        crawler.seed([A])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take_over)
            with trio.fail_after(3600):
                await crawler.run()
        assert A not in site.urls()  # fetched once, by the other process
        assert mine.state_of(A) == ("done", None)
    finally:
        mine.close()
        other.close()


class Watched(PgStore):
    """A crawl process's store that notes (trio time) when it looks for held work."""

    looks: list[float]

    def work_elsewhere(self, lease: str) -> dict[str, float]:
        self.looks.append(trio.current_time())
        return super().work_elsewhere(lease)


async def test_a_process_with_only_held_hosts_backs_off(pg_db: str, autojump_clock: object) -> None:
    """Every host with work leased by another process: look again every HELD_BACKOFF
    seconds (not hot), and take the host once its holder lets it go."""
    wall = mock_wall_clock
    mine = Watched(pg_db, wall, LIMITS, lease_seconds=60)
    mine.looks = []
    other = PgStore(pg_db, wall, LIMITS, lease_seconds=600)
    site = FakeSite({A: gmi("# A\n")})
    crawler = build_crawler(
        mine, CrawlOptions(test_range=True), TrioWallClock(wall), fetch=site.fetch
    )
    let_go = 2.5 * HELD_BACKOFF

    async def hold_then_let_go() -> None:
        await trio.sleep(let_go)
        other.release_host("a.test", "other")

    try:
        crawler.seed([A])
        assert other.lease_host("a.test", "other") is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold_then_let_go)
            with trio.fail_after(3600):
                await crawler.run()
        assert mine.looks[:4] == [0, HELD_BACKOFF, 2 * HELD_BACKOFF, 3 * HELD_BACKOFF]
        assert site.urls()[-1] == A and site.log[0][0] >= 3 * HELD_BACKOFF
        assert mine.state_of(A) == ("done", None)
    finally:
        mine.close()
        other.close()
