"""Hosts take turns (issue 15 item 2): a worker hands a host whose next turn is far away
(more than HOLD_TURN) or that had TURN_PAGES pages in a row back to the scheduler's heap and
takes another ready host, so a few workers serve many slow-paced or large hosts. All on
trio's mock clock: the assertions are on the order of requests, not on times."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import trio
import trio.testing
from clocks import JumpClock
from crawl_fakes import Answer, FakeSite, gmi

from geminibot.crawl import crawler as crawler_module
from geminibot.crawl.crawler import (
    HOLD_TURN,
    TURN_PAGES,
    WORKERS_PER_SLOT,
    Crawler,
    CrawlOptions,
    Response,
)
from geminibot.crawl.scheduler import (
    ADDRESS_LINE_SLACK,
    LONG_CHAIN,
    REQUEST_COST_FLOOR,
    TURN_LEAD,
    GaveWay,
    Scheduler,
    TurnLater,
    Turns,
)
from geminibot.index import connect


def wall() -> float:
    return 1.7e9 + trio.current_time()


def chain_host(site: dict[str, Answer], host: str, pages: int, delay: float | None) -> None:
    """``host``: / links to /1 ... /``pages``-1 in a chain; robots.txt sets ``delay``."""
    robots = "User-agent: *\n" + ("" if delay is None else f"Crawl-delay: {delay:g}\n")
    site[f"gemini://{host}/robots.txt"] = Response(20, "text/plain", robots.encode())
    for p in range(pages):
        path = "/" if p == 0 else f"/{p}"
        link = f"=> /{p + 1} next\n" if p + 1 < pages else ""
        site[f"gemini://{host}{path}"] = gmi(f"# {host} {p}\n{link}")


def crawler_for(tmp_path: Path, site: FakeSite, **options: object) -> Crawler:
    opts = CrawlOptions(test_range=True, concurrency=1, allow_hosts=("*.test",))
    opts = replace(opts, **options)  # type: ignore[arg-type]
    return Crawler(connect(tmp_path / "c.db"), site.fetch, opts, wall_clock=wall)


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
    seeded in that order, with one request slot."""
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
    """More slow-paced hosts (Crawl-delay 60) than workers, seeded first, and one fast
    host: the fast host's pages are all fetched before any slow host's second page (the
    old crawler's workers slept through the slow hosts' delays, the fast host waiting for
    one of them to finish)."""
    slow = [f"s{i}.test" for i in range(WORKERS_PER_SLOT + 1)]
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
    """Three times as many hosts as workers, each paced at Crawl-delay 30: every host's
    first request comes before any host's second one (the old crawler started hosts
    WORKERS_PER_SLOT at a time, each held to its end)."""
    hosts = [f"h{i}.test" for i in range(3 * WORKERS_PER_SLOT)]
    site, crawler = await crawl_hosts(tmp_path, [(h, 3, 30.0) for h in hosts], latency=0.1)
    assert crawler.store.queued() == 0
    order = hosts_requested(site)
    firsts = [order.index(host) for host in hosts]
    seconds = [order.index(host, order.index(host) + 1) for host in hosts]
    assert max(firsts) < min(seconds)
    # each policy file once per host: the policy kept between turns, not read again
    robots = [u for u in site.urls() if u.endswith("/robots.txt")]
    assert sorted(robots) == sorted(f"gemini://{h}/robots.txt" for h in hosts)
    assert site.max_in_flight_per_host == 1


async def test_a_large_host_takes_turns_with_the_others(
    tmp_path: Path, autojump_clock: object
) -> None:
    """WORKERS_PER_SLOT large hosts with no delay seeded before a small one: after
    TURN_PAGES pages in a row a large host goes back to the ready queue, behind the small
    host that has not had a turn yet (the most work left goes first only among hosts
    that had their first turn), so the small host is crawled before the large ones are
    done (not after the first of them)."""
    large = [f"big{i}.test" for i in range(WORKERS_PER_SLOT)]
    hosts = [*((h, 4 * TURN_PAGES, None) for h in large), ("small.test", 2, None)]
    site, crawler = await crawl_hosts(tmp_path, hosts, latency=0.1)
    assert crawler.store.queued() == 0
    small = pages_of(site, "small.test")
    assert len(small) == 2
    ends = [pages_of(site, host)[-1] for host in large]
    assert max(small) < min(ends)
    # at most TURN_PAGES pages of one host in a row while another host had work
    order = [u.split("/")[2] for u in site.urls() if not u.endswith(".txt")]
    run = longest = 1
    for before, after in itertools.pairwise(order):
        run = run + 1 if before == after else 1
        longest = max(longest, run)
    assert longest <= TURN_PAGES


