"""bench/space_crawl.py's arithmetic (tenths, py-spy sample split), the space's address
rules, and the next-host choice measured on a small frontier."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import space_crawl  # noqa: E402
from geminispace.server import MAX_ADDRESSES, address_rules, loopback_address  # noqa: E402
from geminispace.space import Space  # noqa: E402


def test_tenths_of_a_steady_and_a_slowing_crawl() -> None:
    steady = space_crawl.tenths([k / 10 for k in range(101)])  # 10 pages/s throughout
    assert steady == pytest.approx([10.0] * 10)
    slowing = [k / 10 for k in range(50)] + [5 + k for k in range(1, 51)]  # then 1/s
    rates = space_crawl.tenths(slowing)
    assert rates[0] == pytest.approx(10.0) and rates[-1] == pytest.approx(1.0)
    assert space_crawl.tenths([1.0] * 19) == []


def test_samples_split_by_innermost_known_frame() -> None:
    tls = "run (trio/_core/_run.py:1);send (geminibot/crawl/adapters.py:9);do_handshake (ssl.py:9)"
    sql = "run (trio/_core/_run.py:1);fetched (geminibot/crawl/store.py:3)"
    parse = "run (x.py:1);extract (geminibot/crawl/adapters.py:40);parse (geminibot/gemini/gemtext.py:2)"
    policy = (
        "run (x.py:1);may_fetch (geminibot/policy/site_policy.py:5);normalise (geminibot/urls.py:1)"
    )
    idle = "run (x.py:1);get_events (trio/_core/_io_epoll.py:243) 9"  # waiting: dropped
    tcp = "open (geminibot/gemini/client.py:1);connect (trio/_socket.py:1132) 2"
    lines = [f"{tls} 5", f"{sql} 3", f"{parse} 2", f"{policy} 1", "run (trio/_core/_run.py:9) 4"]
    assert space_crawl.split_samples([*lines, idle, tcp]) == {
        "TLS": 5,
        "SQLite": 3,
        "parsing": 3,  # geminibot/urls.py inside the policy's call counts as parsing
        "other": 4,
        "TCP": 2,
    }
    assert space_crawl.classify("may_fetch (geminibot/policy/site_policy.py:5)") == "policy"


def test_normal_hosts() -> None:
    space = Space(12, 400, 7)
    kinds = {
        space.behaviour(i)
        for i in range(12)
        if space_crawl.normal_host(space, f"gemini://{space.host(i)}/x")
    }
    assert kinds == {"normal"}
    assert not space_crawl.normal_host(space, "gemini://elsewhere.test/")


def test_address_rules() -> None:
    assert address_rules(7000, 0) == ["*.space.test:1965:127.0.0.1:7000"]
    rules = address_rules(7000, 10)
    assert rules[3] == "h*3.space.test:1965:127.0.1.4:7000" and len(rules) == 10
    assert len(address_rules(7000, 4)) == 100  # by the last two digits
    with pytest.raises(ValueError):
        address_rules(7000, 3)
    assert loopback_address(MAX_ADDRESSES) == "127.0.1.254"
    with pytest.raises(ValueError):
        loopback_address(MAX_ADDRESSES + 1)


def test_next_host_choice_on_a_small_frontier(tmp_path: Path) -> None:
    figures = space_crawl.choice_latency(tmp_path / "f.db", 50, 5000)
    assert figures["queued"] == 5000
    assert set(figures) >= {"group_by_ms_median", "choice_ms_median", "choice_ms_p99"}
