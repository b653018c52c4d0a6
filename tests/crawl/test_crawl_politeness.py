"""The politeness schedule with a fake clock: an address's pace learned from its answers
(additive increase, multiplicative decrease), a host's own policy on top, 44 back-off,
windows, absurd waits."""

import math

import pytest

from geminibot.crawl.politeness import (
    DEFAULT_DURATION_FACTOR,
    MAX_RATE,
    MAX_WAIT,
    RATE_DECREASE,
    RATE_STEP,
    SLOW_DOWN_BASE,
    START_DELAY,
    HostPace,
    Politeness,
    slow_down_wait,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ask(
    p: Politeness, clock: Clock, host: str, duration: float, status: int, meta: str = ""
) -> float:
    """One request to ``host`` as soon as it is allowed; returns the wait it imposed."""
    at = p.ready_at(host)
    assert at is not None
    clock.now = at
    p.start(host)
    clock.now += duration
    return p.finish(host, duration, status, meta)


def test_an_address_starts_at_the_rule_of_thumb() -> None:
    """The first request at once, the next START_DELAY after its end (the rate went up
    by one step meanwhile); a slow answer makes the wait twice its duration."""
    clock = Clock()
    p = Politeness(clock)
    assert p.ready_at("a") == 1000.0
    assert p.rate("a") == pytest.approx(1 / START_DELAY)
    p.start("a")
    clock.now += 0.5
    p.finish("a", 0.5, 20)
    assert p.rate("a") == pytest.approx(1 / START_DELAY + RATE_STEP)
    assert p.ready_at("a") == pytest.approx(1000.5 + 1 / (1 / START_DELAY + RATE_STEP))
    p.start("b")  # another address: its own pace
    clock.now += 8
    p.finish("b", 8.0, 20)
    assert p.rate("b") == pytest.approx(1 / START_DELAY)  # not quick: no faster
    assert p.ready_at("b") == clock.now + 16.0  # twice the last duration


def test_one_request_in_flight_and_not_early() -> None:
    clock = Clock()
    p = Politeness(clock)
    p.set_group("a", "addr")
    p.set_group("b", "addr")
    p.start("a")
    with pytest.raises(RuntimeError, match="in flight"):
        p.start("a")
    with pytest.raises(RuntimeError, match="address is already in flight"):
        p.start("b")
    p.finish("a", 0.1, 20)
    with pytest.raises(RuntimeError, match="before it was allowed"):
        p.start("a")
    with pytest.raises(RuntimeError, match="before it was allowed"):
        p.start("b")


def test_quick_answers_raise_the_rate_step_by_step_up_to_the_ceiling() -> None:
    """Additive increase: each quick answer adds RATE_STEP, never past MAX_RATE; the
    waits between requests shrink to 1 / MAX_RATE and stay there."""
    clock = Clock()
    p = Politeness(clock)
    rates = []
    for _ in range(24):
        ask(p, clock, "a", 0.01, 20)
        rates.append(p.rate("a"))
    steps = round((MAX_RATE - 1 / START_DELAY) / RATE_STEP)
    assert rates[:steps] == pytest.approx(
        [1 / START_DELAY + RATE_STEP * n for n in range(1, steps + 1)]
    )
    assert rates[steps:] == [MAX_RATE] * (24 - steps)
    assert p.ready_at("a") == pytest.approx(clock.now + 1 / MAX_RATE)
    assert Politeness(clock, max_rate=0.5).max_rate == 0.5


def test_an_answer_counts_as_quick_up_to_its_edge() -> None:
    """An answer that took exactly 1 / DEFAULT_DURATION_FACTOR of the wait is quick;
    longer is not (the rate stays); no answer at all leaves the rate too."""
    clock = Clock()
    p = Politeness(clock)
    edge = 1 / (1 / START_DELAY) / DEFAULT_DURATION_FACTOR
    ask(p, clock, "a", edge, 20)
    assert p.rate("a") == pytest.approx(1 / START_DELAY + RATE_STEP)
    wait = 1 / p.rate("a")
    ask(p, clock, "a", wait / DEFAULT_DURATION_FACTOR + 0.001, 20)
    assert p.rate("a") == pytest.approx(1 / START_DELAY + RATE_STEP)
    ask(p, clock, "a", 0.01, None)  # type: ignore[arg-type]
    assert p.rate("a") == pytest.approx(1 / START_DELAY + RATE_STEP)


def test_a_44_slows_every_host_on_the_address_and_the_pace_recovers_step_by_step() -> None:
    """Multiplicative decrease: a 44 to one host halves the address's rate at once, for
    every host on it; the host itself waits the 44's wait as well, the hosts on other
    addresses go on; then each quick answer adds RATE_STEP again, whichever host it came
    from."""
    clock = Clock()
    p = Politeness(clock)
    for host in ("a", "b", "c"):
        p.set_group(host, "shared")
    p.set_group("elsewhere", "other")
    for _ in range(20):
        ask(p, clock, "a", 0.01, 20)
    assert p.rate("b") == MAX_RATE
    assert ask(p, clock, "a", 0.01, 44, "5") == 5.0
    assert p.rate("c") == pytest.approx(MAX_RATE * RATE_DECREASE)
    assert p.own_rate("a") == pytest.approx(1 / 5)  # at most one request per 5 s
    assert p.own_rate("b") == math.inf
    halved = 1 / (MAX_RATE * RATE_DECREASE)
    assert p.ready_at("a") == pytest.approx(clock.now + 5.0)  # the 44's own wait
    assert p.ready_at("b") == pytest.approx(clock.now + halved)
    assert p.ready_at("c") == pytest.approx(clock.now + halved)
    assert p.ready_at("elsewhere") == clock.now
    ask(p, clock, "b", 0.01, 20)
    assert p.rate("a") == pytest.approx(MAX_RATE * RATE_DECREASE + RATE_STEP)
    assert p.ready_at("c") == pytest.approx(clock.now + 1 / p.rate("c"))
    for _ in range(3):
        ask(p, clock, "c", 0.01, 20)
    assert p.rate("a") == pytest.approx(MAX_RATE * RATE_DECREASE + 4 * RATE_STEP)
    ask(p, clock, "a", 0.01, 44)
    ask(p, clock, "a", 0.01, 44)
    assert p.rate("a") == pytest.approx((MAX_RATE * RATE_DECREASE + 4 * RATE_STEP) / 4)


@pytest.mark.parametrize(
    ("gap", "between", "host_alone"),
    [
        (0.9, (20,), True),  # asked sooner than its 44's wait, a neighbour answered
        (1.0, (20,), False),  # at the wait's edge: the address was too fast
        (0.9, (44, 20), False),  # a neighbour answered, but another was slowed down
        (0.9, (), False),  # no neighbour in between: it cannot tell
    ],
)
def test_a_44_that_is_the_host_s_own_limit_slows_that_host_alone(
    gap: float, between: tuple[int, ...], host_alone: bool
) -> None:
    """A host's first 44 slows its address and holds the host to one request per the
    wait it asks (quick answers raise that again). Later, a host asked again sooner than
    its 44's wait while another host of its address answered in between, and none drew a
    44, limits itself: its own rate is halved and the address's stays; otherwise the
    address's is halved."""
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.set_group("limited", "shared")
    p.set_group("fine", "shared")
    ask(p, clock, "fine", 0.01, 20)
    ask(p, clock, "limited", 0.01, 44, "1")
    assert p.rate("fine") == pytest.approx(RATE_DECREASE / 0.01)
    assert p.own_rate("limited") == 1.0
    assert p.own_rate("fine") == math.inf
    for _ in range(3):
        ask(p, clock, "limited", 0.01, 20)
    own, shared = p.own_rate("limited"), p.rate("fine")
    assert own == pytest.approx(1.0 + 3 * RATE_STEP)
    start = clock.now - 0.01
    for neighbour, status in zip(("first", "second"), between, strict=False):
        p.set_group(neighbour, "shared")
        ask(p, clock, neighbour, 0.01, status, "1")
        shared = p.rate("fine")
    clock.now = start + gap
    p.start("limited")
    clock.now += 0.01
    assert p.finish("limited", 0.01, 44, "1") == 1.0
    if host_alone:
        assert p.rate("fine") == shared
        assert p.own_rate("limited") == pytest.approx(own * RATE_DECREASE)
    else:
        assert p.rate("fine") == pytest.approx(shared * RATE_DECREASE)
        assert p.own_rate("limited") == 1.0
    waits = 1 / p.own_rate("limited"), 1 / p.rate("fine")
    assert p.ready_at("limited") == pytest.approx(clock.now + max(waits))


def test_a_host_that_answers_44_again_and_again_is_skipped_whatever_its_neighbours() -> None:
    """Each host doubles its own back-off with its own 44s in a row, even when the other
    hosts of its address answer in between (which resets the address's count): it ends
    up skipped for now, not asked for ever."""
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.set_group("stubborn", "shared")
    p.set_group("fine", "shared")
    waits = []
    while p.ready_at("stubborn") is not None:
        waits.append(ask(p, clock, "stubborn", 0.01, 44))
        ask(p, clock, "fine", 0.01, 20)
    assert waits[:4] == [SLOW_DOWN_BASE * 2**n for n in range(4)]
    assert len(waits) == 13  # 2 ** 12 s is more than an hour
    assert p.ready_at("fine") is not None


def test_test_range_starts_unbounded_and_the_first_44_halves_the_pace_it_was_asked_at() -> None:
    """With test_range the address starts unbounded (no floor, no ceiling); a 44 sets its
    rate to RATE_DECREASE of the pace it was asked at (its last two starts), and quick
    answers raise it past MAX_RATE."""
    clock = Clock()
    p = Politeness(clock, test_range=True)
    ask(p, clock, "a", 0.1, 20)
    assert p.ready_at("a") == clock.now
    ask(p, clock, "a", 0.1, 20)
    ask(p, clock, "a", 0.1, 44, "1")
    assert p.rate("a") == pytest.approx(RATE_DECREASE / 0.1)
    for _ in range(100):
        ask(p, clock, "a", 0.001, 20)
    assert p.rate("a") == pytest.approx(RATE_DECREASE / 0.1 + 100 * RATE_STEP)
    assert p.rate("a") > MAX_RATE
    first = Politeness(clock, test_range=True)
    ask(first, clock, "a", 0.1, 44)  # no pace known: one request per SLOW_DOWN_BASE
    assert first.rate("a") == pytest.approx(RATE_DECREASE / SLOW_DOWN_BASE)


def test_a_policy_delay_holds_on_top_of_the_address_pace() -> None:
    """A host's Crawl-delay counts from its own last request, on top of its address's
    pace: longer than the address's wait, it is waited; shorter, the address's holds."""
    clock = Clock()
    p = Politeness(clock)
    for host in ("slow", "quick"):
        p.set_group(host, "addr")
    for _ in range(20):
        ask(p, clock, "quick", 0.01, 20)
    p.set_pace("slow", HostPace(delay=3.0))
    p.set_pace("quick", HostPace(delay=0.1))
    ask(p, clock, "slow", 0.01, 20)
    slow_end = clock.now
    assert p.ready_at("quick") == pytest.approx(clock.now + 1 / MAX_RATE)
    assert p.ready_at("slow") == pytest.approx(slow_end + 3.0)
    for _ in range(5):  # quick keeps the address busy at its pace
        ask(p, clock, "quick", 0.01, 20)
        assert p.ready_at("slow") == pytest.approx(max(slow_end + 3.0, clock.now + 1.0))
    t = Politeness(clock, test_range=True)
    t.set_pace("a", HostPace(delay=3.0))
    ask(t, clock, "a", 0.1, 20)
    assert t.ready_at("a") == clock.now + 3.0  # a policy delay holds on a test range


def test_slow_down_backoff() -> None:
    assert slow_down_wait("", 1) == SLOW_DOWN_BASE
    assert slow_down_wait("", 3) == 4 * SLOW_DOWN_BASE
    assert slow_down_wait("5", 1) == 5.0
    assert slow_down_wait("5", 4) == 8.0 * SLOW_DOWN_BASE
    assert slow_down_wait("soon", 1) == SLOW_DOWN_BASE
    clock = Clock()
    p = Politeness(clock, test_range=True)
    waits = [ask(p, clock, "a", 0.0, 44, "2") for _ in range(3)]
    assert waits == [2.0, 2.0, 4.0]
    assert p.rate("a") == RATE_DECREASE**3 / SLOW_DOWN_BASE  # the address, halved thrice
    assert p.ready_at("a") == clock.now + max(4.0, 1 / p.rate("a"))
    assert ask(p, clock, "a", 0.0, 20) == 0.0
    assert p.state("a")[3] == 0  # back-off reset
    # ... and no wait is kept as a delay: the address's rate says the rest
    assert p.ready_at("a") == pytest.approx(clock.now + 1 / p.rate("a"))
    assert p.rate("a") < 1 / SLOW_DOWN_BASE


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
    q = Politeness(clock)
    q.restore("b", last_end=clock.now - 1.0, last_duration=0.1, not_before=0.0, slow_downs=0)
    q.set_group("b", "addr")
    assert q.ready_at("b") == pytest.approx(clock.now - 1.0 + START_DELAY)


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
    """A 44's back-off still counts from the 44's end (the address's rate, halved from one
    request per SLOW_DOWN_BASE, waits longer still); a restart knows the last start as
    the last end less the last duration."""
    clock = Clock()
    p = Politeness(clock, test_range=True)
    p.set_pace("a", HostPace(delay=0.1, between_starts=True))
    p.start("a")
    clock.now += 0.02
    assert p.finish("a", 0.02, 44) == SLOW_DOWN_BASE
    assert p.rate("a") == pytest.approx(RATE_DECREASE / SLOW_DOWN_BASE)
    assert p.ready_at("a") == pytest.approx(1000.02 + 1 / p.rate("a"))
    assert p.request_cost("a") == pytest.approx(0.02 + 1 / p.rate("a"))
    r = Politeness(clock, test_range=True)
    r.set_pace("a", HostPace(delay=0.1, between_starts=True))
    r.restore("a", last_end=1000.05, last_duration=0.04, not_before=0.0, slow_downs=0)
    clock.now = 1000.05
    assert r.ready_at("a") == pytest.approx(1000.11)