ROBOTS_20 = len(b"User-agent: *\nCrawl-delay: 20\n")  # chain_host's robots.txt, delay 20


@pytest.mark.parametrize(
    ("kept", "max_bytes", "most"),
    [(1, ROBOTS_20, 1), (8, ROBOTS_20 - 1, 0)],
    ids=["count-edge", "bytes-edge"],
)
async def test_policies_beyond_the_limits_are_read_again_from_the_cache(
    tmp_path: Path,
    autojump_clock: object,
    monkeypatch: pytest.MonkeyPatch,
    kept: int,
    max_bytes: int,
    most: int,
) -> None:
    """POLICIES_KEPT at its edge (1), or POLICY_KEPT_MAX_BYTES one byte under the policy
    files' size: hosts handed back beyond them read their policy again at their next turn
    from the store's cache, with no request; the map stays bounded."""
    monkeypatch.setattr(crawler_module, "POLICIES_KEPT", kept)
    monkeypatch.setattr(crawler_module, "POLICY_KEPT_MAX_BYTES", max_bytes)
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
    # the delay still holds between two requests to a host
    for host in hosts:
        times = [t for t, u in site.log if u.split("/")[2] == host]
        assert all(b - a >= 20 for a, b in itertools.pairwise(times))


async def test_max_hosts_counts_the_hosts_handed_back(
    tmp_path: Path, autojump_clock: object
) -> None:
    """--max-hosts 1: a host waiting in the heap is still the one worked on; the other
    host starts only once the first is done."""
    hosts = [("a.test", 3, 30.0), ("b.test", 3, 30.0)]
    site, crawler = await crawl_hosts(tmp_path, hosts, max_hosts=1)
    assert crawler.store.queued() == 0
    order = hosts_requested(site)
    assert order == sorted(order)  # every request to a.test before the first to b.test


async def test_a_stop_while_hosts_wait_leaves_them_resumable(
    tmp_path: Path, autojump_clock: object
) -> None:
    """--max-time ends the crawl while hosts wait in the heap: nothing is leased, the
    queue keeps their pages, and the next run goes on."""
    hosts = [("a.test", 3, 100.0), ("b.test", 3, 100.0)]
    site, crawler = await crawl_hosts(tmp_path, hosts, max_time=150.0)
    assert crawler.progress.limit == "--max-time"
    assert crawler.store.leased() == []
    assert crawler.store.queued() > 0
    assert not crawler._handed_back and not crawler._policies
    again = crawler_for(tmp_path, site)
    with trio.fail_after(3600):
        await again.run()
    assert again.store.queued() == 0


def test_hosts_handed_back_come_back_when_their_turn_comes() -> None:
    clock = JumpClock(100.0)
    s = Scheduler(clock)
    s.add_work(dict.fromkeys("abc", 1))
    assert s.take_ready() == ["a", "b", "c"]
    s.hand_back("a", 130.0)
    s.hand_back("b", 110.0)
    s.hand_back("c", 100.0)  # its turn has come: the back of the ready queue
    s.add_work({"d": 1})
    assert s.handed_back() == 3
    assert s.next_hand_back() == 100.0
    assert s.take_ready() == ["d", "c"]
    assert s.next_turn() == ("b", 110.0)
    clock.time = 130.0
    assert s.take_ready(1) == ["b"]  # the others stay ready for a later call
    assert s.take_ready() == ["a"]
    assert s.handed_back() == 0 and s.next_hand_back() is None and s.next_turn() is None


