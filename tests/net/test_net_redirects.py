"""The redirect policy (geminibot.net.redirects), pure: every check, and the hop limit at
its edge."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from geminibot.net.errors import (
    InvalidRedirect,
    OffSiteRedirect,
    RedirectLoop,
    SchemeSwitchRefused,
    TooManyRedirects,
)
from geminibot.net.redirects import RedirectRules, follow_chain, next_hop
from geminibot.urls import URL, WEB_SCHEMES, parse_url

GEMINI = RedirectRules(("gemini",), max_redirects=5, max_url_bytes=1024)
WEB = RedirectRules(WEB_SCHEMES, max_redirects=5)


def chain(n: int, base: str = "gemini://h.test") -> list[URL]:
    """``n`` distinct URLs already redirected from."""
    return [parse_url(f"{base}/r{i}") for i in range(n)]


def test_relative_target_is_resolved_and_normalised() -> None:
    here = parse_url("gemini://h.test/a/b")
    assert next_hop(here, " ../c/./d ", [], GEMINI) == parse_url("gemini://h.test/c/d")
    assert next_hop(here, "//other.test:1966/x", [], GEMINI) == parse_url(
        "gemini://other.test:1966/x"
    )


@pytest.mark.parametrize("followed", [0, 1, 4])
def test_below_the_hop_limit_the_redirect_is_followed(followed: int) -> None:
    here = parse_url("gemini://h.test/here")
    assert next_hop(here, "/next", chain(followed), GEMINI) == parse_url("gemini://h.test/next")


def test_at_the_hop_limit_the_next_redirect_is_refused() -> None:
    here = parse_url("gemini://h.test/here")
    with pytest.raises(TooManyRedirects, match="more than 5"):
        next_hop(here, "/next", chain(5), GEMINI)
    zero = RedirectRules(("gemini",), max_redirects=0)
    with pytest.raises(TooManyRedirects):
        next_hop(here, "/next", [], zero)


def test_a_loop_is_refused_as_soon_as_it_closes() -> None:
    here = parse_url("gemini://h.test/here")
    with pytest.raises(RedirectLoop):
        next_hop(here, "/here", [], GEMINI)  # to itself
    with pytest.raises(RedirectLoop):
        next_hop(here, "gemini://H.TEST:1965/r1", chain(3), GEMINI)  # back, once normalised
    # a loop at the hop limit is reported as the loop it is
    with pytest.raises(RedirectLoop):
        next_hop(here, "/r0", chain(5), GEMINI)


def test_another_scheme_is_refused_or_handed_back() -> None:
    here = parse_url("gemini://h.test/")
    with pytest.raises(SchemeSwitchRefused):
        next_hop(here, "https://h.test/", [], GEMINI)
    handed_back = RedirectRules(("gemini",), switch_schemes=True)
    assert next_hop(here, "https://h.test/", [], handed_back) is None
    web = parse_url("https://h.test/")
    assert next_hop(web, "http://h.test/x", [], WEB) == parse_url("http://h.test/x")
    with pytest.raises(SchemeSwitchRefused):
        next_hop(web, "gemini://h.test/", [], WEB)


def test_no_target_is_handed_back() -> None:
    web = parse_url("https://h.test/")
    assert next_hop(web, None, [], WEB) is None
    assert next_hop(web, "  ", [], WEB) is None


def test_an_invalid_target_is_the_servers_fault() -> None:
    here = parse_url("gemini://h.test/")
    for bad in ("gemini://user@h.test/", "gemini://h.test:99999/", "gemini://-bad-/"):
        with pytest.raises(InvalidRedirect):
            next_hop(here, bad, [], GEMINI)


def test_url_length_limit_edge() -> None:
    here = parse_url("gemini://h.test/")
    prefix = "gemini://h.test/"
    fits = prefix + "a" * (1024 - len(prefix))
    assert str(next_hop(here, fits, [], GEMINI)) == fits
    with pytest.raises(InvalidRedirect, match="1025 bytes"):
        next_hop(here, fits + "a", [], GEMINI)
    # the limit applies to the URL as requested: escapes count once normalised
    with pytest.raises(InvalidRedirect):
        next_hop(here, prefix + "é" * 600, [], GEMINI)


def test_same_origin_only() -> None:
    rules = RedirectRules(("gemini",), same_origin=True)
    here = parse_url("gemini://h.test/robots.txt")
    assert next_hop(here, "/real.txt", [], rules) == parse_url("gemini://h.test/real.txt")
    for elsewhere in ("gemini://other.test/robots.txt", "gemini://h.test:1966/robots.txt"):
        with pytest.raises(OffSiteRedirect):
            next_hop(here, elsewhere, [], rules)


def site(
    locations: dict[str, str | None],
) -> tuple[
    list[tuple[str, tuple[str, ...]]],
    Callable[[URL, tuple[URL, ...]], Awaitable[tuple[str, str | None]]],
]:
    """An exchange over a table path -> redirect target (None: a final answer); it logs
    each request with the URLs it was told had redirected before it."""
    log: list[tuple[str, tuple[str, ...]]] = []

    async def exchange(url: URL, followed: tuple[URL, ...]) -> tuple[str, str | None]:
        log.append((url.path, tuple(u.path for u in followed)))
        return url.path, locations[url.path]

    return log, exchange


def location(response: tuple[str, str | None]) -> str | None:
    return response[1]


async def test_follow_chain_drives_the_requests() -> None:
    log, exchange = site({"/a": "/b", "/b": "c", "/c": None})
    start = parse_url("gemini://h.test/a")
    assert await follow_chain(start, exchange, location, GEMINI) == ("/c", None)
    assert log == [("/a", ()), ("/b", ("/a",)), ("/c", ("/a", "/b"))]
    log.clear()
    assert await follow_chain(start, exchange, location, None) == ("/a", "/b")
    assert log == [("/a", ())]


async def test_follow_chain_stops_at_the_limit_and_hands_back() -> None:
    _, endless = site({f"/r{i}": f"/r{i + 1}" for i in range(10)})
    start = parse_url("gemini://h.test/r0")
    with pytest.raises(TooManyRedirects):
        await follow_chain(start, endless, location, GEMINI)
    log, exchange = site({"/r0": "/r1", "/r1": "https://h.test/"})
    handed_back = RedirectRules(("gemini",), switch_schemes=True)
    assert await follow_chain(start, exchange, location, handed_back) == (
        "/r1",
        "https://h.test/",
    )
    assert len(log) == 2
