"""PolicyDiscovery: the policy files a bot reads, in order, and what they add up to (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from geminibot.policy.discovery import (
    MAX_POLICY_FILE_BYTES,
    POLICY_FETCH_BYTES,
    PolicyAnswer,
    PolicyDiscovery,
    read_answer,
)
from geminibot.policy.outcomes import MAX_ROBOTS_REDIRECTS
from geminibot.policy.site_policy import Bot, SitePolicy

BOT = Bot("geminibot", ("indexer",), "search-indexer")
AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def walk(discovery: PolicyDiscovery, site: dict[str, PolicyAnswer]) -> list[str]:
    """Answer every request from ``site`` (absent: 404 / 51); the URLs asked for."""
    asked = []
    missing = PolicyAnswer(51 if discovery.protocol == "gemini" else 404)
    while (request := discovery.next_request()) is not None:
        asked.append(request.url)
        discovery.receive(site.get(request.url, missing))
    return asked


def test_files_in_order_with_the_chain_after_robots2() -> None:
    discovery = PolicyDiscovery("http", "https://s.test")
    site = {
        "https://s.test/robots.txt": PolicyAnswer(200, body=b"User-agent: *\nDisallow: /p\n"),
        "https://s.test/robots2.txt": PolicyAnswer(200, body=b"rate: 6\nchain: /more.txt\n"),
        "https://s.test/more.txt": PolicyAnswer(200, body=b"train: no\nchain: gemini://g/x\n"),
    }
    assert walk(discovery, site) == [
        "https://s.test/robots.txt",
        "https://s.test/robots2.txt",
        "https://s.test/more.txt",  # the gemini:// link is another protocol: not fetched
        "https://s.test/agents.txt",
    ]
    policy = discovery.result
    assert not policy.may_fetch("https://s.test/p", BOT, AT).allowed
    assert policy.usage_map(BOT)["train"] == "no"
    assert policy.robots2 is not None and "could not fetch gemini://g/x" in policy.robots2.stop
    assert discovery.done and discovery.next_request() is None
    with pytest.raises(RuntimeError):
        discovery.receive(PolicyAnswer(200))


def test_robots_txt_is_read_once_however_often_the_result_is_asked() -> None:
    """A bot asks for the policy after each file (for the pace): robots.txt, up to 500 KiB,
    is parsed once, and each result is the whole policy of what was received so far."""
    discovery = PolicyDiscovery("gemini", "gemini://g.test/")
    robots = b"User-agent: *\nDisallow: /p\nCrawl-delay: 3\n"
    discovery.receive(PolicyAnswer(20, meta="text/plain", body=robots))
    first = discovery.result
    assert first.agents is None and first.robots2 is None
    discovery.receive(PolicyAnswer(20, meta="text/plain", body=b"rate: 6\n"))
    second = discovery.result
    assert second.robots is first.robots and second.ext20 is first.ext20
    assert second.robots2 is not None
    walk(discovery, {})
    final = discovery.result
    assert final.robots is first.robots and final.ext20 is first.ext20
    assert not final.may_fetch("gemini://g.test/p", BOT, AT).allowed
    alone = SitePolicy.from_texts("gemini", robots, b"rate: 6\n")
    assert final.delay(BOT, AT).seconds == alone.delay(BOT, AT).seconds == 10


@pytest.mark.parametrize("status", [300, 304, 305, 399])
def test_a_redirect_handed_back_is_unavailable(status: int) -> None:
    """An HTTP 3xx the transport could not follow (300, 304, 305: no
    Location to follow) reads as unavailable, as a 4xx does; it never raises."""
    fetched = read_answer("http", PolicyAnswer(status))
    assert fetched.outcome.kind == "unavailable"
    discovery = PolicyDiscovery("http", "https://s.test/")
    walk(discovery, {"https://s.test/robots.txt": PolicyAnswer(status)})
    assert discovery.result.may_fetch("https://s.test/anything", BOT, AT).allowed


def test_a_gemini_redirect_to_another_protocol_is_unavailable() -> None:
    fetched = read_answer("gemini", PolicyAnswer(31, "https://elsewhere.test/robots.txt"))
    assert fetched.outcome.kind == "unavailable"
    assert "not followed" in fetched.outcome.reason


def test_too_many_redirects_are_unavailable() -> None:
    answer = PolicyAnswer(301, "/again", redirects=MAX_ROBOTS_REDIRECTS)
    assert read_answer("http", answer).outcome.kind == "unavailable"


def test_an_over_large_file_is_read_in_part_never_unreachable() -> None:
    """The first 500 KiB are parsed; the rest is cut, not refused."""
    rules = b"User-agent: *\nDisallow: /private\n"
    body = rules + b"#" * (3 * MAX_POLICY_FILE_BYTES) + b"\nDisallow: /late\n"
    fetched = read_answer("gemini", PolicyAnswer(20, "text/plain", body))
    assert fetched.outcome.kind == "success"
    assert isinstance(fetched.body, bytes) and len(fetched.body) == POLICY_FETCH_BYTES
    discovery = PolicyDiscovery("gemini", "gemini://big.test/")
    walk(discovery, {"gemini://big.test/robots.txt": PolicyAnswer(20, "text/plain", body)})
    policy = discovery.result
    assert policy.may_fetch("gemini://big.test/public", BOT, AT).allowed
    assert not policy.may_fetch("gemini://big.test/private", BOT, AT).allowed
    assert policy.may_fetch("gemini://big.test/late", BOT, AT).allowed  # beyond the limit


def test_an_unreachable_file_restricts_everything() -> None:
    discovery = PolicyDiscovery("gemini", "gemini://down.test/")
    walk(discovery, {"gemini://down.test/robots.txt": PolicyAnswer(None, failure="refused")})
    assert not discovery.result.may_fetch("gemini://down.test/x", BOT, AT).allowed