def test_a_later_hand_back_supersedes_an_earlier_one() -> None:
    clock = JumpClock(100.0)
    s = Scheduler(clock)
    s.hand_back("a", 150.0)
    s.hand_back("a", 120.0)
    assert s.handed_back() == 1 and s.next_hand_back() == 120.0
    clock.time = 200.0
    assert s.take_ready() == ["a"]  # once
    assert s.take_ready() == []


async def test_wait_turn_hands_back_a_turn_beyond_hold() -> None:
    """A turn exactly ``hold`` away is waited for; a turn further away is not."""
    clock = JumpClock(100.0)
    s = Scheduler(clock, test_range=True)
    s.politeness.restore("a", last_end=100.0, last_duration=0.0, not_before=0.0, slow_downs=0)
    s.set_pace("a", HOLD_TURN)
    assert await s.wait_turn("a", HOLD_TURN)
    assert clock.time == 100.0 + HOLD_TURN - TURN_LEAD
    assert await s.until_turn("a")
    assert clock.time == 100.0 + HOLD_TURN
    s.start("a")
    s.finish("a", 0.0, 20, "", slow_down=False)
    s.set_pace("a", HOLD_TURN * 2)
    with pytest.raises(TurnLater) as later:
        await s.wait_turn("a", HOLD_TURN)
    assert later.value.at == clock.time + HOLD_TURN * 2
    assert clock.time == 100.0 + HOLD_TURN  # not slept
    assert await s.wait_turn("a", math.inf)  # no bound: sat out as before


async def test_a_turn_is_approached_by_turn_lead_and_never_started_early() -> None:
    """The worker wakes TURN_LEAD before the host's turn (to take its address and a
    place in flight), and waits the rest: the request starts at its turn, not before
    (Politeness.start would raise); a turn already due is not waited for at all."""
    clock = JumpClock(100.0)
    s = Scheduler(clock, test_range=True)
    s.set_pace("a", 0.1, between_starts=True)
    s.start("a")
    clock.time += 0.03
    s.finish("a", 0.03, 20, "", slow_down=False)
    assert s.turn_now("a") is False  # 0.07 s away
    clock.time = 100.1 - TURN_LEAD - 0.001
    assert s.turn_now("a") is False  # just beyond the lead
    assert await s.wait_turn("a")
    assert clock.time == pytest.approx(100.1 - TURN_LEAD)
    assert s.turn_now("a") is True  # within the lead
    with pytest.raises(RuntimeError, match="before it was allowed"):
        s.start("a")
    assert await s.until_turn("a")
    assert clock.time == pytest.approx(100.1)
    s.start("a")
    clock.time += 0.3  # longer than the interval: the next turn is due at the end
    s.finish("a", 0.3, 20, "", slow_down=False)
    before = clock.time
    assert await s.wait_turn("a") and await s.until_turn("a")
    assert clock.time == before


async def address_order(s: Scheduler, first: str, waiters: Sequence[str]) -> list[str]:
    """The order in which ``waiters`` (asking in that order) get the address that
    ``first`` holds."""
    got: list[str] = []

    async def wait_for(host: str) -> None:
        async with s.address_turn(host):
            got.append(host)

    async with trio.open_nursery() as nursery, s.address_turn(first):
        for host in waiters:
            nursery.start_soon(wait_for, host)
            await trio.testing.wait_all_tasks_blocked()
    return got


