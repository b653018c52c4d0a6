"""fetch_outcome: Gemini and HTTP statuses and failures mapped onto RFC 9309 results."""

import pytest

from geminibot.policy import fetch_outcome
from geminibot.policy.outcomes import (
    MAX_CACHE_SECONDS,
    MAX_ROBOTS_REDIRECTS,
    MAX_SLOW_DOWN_SECONDS,
    UNREACHABLE_RETRY_SECONDS,
)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (20, "success"),
        (21, "success"),
        (30, "redirect"),
        (31, "redirect"),
        (10, "unavailable"),
        (11, "unavailable"),
        (50, "unavailable"),
        (51, "unavailable"),
        (52, "unavailable"),
        (53, "unavailable"),
        (59, "unavailable"),
        (60, "unavailable"),
        (62, "unavailable"),
        (40, "unreachable"),
        (41, "unreachable"),
        (42, "unreachable"),
        (43, "unreachable"),
        (44, "unreachable"),
        (9, "unreachable"),
        (70, "unreachable"),
    ],
)
def test_gemini_statuses(status: int, kind: str) -> None:
    assert fetch_outcome("gemini", status).kind == kind


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, "success"),
        (301, "redirect"),
        (308, "redirect"),
        (400, "unavailable"),
        (403, "unavailable"),
        (404, "unavailable"),
        (410, "unavailable"),
        (429, "unreachable"),
        (500, "unreachable"),
        (503, "unreachable"),
        (100, "unreachable"),
        (600, "unreachable"),
    ],
)
def test_http_statuses(status: int, kind: str) -> None:
    assert fetch_outcome("http", status).kind == kind


def test_policies_follow_the_result() -> None:
    assert fetch_outcome("gemini", 51).policy().allowed("/x", "bot")
    unreachable = fetch_outcome("gemini", failure="TLS handshake failed").policy()
    assert not unreachable.allowed("/x", "bot")
    assert "TLS handshake failed" in unreachable.decide("/x", "bot").reason
    body = b"User-agent: *\nDisallow: /x\n"
    success = fetch_outcome("gemini", 20, meta="text/plain").policy(body)
    assert not success.allowed("/x", "bot") and success.allowed("/y", "bot")
    with pytest.raises(ValueError, match="redirect"):
        fetch_outcome("gemini", 31, meta="/elsewhere").policy()


def test_redirects_up_to_the_limit() -> None:
    last = fetch_outcome("gemini", 30, meta="/r", redirects_followed=MAX_ROBOTS_REDIRECTS - 1)
    assert last.kind == "redirect" and last.location == "/r"
    over = fetch_outcome("http", 302, meta="/r", redirects_followed=MAX_ROBOTS_REDIRECTS)
    assert over.kind == "unavailable"


def test_slow_down_waits() -> None:
    given = fetch_outcome("gemini", 44, meta="30")
    assert given.retry_after == 30 and not given.skip_host
    assert fetch_outcome("gemini", 44, meta="slow down").retry_after == UNREACHABLE_RETRY_SECONDS
    absurd = fetch_outcome("gemini", 44, meta=str(int(MAX_SLOW_DOWN_SECONDS) + 1))
    assert absurd.skip_host and absurd.retry_after == MAX_SLOW_DOWN_SECONDS
    edge = fetch_outcome("gemini", 44, meta=str(int(MAX_SLOW_DOWN_SECONDS)))
    assert not edge.skip_host


def test_cache_lifetimes() -> None:
    assert fetch_outcome("gemini", 20).cache_seconds == MAX_CACHE_SECONDS == 86400
    assert fetch_outcome("http", 404).cache_seconds == MAX_CACHE_SECONDS
    assert fetch_outcome("http", 429, retry_after=12).cache_seconds == 12
