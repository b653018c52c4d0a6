"""The crawl's scheduler: download slots, as Scrapy has them. Hosts wait in a heap by
when their next request is due and go, among those due, longest work first (LPT); one
slot per address, out with one worker at a time; a fixed set of workers. All on trio's
mock clock: the assertions are on the order of things, not on how long they took."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import trio
import trio.testing
from crawl_fakes import Answer, FakeSite, gmi
from crawlers import sqlite_crawler

from geminibot.crawl import site_policies
from geminibot.crawl.adapters import FetchResult
from geminibot.crawl.clock import TrioWallClock
from geminibot.crawl.crawler import Crawler
from geminibot.crawl.scheduler import REQUEST_COST_FLOOR, Scheduler
from geminibot.crawl.settings import CrawlOptions
from geminibot.store.db import connect

# -- the scheduler alone --


def wall() -> float:
    return 1.7e9 + trio.current_time()


def scheduler() -> Scheduler:
    clock = TrioWallClock(wall)
    clock.start()
    return Scheduler(clock, test_range=True)


def ask(s: Scheduler, host: str) -> None:
    """A request to ``host`` (taken) starts and ends now."""
    s.start(host)
    s.finish(host, 0.01, 20, "text/gemini", slow_down=False)


async def test_among_hosts_due_the_longest_work_goes_first(autojump_clock: object) -> None:
    """LPT: among hosts asked before, the one with the most queued URLs times their cost
    goes first, whatever the order they got their work in; a host just given back with
    less work waits its place."""
    s = scheduler()
    s.add_work({"small.test": 1, "big.test": 30, "mid.test": 5})
    order = [await s.next_host() for _ in range(3)]
    assert order == ["big.test", "mid.test", "small.test"]
    assert s.work_left("big.test") == 30 * REQUEST_COST_FLOOR
    now = s.clock.now()
    for _ in range(26):
        s.claimed("big.test")  # 4 left: less than mid.test's 5
    for host in order:
        ask(s, host)
        s.give_back(host, now)
    assert [await s.next_host() for _ in range(3)] == ["mid.test", "big.test", "small.test"]


async def test_a_host_not_asked_yet_goes_before_the_longest_work(autojump_clock: object) -> None:
    """A host that got work and was never asked in this run goes before the hosts asked
    before, however much work they have (its own is not known yet): a crawl reaches every
    host early, not only the biggest."""
    s = scheduler()
    s.add_work({"big.test": 30})
    assert await s.next_host() == "big.test"
    ask(s, "big.test")
    s.give_back("big.test", s.clock.now())
    s.add_work({"new.test": 1})
    assert [await s.next_host(), await s.next_host()] == ["new.test", "big.test"]


def test_a_host_is_taken_when_it_is_due_not_before() -> None:
    """A host given back with a due time comes out of the heap at that time (the mock
    clock jumps there: no sleeping), the one due soonest first; next_due says which."""
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> None:
        s = scheduler()
        s.add_work({"a.test": 1, "b.test": 1})
        a, b = await s.next_host(), await s.next_host()
        start = s.clock.now()
        s.give_back(a or "", start + 30)
        s.give_back(b or "", start + 10)
        assert s.next_due() == ("b.test", start + 10)
        assert await s.next_host() == "b.test"
        assert s.clock.now() == start + 10
        assert await s.next_host() == "a.test"
        assert s.clock.now() == start + 30

    trio.run(main, clock=clock)


async def test_no_host_comes_while_another_is_out_then_none(autojump_clock: object) -> None:
    """While a worker has a host, the others wait (its page may bring work); once it is
    dropped with no host left, next_host says None to every worker."""
    s = scheduler()
    s.add_work({"a.test": 1})
    assert await s.next_host() == "a.test"
    got: list[str | None] = []

    async def worker() -> None:
        got.append(await s.next_host())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker)
        nursery.start_soon(worker)
        await trio.sleep(100)
        assert got == []
        s.add_work({"b.test": 2})  # a.test's page linked to b.test
        await trio.sleep(1)
        assert got == ["b.test"]
        s.drop("a.test")
        s.drop("b.test")
    assert got == ["b.test", None]
    assert s.hosts_with_work() == 0


ADDRESS = "10.0.0.1 port 1965"


async def test_an_address_is_one_slot_out_with_one_worker_at_a_time(
    autojump_clock: object,
) -> None:
    """Hosts on one address share one download slot: while one of them is out with a
    worker, a worker takes a host of another address, not one of them; they go when the
    slot comes back, in their order (not asked yet first, then longest work)."""
    s = scheduler()
    for host in ("a.test", "b.test", "c.test"):
        s.set_address(host, ADDRESS)
    s.set_address("other.test", "10.0.0.2 port 1965")
    s.add_work({"a.test": 1, "b.test": 5, "c.test": 9, "other.test": 1})
    assert [await s.next_host(), await s.next_host()] == ["c.test", "other.test"]
    with trio.move_on_after(60) as waited:  # a.test and b.test are due, but not free
        await s.next_host()
    assert waited.cancelled_caught
    ask(s, "c.test")
    s.give_back("c.test", s.clock.now())
    assert await s.next_host() == "b.test"  # not asked yet: before c.test's 9
    s.drop("b.test")
    assert await s.next_host() == "a.test"
    ask(s, "a.test")
    s.give_back("a.test", s.clock.now())
    assert await s.next_host() == "c.test"  # longest work among those asked before


async def test_a_thousand_hosts_on_one_address_go_one_at_a_time_in_order(
    autojump_clock: object,
) -> None:
    """A shared server's many capsules: while one of them is out, a host of another
    address is taken at once; then each goes in its turn, not asked yet first by work
    left, none lost or taken twice, and one dropped while due is never taken."""
    s = scheduler()
    shared = [f"c{i}.test" for i in range(1000)]
    for host in shared:
        s.set_address(host, ADDRESS)
    s.set_address("other.test", "10.0.0.2 port 1965")
    s.add_work({host: 2000 - i for i, host in enumerate(shared)} | {"other.test": 1})
    assert [await s.next_host(), await s.next_host()] == ["c0.test", "other.test"]
    s.drop("c500.test")  # due, its slot busy
    taken, out = [], "c0.test"
    for _ in range(len(shared) - 1):
        ask(s, out)
        s.give_back(out, s.clock.now())
        out = await s.next_host()
        taken.append(out)
    assert taken == [h for h in shared[1:] if h != "c500.test"] + ["c0.test"]


async def test_a_host_due_waits_for_its_address_pace(autojump_clock: object) -> None:
    """A host placed due whose address another of its hosts asked since is handed out
    when the address's pace allows its request, not before: no worker takes it only to
    find it must wait (and give back the URL it claimed)."""
    clock = TrioWallClock(wall)
    clock.start()
    s = Scheduler(clock)  # off a test range: the address's pace is the rule of thumb
    for host in ("a.test", "b.test"):
        s.set_address(host, ADDRESS)
    s.add_work({"a.test": 5, "b.test": 5})
    first = await s.next_host()
    assert first is not None
    s.start(first)
    end = s.clock.now()
    s.finish(first, 0.0, 20, "text/gemini", slow_down=False)
    s.give_back(first, end + 3600)
    second = await s.next_host()
    assert second is not None and second != first
    assert s.clock.now() == end + s.politeness.address_delay(second) > end


async def test_a_host_taken_before_its_address_was_known_gives_way(
    autojump_clock: object,
) -> None:
    """Two hosts taken before their address was known turn out to share one: the first
    to learn it keeps the slot; the other is told so (:meth:`Scheduler.slot_taken`) and,
    given back, waits until the slot is free."""
    s = scheduler()
    s.add_work({"a.test": 1, "b.test": 1})
    assert [await s.next_host(), await s.next_host()] == ["a.test", "b.test"]
    s.set_address("a.test", ADDRESS)
    s.set_address("b.test", ADDRESS)
    assert not s.slot_taken("a.test")
    assert s.slot_taken("b.test")
    s.give_back("b.test", s.clock.now())
    with trio.move_on_after(60) as waited:
        await s.next_host()
    assert waited.cancelled_caught
    s.give_back("a.test", s.clock.now())
    assert await s.next_host() == "b.test"
    assert not s.slot_taken("b.test")


async def test_a_host_given_back_before_its_first_request_still_goes_first(
    autojump_clock: object,
) -> None:
    """A host that gave way before its first request (its address's slot was taken) has
    not been asked: it goes before the hosts asked before however much work they have,
    not last for its one URL known."""
    s = scheduler()
    s.add_work({"a.test": 1, "b.test": 1})
    assert [await s.next_host(), await s.next_host()] == ["a.test", "b.test"]
    s.set_address("a.test", ADDRESS)
    s.set_address("b.test", ADDRESS)
    assert s.slot_taken("b.test")
    s.give_back("b.test", s.clock.now())
    ask(s, "a.test")
    s.add_work({"a.test": 50})  # its home page's links
    s.give_back("a.test", s.clock.now())
    assert await s.next_host() == "b.test"


# -- the scheduler in a crawl --


def chain_host(site: dict[str, Answer], host: str, pages: int, delay: float | None) -> None:
    """``host``: / links to /1 ... /``pages``-1 in a chain; robots.txt sets ``delay``."""
    robots = "User-agent: *\n" + ("" if delay is None else f"Crawl-delay: {delay:g}\n")
    site[f"gemini://{host}/robots.txt"] = FetchResult(20, "text/plain", robots.encode())
    for p in range(pages):
        path = "/" if p == 0 else f"/{p}"
        link = f"=> /{p + 1} next\n" if p + 1 < pages else ""
        site[f"gemini://{host}{path}"] = gmi(f"# {host} {p}\n{link}")


def crawler_for(tmp_path: Path, site: FakeSite, **options: object) -> Crawler:
    opts = CrawlOptions(test_range=True, concurrency=1, allow_hosts=("*.test",))
    opts = replace(opts, **options)  # type: ignore[arg-type]
    return sqlite_crawler(connect(tmp_path / "c.db"), site.fetch, opts, wall_clock=wall)


def pages_of(site: FakeSite, host: str) -> list[int]:
    """Indexes in the request log of ``host``'s page requests (not its policy files)."""
    return [
        i
        for i, url in enumerate(site.urls())
        if url.split("/")[2] == host and not url.endswith(".txt")
    ]


def hosts_requested(site: FakeSite) -> list[str]:
    return [url.split("/")[2] for url in site.urls()]


async def crawl_hosts(
    tmp_path: Path,
    hosts: Sequence[tuple[str, int, float | None]],
    latency: float = 0.0,
    **options: object,
) -> tuple[FakeSite, Crawler]:
    """Crawl (to its end, or its limit) chain hosts given as (name, pages, Crawl-delay),
    seeded in that order, with one worker unless told."""
    pages: dict[str, Answer] = {}
    for host, count, delay in hosts:
        chain_host(pages, host, count, delay)
    site = FakeSite(pages, latency=latency)
    crawler = crawler_for(tmp_path, site, **options)
    crawler.seed([f"gemini://{host}/" for host, _, _ in hosts])
    with trio.fail_after(3600):
        await crawler.run()
    return site, crawler


async def test_a_fast_host_is_crawled_while_slow_hosts_wait(
    tmp_path: Path, autojump_clock: object
) -> None:
    """Slow-paced hosts (Crawl-delay 60) seeded first and one fast host, one worker: the
    fast host's pages are all fetched before any slow host's second page (the worker
    never sleeps through a host's delay)."""
    slow = [f"s{i}.test" for i in range(5)]
    hosts = [*((h, 3, 60.0) for h in slow), ("fast.test", 6, None)]
    site, crawler = await crawl_hosts(tmp_path, hosts, latency=0.1)
    assert crawler.store.queued() == 0  # every page of every host in the end
    fast = pages_of(site, "fast.test")
    assert len(fast) == 6
    second_slow_pages = [pages_of(site, host)[1] for host in slow]
    assert max(fast) < min(second_slow_pages)


async def test_many_more_hosts_than_workers_all_start_early(
    tmp_path: Path, autojump_clock: object
) -> None:
    """Twelve hosts, two workers, each host paced at Crawl-delay 30: every host's first
    request comes before any host's second one, each policy read once (kept between
    turns), one request at a time per host, at most two in flight."""
    hosts = [f"h{i}.test" for i in range(12)]
    site, crawler = await crawl_hosts(
        tmp_path, [(h, 3, 30.0) for h in hosts], latency=0.1, concurrency=2
    )
    assert crawler.store.queued() == 0
    order = hosts_requested(site)
    firsts = [order.index(host) for host in hosts]
    seconds = [order.index(host, order.index(host) + 1) for host in hosts]
    assert max(firsts) < min(seconds)
    robots = [u for u in site.urls() if u.endswith("/robots.txt")]
    assert sorted(robots) == sorted(f"gemini://{h}/robots.txt" for h in hosts)
    assert site.max_in_flight_per_host == 1
    assert site.max_in_flight == 2


async def test_the_largest_host_goes_first_and_the_small_ones_fill_the_gaps(
    tmp_path: Path, autojump_clock: object
) -> None:
    """LPT in a crawl: a large host (a chain at Crawl-delay 1) seeded after small ones is
    asked at every one of its turns, the small hosts' requests in between."""
    hosts = [*((f"small{i}.test", 3, None) for i in range(3)), ("big.test", 8, 1.0)]
    site, crawler = await crawl_hosts(tmp_path, hosts, latency=0.1)
    assert crawler.store.queued() == 0
    times = [t for t, url in site.log if url.split("/")[2] == "big.test"]
    # after its policy files, a request every 1 s + 0.1 s of latency: never late
    pages = times[-8:]
    assert all(b - a == pytest.approx(1.1) for a, b in itertools.pairwise(pages))


POLICY_BYTES = len(b"User-agent: *\nCrawl-delay: 20\n")  # chain_host's robots.txt


@pytest.mark.parametrize(("cache_bytes", "most"), [(POLICY_BYTES, 1), (POLICY_BYTES - 1, 0)])
async def test_policies_beyond_the_cache_are_read_again_from_the_store(
    tmp_path: Path,
    autojump_clock: object,
    monkeypatch: pytest.MonkeyPatch,
    cache_bytes: int,
    most: int,
) -> None:
    """POLICY_CACHE_BYTES at its edge (one policy's files), and one byte under: the
    policies of hosts between turns beyond it are read again at the host's next turn
    from the store's cache of policy files, with no request; the cache stays bounded."""
    monkeypatch.setattr(site_policies, "POLICY_CACHE_BYTES", cache_bytes)
    hosts = [f"h{i}.test" for i in range(4)]
    pages: dict[str, Answer] = {}
    for host in hosts:
        chain_host(pages, host, 4, 20)
    site = FakeSite(pages)
    crawler = crawler_for(tmp_path, site)
    sizes: list[int] = []
    site.on_request = lambda url: sizes.append(len(crawler._policies))
    crawler.seed([f"gemini://{h}/" for h in hosts])
    with trio.fail_after(3600):
        await crawler.run()
    assert crawler.store.queued() == 0
    assert max(sizes) == most
    robots = [u for u in site.urls() if u.endswith("/robots.txt")]
    assert len(robots) == len(hosts)
    for host in hosts:  # the delay still holds between two requests to a host
        times = [t for t, u in site.log if u.split("/")[2] == host]
        assert all(b - a >= 20 for a, b in itertools.pairwise(times))


async def test_max_hosts_counts_the_hosts_waiting_for_their_turn(
    tmp_path: Path, autojump_clock: object
) -> None:
    """--max-hosts 1: a host waiting for its turn is still the one worked on; the other
    host starts only once the first is done."""
    hosts = [("a.test", 3, 30.0), ("b.test", 3, 30.0)]
    site, crawler = await crawl_hosts(tmp_path, hosts, max_hosts=1)
    assert crawler.store.queued() == 0
    order = hosts_requested(site)
    assert order == sorted(order)  # every request to a.test before the first to b.test


async def test_a_stop_while_hosts_wait_leaves_them_resumable(
    tmp_path: Path, autojump_clock: object
) -> None:
    """--max-time ends the crawl while hosts wait for their turn: nothing is leased, the
    queue keeps their pages, and the next run goes on."""
    hosts = [("a.test", 3, 100.0), ("b.test", 3, 100.0)]
    site, crawler = await crawl_hosts(tmp_path, hosts, max_time=150.0)
    assert crawler.progress.limit == "--max-time"
    assert crawler.store.leased() == []
    assert crawler.store.queued() > 0
    assert not crawler._leased and not crawler._policies
    again = crawler_for(tmp_path, site)
    with trio.fail_after(3600):
        await again.run()
    assert again.store.queued() == 0