async def test_the_address_goes_first_to_the_host_with_the_most_work_left() -> None:
    """Hosts on one address waiting for it are served by turns: the one with the most
    work left (queued URLs times the polite time each request costs: a slow host's 0.5 s
    answers, a 44's 1 s back-off still counted after its next answer; at least
    REQUEST_COST_FLOOR), then the one that asked first. Served in the order asked, a
    15,000-URL host got one request in dozens on its address and was all that was left
    at the end of a crawl; served by work alone, the smallest waited for as long as the
    biggest kept asking."""
    clock = JumpClock(100.0)
    s = Scheduler(clock, test_range=True)
    hosts = ["holder", "fast1", "fast2", "slow", "limited", "new", "big"]
    for host in hosts:
        s.set_address(host, "127.0.0.1:1965")
    for host, duration in [("holder", 0.01), ("fast1", 0.01), ("fast2", 0.01), ("slow", 0.5)]:
        s.politeness.restore(
            host, last_end=99.0, last_duration=duration, not_before=0, slow_downs=0
        )
    s.politeness.restore("big", last_end=99.0, last_duration=0.001, not_before=0, slow_downs=0)
    s.politeness.restore("limited", last_end=None, last_duration=0, not_before=0, slow_downs=0)
    s.start("limited")
    s.finish("limited", 0.01, 44, "1", slow_down=True)  # back-off 1 s
    clock.time = 102.0
    s.start("limited")
    s.finish("limited", 0.01, 20, "", slow_down=False)  # the 44s stop; its cost stays
    assert s.politeness.request_cost("limited") == pytest.approx(1.01)
    assert s.politeness.request_cost("new") == 0.0
    s.add_work({"fast1": 10, "fast2": 10, "new": 10, "slow": 10, "limited": 3, "big": 1000})
    assert s.work_left("new") == 10 * REQUEST_COST_FLOOR  # the floor, not its cost of 0
    assert s.work_left("big") == 1000 * REQUEST_COST_FLOOR  # 1 ms each: the floor
    assert s.work_left("slow") == pytest.approx(5.0)
    order = await address_order(s, "holder", ["fast1", "fast2", "new", "slow", "limited", "big"])
    assert order == ["big", "fast1", "slow", "fast2", "limited", "new"]
    s.claimed("big", 999)
    s.claimed("slow", 20)  # never below none
    assert (s.work_left("big"), s.work_left("slow")) == (REQUEST_COST_FLOOR, 0.0)
    order = await address_order(s, "holder", ["slow", "fast2", "big"])
    # the turns go on: the address last passed by work (and then freed), now the oldest
    assert order == ["slow", "fast2", "big"]


async def test_a_timed_chain_goes_first_but_never_twice_in_a_row() -> None:
    """A waiter that asks first (a timed chain) is served before the lines by work and by
    age, unless the place before went to one: the first ones by work among themselves,
    each followed by one of the others by turns. (By turns alone the biggest capsule of
    the synthetic space, a request every 0.1 s, found the line by age next at every
    other turn and waited a whole request of another host: 0.13-0.18 s between its
    requests.)"""
    turn = Turns()
    await turn.acquire(0.0)  # held
    served: list[str] = []

    async def wait(name: str, work: float, first: bool) -> None:
        await turn.acquire(work, first=first)
        served.append(name)

    waiters = [
        ("old", 1.0, False),
        ("big", 9.0, False),
        ("chain", 5.0, True),
        ("chain2", 3.0, True),
        ("new", 0.5, False),
    ]
    async with trio.open_nursery() as nursery:
        for name, work, first in waiters:
            nursery.start_soon(wait, name, work, first)
            await trio.testing.wait_all_tasks_blocked()
        for _ in waiters:
            turn.release()
            await trio.testing.wait_all_tasks_blocked()
    assert served == ["chain", "big", "chain2", "old", "new"]
    assert turn.waiting == 0 and turn.held == 1


def test_a_timed_chain_is_a_host_with_a_delay_and_long_chain_of_work() -> None:
    """goes_first: a delay or rate over zero and at least LONG_CHAIN of work left; a
    host without a delay (the test range's rule of thumb) loses nothing it would not
    wait anyway, and a short one is not what ends a crawl."""
    s = Scheduler(JumpClock(100.0), test_range=True)
    for host in ("rated", "short", "free"):
        s.politeness.restore(host, last_end=99.0, last_duration=0.01, not_before=0, slow_downs=0)
    s.set_pace("rated", 0.1, between_starts=True)
    s.set_pace("short", 0.1, between_starts=True)
    s.add_work({"rated": int(LONG_CHAIN / 0.1), "short": int(LONG_CHAIN / 0.1) - 1})
    s.add_work({"free": 100_000})
    assert s.work_left("rated") == pytest.approx(LONG_CHAIN)
    assert s.goes_first("rated")
    assert not s.goes_first("short")
    assert s.work_left("free") >= LONG_CHAIN and not s.goes_first("free")


