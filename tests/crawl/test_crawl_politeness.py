"""The politeness schedule with a fake clock: delays, 44 back-off, windows, absurd waits."""

import pytest

from geminibot.crawl.politeness import (
    DEFAULT_MIN_DELAY,
    MAX_WAIT,
    SLOW_DOWN_BASE,
    HostPace,
    Politeness,
    slow_down_wait,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_default_delay_is_rule_of_thumb() -> None:
    clock = Clock()
    p = Politeness(clock)
    assert p.ready_at("a") == 1000.0  # first request at once
    p.start("a")
    clock.now += 0.5
    p.finish("a", 0.5, 20)
    assert p.ready_at("a") == 1000.5 + DEFAULT_MIN_DELAY
    p.start("b")  # other hosts are independent
    clock.now += 8
    p.finish("b", 8.0, 20)
    assert p.ready_at("b") == clock.now + 16.0  # twice the last duration


def test_one_request_in_flight_and_not_early() -> None:
    clock = Clock()
    p = Politeness(clock)
    p.start("a")
    with pytest.raises(RuntimeError, match="in flight"):
        p.start("a")
    p.finish("a", 0.1, 20)
    with pytest.raises(RuntimeError, match="before it was allowed"):
        p.start("a")


def test_test_range_and_policy_delay() -> None:
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.start("a")
    p.finish("a", 0.1, 20)
    assert p.ready_at("a") == clock.now  # no default delay on a test range
    p.set_pace("a", HostPace(delay=3.0))
    assert p.ready_at("a") == clock.now + 3.0  # a policy delay always holds


def test_slow_down_backoff() -> None:
    assert slow_down_wait("", 1) == SLOW_DOWN_BASE
    assert slow_down_wait("", 3) == 4 * SLOW_DOWN_BASE
    assert slow_down_wait("5", 1) == 5.0
    assert slow_down_wait("5", 4) == 8.0 * SLOW_DOWN_BASE
    assert slow_down_wait("soon", 1) == SLOW_DOWN_BASE
    clock = Clock()
    p = Politeness(clock, test_range=True)
    waits = []
    for _ in range(3):
        at = p.ready_at("a")
        assert at is not None
        clock.now = at
        p.start("a")
        waits.append(p.finish("a", 0.0, 44, "2"))
    assert waits == [2.0, 2.0, 4.0]
    assert p.ready_at("a") == clock.now + 4.0
    clock.now += 4.0
    p.start("a")
    assert p.finish("a", 0.0, 20) == 0.0
    assert p.state("a")[3] == 0  # back-off reset
    assert p.ready_at("a") == clock.now + 4.0  # ... and the wait that was enough is kept


def test_the_wait_after_which_a_host_answered_is_kept_as_its_delay() -> None:
    """A capsule that answers 44 when asked again within 1 s: after one 44 and the 1 s
    back-off it answers, so the crawler waits 1 s after each request from then on (from
    the end, whatever a rate says), instead of meeting a 44 on every other one; a
    longer back-off that was needed later raises it; a shorter one never lowers it."""
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.set_pace("a", HostPace(delay=0.1, between_starts=True))
    p.start("a")
    clock.now += 0.02
    p.finish("a", 0.02, 20)
    assert p.ready_at("a") == pytest.approx(1000.1)  # no 44 yet: its own rate
    clock.now = 1000.1
    p.start("a")
    clock.now += 0.02
    assert p.finish("a", 0.02, 44, "1") == 1.0
    clock.now += 1.0
    p.start("a")
    clock.now += 0.02
    p.finish("a", 0.02, 20)
    for _ in range(3):  # 1 s after each end, every request answered
        assert p.ready_at("a") == pytest.approx(clock.now + 1.0)
        assert p.delay("a") == 1.0 and p.request_cost("a") == pytest.approx(1.02)
        clock.now += 1.0
        p.start("a")
        clock.now += 0.02
        p.finish("a", 0.02, 20)
    for status, meta in ((44, "3"), (20, ""), (44, "2"), (20, "")):
        clock.now = p.ready_at("a") or 0.0
        p.start("a")
        p.finish("a", 0.0, status, meta)
    assert p.delay("a") == 3.0
    assert Politeness(clock, test_range=True).delay("a") == 0.0  # a new run starts afresh


def test_absurd_wait_skips_host_edge() -> None:
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.start("a")
    p.finish("a", 0.0, 44, str(int(MAX_WAIT)))
    assert p.ready_at("a") == clock.now + MAX_WAIT  # exactly the cap is still waited
    p.start("b")
    p.finish("b", 0.0, 44, str(int(MAX_WAIT) + 1))
    assert p.ready_at("b") is None
    assert "more than" in (p.skipped("b") or "")


def test_visit_window_reschedules() -> None:
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.set_pace("a", HostPace(window_opens=lambda t: max(t, 1100.0)))
    assert p.ready_at("a") == 1100.0
    p.set_pace("b", HostPace(window_opens=lambda t: t + MAX_WAIT + 1))
    assert p.ready_at("b") is None


def test_restore_after_restart() -> None:
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.restore("a", last_end=990.0, last_duration=0.1, not_before=1005.0, slow_downs=2)
    assert p.ready_at("a") == 1005.0
    clock.now = 1005.0
    p.start("a")
    assert p.finish("a", 0.0, 44) == 4 * SLOW_DOWN_BASE  # third 44 in a row


def test_a_host_on_a_busy_address_waits_its_delay_from_its_own_request() -> None:
    """Two hosts on one address: ``slow`` asks 3 s between its requests, ``busy`` none
    (test range). ``slow`` waits 3 s from its own last request and, from the address's
    last request, the group's delay (0 here), not its own 3 s: counted from any request
    to the address, it waited for a 3 s silence that ``busy``'s requests never left, and
    was never served."""
    clock = Clock()
    p = Politeness(clock, test_range=True)
    for host in ("slow", "busy"):
        p.set_group(host, "127.0.0.1:1965")
    p.set_pace("slow", HostPace(delay=3.0))
    p.start("slow")
    clock.now += 0.1
    p.finish("slow", 0.1, 20)
    slow_end = clock.now
    for _ in range(40):  # busy keeps the address going, one request at a time
        assert p.ready_at("busy") == clock.now
        p.start("busy")
        clock.now += 0.1
        p.finish("busy", 0.1, 20)
        assert p.ready_at("slow") == max(clock.now, slow_end + 3.0)
    assert p.group_delay("slow") == 0.0


def test_the_group_delay_is_the_rule_of_thumb_and_never_under_min_delay() -> None:
    """Off a test range the address's delay is the rule of thumb over its last request; a
    host that allows less waits less from the address's last request; ``min_delay`` is a
    floor under both."""
    clock = Clock()
    p = Politeness(clock, min_delay=0.5)
    for host in ("quick", "other"):
        p.set_group(host, "addr")
    p.set_pace("quick", HostPace(delay=1.0))
    p.start("other")
    clock.now += 8.0
    p.finish("other", 8.0, 20)
    assert p.group_delay("quick") == 16.0  # twice the address's last request
    assert p.ready_at("quick") == clock.now + 1.0  # its own, shorter delay
    assert p.ready_at("other") == clock.now + 16.0
    t = Politeness(clock, test_range=True, min_delay=0.5)
    t.set_group("a", "addr")
    assert t.group_delay("a") == 0.5


def test_a_rate_is_counted_from_the_start_of_the_last_request() -> None:
    """A rate of one request per 0.1 s: a request that took 0.03 s is followed 0.1 s after
    it started (not 0.1 s after it ended); one that took longer than 0.1 s at its end,
    or ``min_delay`` after it. A Crawl-delay of 0.1 s still counts from the end."""
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.set_pace("rate", HostPace(delay=0.1, between_starts=True))
    p.set_pace("delay", HostPace(delay=0.1))
    for host in ("rate", "delay"):
        clock.now = 1000.0
        p.start(host)
        clock.now += 0.03
        p.finish(host, 0.03, 20)
    assert p.ready_at("rate") == pytest.approx(1000.1)
    assert p.ready_at("delay") == pytest.approx(1000.13)
    assert p.request_cost("rate") == pytest.approx(0.1)
    assert p.request_cost("delay") == pytest.approx(0.13)
    clock.now = 1000.1
    p.start("rate")
    clock.now += 0.25
    p.finish("rate", 0.25, 20)
    assert p.ready_at("rate") == clock.now  # took longer than its interval: at once
    assert p.request_cost("rate") == pytest.approx(0.25)
    floor = Politeness(clock, test_range=True, min_delay=0.05)
    floor.set_pace("rate", HostPace(delay=0.1, between_starts=True))
    start = clock.now
    floor.start("rate")
    clock.now += 0.25
    floor.finish("rate", 0.25, 20)
    assert floor.ready_at("rate") == pytest.approx(start + 0.3)  # min_delay after its end
    clock.now += 0.01
    with pytest.raises(RuntimeError, match="before it was allowed"):
        floor.start("rate")


def test_a_rate_after_a_slow_down_and_after_a_restart() -> None:
    """A 44's back-off still counts from the 44's end; a restart knows the last start as
    the last end less the last duration."""
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.set_pace("a", HostPace(delay=0.1, between_starts=True))
    p.start("a")
    clock.now += 0.02
    assert p.finish("a", 0.02, 44) == SLOW_DOWN_BASE
    assert p.ready_at("a") == pytest.approx(1000.02 + SLOW_DOWN_BASE)
    assert p.request_cost("a") == pytest.approx(0.02 + SLOW_DOWN_BASE)
    r = Politeness(clock, test_range=True)
    r.set_pace("a", HostPace(delay=0.1, between_starts=True))
    r.restore("a", last_end=1000.05, last_duration=0.04, not_before=0.0, slow_downs=0)
    clock.now = 1000.05
    assert r.ready_at("a") == pytest.approx(1000.11)


def test_a_rate_on_a_shared_address_counts_from_the_address_s_last_start() -> None:
    """Off a test range a host whose rate asks less than the address's rule of thumb
    waits its interval from the start of the address's last request, whoever made it."""
    clock = Clock()
    p = Politeness(clock)
    for host in ("quick", "other"):
        p.set_group(host, "addr")
    p.set_pace("quick", HostPace(delay=1.0, between_starts=True))
    p.set_pace("other", HostPace(delay=1.0))
    p.start("other")
    clock.now += 0.4
    p.finish("other", 0.4, 20)
    assert p.ready_at("quick") == pytest.approx(1001.0)  # 1 s after other's start
    assert p.ready_at("other") == pytest.approx(1001.4)  # 1 s after its own end
