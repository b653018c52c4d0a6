"""Requests in flight: ``--concurrency`` at most, fewer while the crawler's event loop is
saturated (issue 15: at 128 in flight on a busy machine every request waited in the
loop's queue, and the longest chain ran at a quarter of its allowed pace)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
from crawl_fakes import FakeSite, generated_site

from geminibot.crawl.crawler import Crawler, CrawlOptions
from geminibot.crawl.inflight import (
    BUSY,
    DECREASE,
    INCREASE,
    LAG_HIGH,
    LAG_LOW,
    MIN_IN_FLIGHT,
    InFlight,
)
from geminibot.index import connect

PROBES = 20  # a window's probes on an idle loop (1 s of 0.05 s sleeps)


def window(lag: float) -> list[float]:
    return [lag] * PROBES


def test_a_lagging_loop_shrinks_the_limit_down_to_its_floor() -> None:
    f = InFlight(128)
    assert f.limit == 128  # a crawl starts at --concurrency
    assert f.observe(window(2 * LAG_HIGH), waited=True, busy=1.0) == int(128 * DECREASE)
    for _ in range(100):
        f.observe(window(2 * LAG_HIGH), waited=False, busy=1.0)
    assert f.limit == MIN_IN_FLIGHT


def test_a_loop_that_keeps_up_grows_the_limit_only_if_requests_waited() -> None:
    f = InFlight(6)
    f.limit = MIN_IN_FLIGHT
    assert f.observe(window(0.0), waited=False, busy=1.0) == MIN_IN_FLIGHT  # the limit held nothing
    assert f.observe(window(0.0), waited=True, busy=1.0) == MIN_IN_FLIGHT + 1  # at least one
    assert f.observe(window(0.0), waited=True, busy=1.0) == 6
    assert f.observe(window(0.0), waited=True, busy=1.0) == 6  # never above --concurrency
    big = InFlight(128)
    big.limit = 80
    assert big.observe(window(0.0), waited=True, busy=1.0) == 80 + int(80 * INCREASE)


@pytest.mark.parametrize("lag", [LAG_LOW, (LAG_LOW + LAG_HIGH) / 2, LAG_HIGH])
def test_a_lag_between_the_bounds_or_on_them_keeps_the_limit(lag: float) -> None:
    f = InFlight(128)
    f.limit = 50
    assert f.observe(window(lag), waited=True, busy=1.0) == 50


def test_the_median_not_one_late_probe_decides() -> None:
    f = InFlight(128)
    f.limit = 50
    one_long_step = [1.0] + [0.0] * (PROBES - 1)
    assert f.observe(one_long_step, waited=True, busy=1.0) == 56
    assert f.observe([], waited=True, busy=1.0) == 56  # no probe: no change


def test_a_lagging_loop_with_cpu_to_spare_grows_the_limit() -> None:
    """Lag without a busy CPU (many tasks per loop step, requests waiting on slow
    servers): fewer in flight would only idle the CPU."""
    f = InFlight(128)
    f.limit = 40
    assert f.observe(window(2 * LAG_HIGH), waited=True, busy=BUSY - 0.01) == 45
    assert f.observe(window(2 * LAG_HIGH), waited=False, busy=BUSY - 0.01) == 45
    assert f.observe(window(2 * LAG_HIGH), waited=False, busy=BUSY) == 36  # at the edge


def test_a_concurrency_under_the_floor_is_its_own_floor() -> None:
    f = InFlight(2)
    for _ in range(5):
        f.observe(window(1.0), waited=True, busy=1.0)
    assert f.limit == 2
    assert InFlight(0).limit == 1


def test_a_crawl_whose_loop_is_blocked_lowers_its_requests_in_flight(tmp_path: Path) -> None:
    """On the real clock: each request blocks the crawler's event loop for 0.1 s before
    its 50 ms answer, so every probe wakes late, and the injected CPU clock says the
    process used a whole core (a stand-in for a saturated CPU: timed as the process's
    own CPU, the test depended on the machine's load, and failed under CI's four
    workers on two cores); the limit shrinks from --concurrency. With the loop free (the
    same crawl, nothing blocking) it stays."""

    def crawl(block: float) -> int:
        site = FakeSite(generated_site(hosts=4, pages=12), latency=0.05)
        site.on_request = lambda url: time.sleep(block)
        opts = CrawlOptions(test_range=True, concurrency=16, allow_hosts=("*.test",))
        crawler = Crawler(
            connect(tmp_path / f"{block}.db"), site.fetch, opts, cpu_clock=time.perf_counter
        )
        crawler.seed([f"gemini://h{h}.test/" for h in range(4)])
        return trio.run(crawler.run).in_flight_limit

    assert crawl(0.1) < 16
    assert crawl(0.0) == 16