async def test_the_host_with_the_most_work_left_is_ready_first() -> None:
    """The ready queue gives the hosts that have not had a turn in this run first, then
    the others, each part the most work left first; claims and URLs given back move a
    host's place the next time it becomes ready."""
    clock = JumpClock(100.0)
    s = Scheduler(clock, test_range=True)
    for host, duration in {"fast": 0.01, "slow": 2.0}.items():
        s.politeness.restore(
            host, last_end=99.0, last_duration=duration, not_before=0, slow_downs=0
        )
    s.add_work({"fast": 100, "slow": 1, "small": 5, "tie": 5})
    assert s.take_ready() == ["slow", "fast", "small", "tie"]  # 2 s, 1 s, 0.05 s, 0.05 s
    s.claimed("fast", 95)
    s.claimed("slow", -99)  # 99 given back: 100 now
    for host in ["fast", "slow", "small", "tie"]:
        s.hand_back(host, 100.0)
    s.add_work({"new": 1})
    # a host that has not had a turn goes before those that had one, however little
    # its work, except a long chain: slow's 100 URLs at 2 s are 200 s >= LONG_CHAIN
    assert s.work_left("slow") >= LONG_CHAIN > s.work_left("fast")
    assert s.take_ready(3) == ["slow", "new", "fast"]
    assert s.take_ready() == ["small", "tie"]
    s.drop_work("small")
    assert s.work_left("small") == 0.0


def test_the_longest_chain_keeps_its_turn_while_no_ready_host_is_to_go_first() -> None:
    clock = JumpClock(100.0)
    s = Scheduler(clock, test_range=True)
    s.add_work({"big": 100, "small": 5})
    assert s.take_ready(1) == ["big"]
    assert not s.keeps_turn("big")  # small has not had a turn yet
    assert s.take_ready() == ["small"]
    assert s.keeps_turn("big")  # no host ready
    s.hand_back("small", 100.0)  # ready again, with less work left than big
    assert s.keeps_turn("big")
    s.claimed("big", 96)  # 4 left: small's 5 go first
    assert not s.keeps_turn("big")


def test_a_long_chain_goes_with_the_hosts_not_visited_yet() -> None:
    """A host with LONG_CHAIN of work left keeps its turn, and when handed back goes
    before the hosts not visited yet; one just under waits behind them (on the whole
    synthetic space the biggest host and the rate-limited ones waited behind every new
    capsule at each turn, and ended the crawl alone)."""
    clock = JumpClock(100.0)
    s = Scheduler(clock, test_range=True)
    for host in ("chain", "short"):  # 1 s a request
        s.politeness.restore(host, last_end=99.0, last_duration=1.0, not_before=0, slow_downs=0)
    s.add_work({"chain": int(LONG_CHAIN), "short": int(LONG_CHAIN) - 1})
    assert s.take_ready() == ["chain", "short"]
    s.add_work({"new": 1})
    assert s.keeps_turn("chain")
    assert not s.keeps_turn("short")
    for host in ("chain", "short"):
        s.hand_back(host, 100.0)
    assert s.take_ready() == ["chain", "new", "short"]


