"""The per-address token bucket at its edges (the clock is a plain number)."""

from __future__ import annotations

import pytest

from geminibot.gemini import ratelimit
from geminibot.gemini.ratelimit import RateLimiter


def test_burst_then_wait() -> None:
    limiter = RateLimiter(burst=3, per_second=2.0)
    assert [limiter.take("a", 0.0) for _ in range(3)] == [None, None, None]
    assert limiter.take("a", 0.0) == pytest.approx(0.5)
    assert limiter.take("b", 0.0) is None  # per address
    assert limiter.take("a", 0.49) == pytest.approx(0.01)
    assert limiter.take("a", 0.5) is None
    assert limiter.take("a", 0.5) == pytest.approx(0.5)


def test_refill_is_capped_at_burst() -> None:
    limiter = RateLimiter(burst=2, per_second=1.0)
    assert limiter.take("a", 0.0) is None
    assert [limiter.take("a", 1000.0) for _ in range(3)][2] is not None


def test_invalid_settings() -> None:
    with pytest.raises(ValueError):
        RateLimiter(0, 1.0)
    with pytest.raises(ValueError):
        RateLimiter(1, 0.0)


def test_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ratelimit, "MAX_TRACKED_CLIENTS", 10)
    limiter = RateLimiter(burst=5, per_second=1.0)
    for i in range(50):
        for _ in range(5):
            limiter.take(f"10.0.0.{i}", float(i) * 0.001)
    assert len(limiter._buckets) <= 10


def test_a_costly_take_spends_its_cost_and_waits_for_all_of_it() -> None:
    limiter = RateLimiter(burst=10, per_second=2.0)
    assert limiter.take("a", 0.0, cost=10) is None  # the whole burst at once
    assert limiter.take("a", 0.0, cost=4) == pytest.approx(2.0)
    assert limiter.take("a", 1.99, cost=4) == pytest.approx(0.01)
    assert limiter.take("a", 2.0, cost=4) is None
    assert limiter.take("b", 0.0, cost=1000) is None  # at most the burst
    assert limiter.take("b", 0.0, cost=1) == pytest.approx(0.5)