async def test_a_large_host_keeps_its_worker_while_no_other_host_waits(
    tmp_path: Path, autojump_clock: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large host and a small one, workers for both: the large host is never handed
    back after its TURN_PAGES pages (it was, three times, waiting for a worker each time
    while nothing else could use one)."""
    handed: list[str] = []
    hand_back = Scheduler.hand_back

    def spy(self: Scheduler, host: str, at: float) -> None:
        handed.append(host)
        hand_back(self, host, at)

    monkeypatch.setattr(Scheduler, "hand_back", spy)
    hosts = [("big.test", 4 * TURN_PAGES, None), ("small.test", 3, None)]
    _, crawler = await crawl_hosts(tmp_path, hosts, latency=0.1)
    assert crawler.store.queued() == 0
    assert "big.test" not in handed


async def test_a_waiter_cancelled_passes_the_address_on() -> None:
    """A host cancelled while it waits for its address leaves the line; one cancelled just
    as the address was passed to it passes it on (the address is never left held)."""
    s = Scheduler(JumpClock(100.0), test_range=True)
    for host in ["a", "b", "c"]:
        s.set_address(host, "addr")
    got: list[str] = []

    async def wait_for(host: str, cancel: trio.CancelScope) -> None:
        with cancel:
            async with s.address_turn(host):
                got.append(host)

    b_scope, c_scope = trio.CancelScope(), trio.CancelScope()
    async with trio.open_nursery() as nursery, s.address_turn("a"):
        nursery.start_soon(wait_for, "b", b_scope)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(wait_for, "c", c_scope)
        await trio.testing.wait_all_tasks_blocked()
        b_scope.cancel()  # b gets the address as a leaves, but is cancelled
        # a left: the address went to b, whose cancellation passes it to c
    assert got == ["c"]
    async with s.address_turn("a"):  # free again
        got.append("a")
    assert got == ["c", "a"]


async def test_an_address_busy_for_long_keeps_its_line_by_work_short() -> None:
    """An address that always has waiters: each round a big host and a small one wait, the
    small one served by age. Its heap entry would stay below the big hosts' for as long
    as the address is busy; the line by work is rebuilt without the waiters served past
    twice the waiters plus ADDRESS_LINE_SLACK, so it stays that short however long the
    address is busy (it grew by one entry a round before)."""
    turn = Turns()
    await turn.acquire(0.0)  # held
    served: list[str] = []
    sizes: list[int] = []

    async def wait(name: str, work: float) -> None:
        await turn.acquire(work)
        served.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, "small-0", 0.1)
        await trio.testing.wait_all_tasks_blocked()
        for i in range(20 * ADDRESS_LINE_SLACK):
            nursery.start_soon(wait, f"big-{i}", 100.0 + i)
            nursery.start_soon(wait, f"small-{i + 1}", 0.1)
            await trio.testing.wait_all_tasks_blocked()
            turn.release()  # by turns: one by work, one by age
            turn.release()
            await trio.testing.wait_all_tasks_blocked()
            sizes.append(len(turn._most_work))
        while len(served) < 1 + 2 * 20 * ADDRESS_LINE_SLACK:
            turn.release()
            await trio.testing.wait_all_tasks_blocked()
    assert served.count("small-0") == 1 and len(set(served)) == len(served)
    assert max(sizes) <= 2 * 2 + ADDRESS_LINE_SLACK + 2


async def test_places_in_flight_go_by_turns_and_follow_their_capacity() -> None:
    """The crawl's places in flight are Turns with a capacity: two held at once here, the
    waiters served by turns (the most work, then the oldest); a lower capacity takes
    effect as places are released, a higher one serves waiters at once. (With a FIFO
    limiter the biggest host waited behind every other request at each of its pages:
    80 ms more than its 0.1 s delay between two of its requests on the whole space.)"""
    places = Turns(2)
    await places.acquire(0.0)
    await places.acquire(0.0)
    served: list[str] = []

    async def wait(name: str, work: float) -> None:
        await places.acquire(work)
        served.append(name)

    async with trio.open_nursery() as nursery:
        for name, work in [("old", 1.0), ("mid", 5.0), ("big", 9.0), ("new", 0.5)]:
            nursery.start_soon(wait, name, work)
            await trio.testing.wait_all_tasks_blocked()
        assert places.waiting == 4 and places.held == 2
        places.release()  # passed on by work
        await trio.testing.wait_all_tasks_blocked()
        assert served == ["big"] and places.held == 2
        places.set_capacity(1)
        places.release()  # over the capacity: freed, not passed on
        await trio.testing.wait_all_tasks_blocked()
        assert served == ["big"] and places.held == 1
        places.set_capacity(3)  # two more places: the oldest, then the most work
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(served) == ["big", "mid", "old"] and places.held == 3
        places.release()
    assert served[3:] == ["new"] and places.waiting == 0


async def test_a_request_waiting_for_a_place_gives_its_address_to_a_timed_chain() -> None:
    """A request that holds its address while it waits for a place in flight lets the
    address go as soon as a timed chain asks for it, or at once if one waits (GaveWay:
    it asks for its turn again); a timed chain holding its address keeps it, and a
    request that is not a timed chain asking takes nothing. (Held idle that way, the
    synthetic space's biggest capsule's address kept it 7-11 ms past its turn on
    average.)"""
    s = Scheduler(JumpClock(100.0), test_range=True)
    for host in ("chain", "chain2", "mate", "other"):
        s.set_address(host, "addr")
        s.politeness.restore(host, last_end=99.0, last_duration=0.01, not_before=0, slow_downs=0)
    for host in ("chain", "chain2"):
        s.set_pace(host, 0.1, between_starts=True)
    s.add_work({"chain": 1000, "chain2": 1000, "mate": 10, "other": 100_000})
    assert s.goes_first("chain") and s.goes_first("chain2")
    assert not s.goes_first("mate") and not s.goes_first("other")  # no delay
    places = Turns(1)
    await places.acquire(0.0)  # the one place in flight, held by another address
    events: list[str] = []

    async def request(host: str) -> None:
        try:
            async with s.address_turn(host) as address:
                events.append(f"{host} has it")
                async with s.place_turn(places, host, holding=address):
                    events.append(f"{host} sends")
        except GaveWay as gave:
            events.append(f"{gave.host} gave way")

    async with trio.open_nursery() as nursery:
        for host in ("mate", "other", "chain", "chain2"):
            nursery.start_soon(request, host)
            await trio.testing.wait_all_tasks_blocked()
        # other (not a chain) asked: mate kept it; chain asked: mate let it go;
        # chain2 asked while chain waited for the place: chain kept it
        assert events == ["mate has it", "mate gave way", "chain has it"]
        places.release()  # to chain, the first in line for the place
    assert events[3:] == [
        "chain sends",
        "other has it",  # after a first one, the most work left (1,000 s to 100)
        "other gave way",  # chain2 waits: at once
        "chain2 has it",
        "chain2 sends",
    ]
    assert places.held == 0 and places.waiting == 0
    async with s.address_turn("mate"):  # the address is free again
        pass


async def test_a_timed_chain_is_not_kept_waiting_by_a_mate_waiting_for_a_place(
    tmp_path: Path, autojump_clock: object
) -> None:
    """One place in flight, two addresses: a timed chain (a request a second by its
    Request-rate) shares its address with a host without a delay; another host keeps
    the other address busy. While the mate has pages the chain would start its request
    one whole answer late or more each time (68 of its 298 in a row were, 0.1 s each:
    the mate held the address as it waited for the place, then sent); the mate now lets
    the address go when the chain asks, so a late start is rare (0-3 of 298 on trio's
    mock clock: the mate had already started its answer)."""
    latency = 0.05
    site_pages: dict[str, Answer] = {}
    rated = "User-agent: *\nRobot-version: 2.0\nRequest-rate: 60/1m\n"
    site_pages["gemini://chain.test/robots.txt"] = Response(20, "text/plain", rated.encode())
    for host, pages in [("chain.test", 300), ("mate.test", 800), ("b.test", 800)]:
        links = "".join(f"=> /{p}\n" for p in range(1, pages))
        site_pages[f"gemini://{host}/"] = gmi(f"# {host}\n{links}")  # not one body
        for p in range(1, pages):
            site_pages[f"gemini://{host}/{p}"] = gmi(f"# {host} {p}\n")
    site = FakeSite(site_pages, latency=latency)

    async def address_of(host: str) -> str:
        return "a:1965" if host in ("chain.test", "mate.test") else "b:1965"

    opts = CrawlOptions(test_range=True, concurrency=1, allow_hosts=("*.test",))
    crawler = Crawler(
        connect(tmp_path / "c.db"), site.fetch, opts, wall_clock=wall, address_of=address_of
    )
    crawler.seed(["gemini://chain.test/", "gemini://mate.test/", "gemini://b.test/"])
    with trio.fail_after(3600):
        await crawler.run()
    assert crawler.store.queued() == 0
    starts = [
        t for t, url in site.log if url.startswith("gemini://chain.test/") and url[-4:] != ".txt"
    ]
    assert len(starts) == 300
    late = [b - a - 1.0 for a, b in itertools.pairwise(starts[1:])]  # from its first link
    assert min(late) >= -1e-6  # never early (the wall clock is 1.7e9 s: float steps)
    assert sum(x > latency for x in late) <= 10
