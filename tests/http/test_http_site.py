"""A web host's policy as compare obtains it (geminibot.classify.sources.site_from_url)
from a loopback server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from webserver import Page, serve, system_tls, text

from geminibot.classify.sources import site_from_url
from geminibot.http.client import WebClient
from geminibot.net.limits import DEFAULT_MAX_BODY_SIZE
from geminibot.policy.site_policy import Bot, SitePolicy

BOT = Bot("geminibot", ("indexer",), "search-indexer")
AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


async def web_policy(routes: dict[str, Page]) -> SitePolicy:
    with serve(routes) as web:  # type: ignore[arg-type]
        async with WebClient(
            verify=system_tls(), connect_to={"web.test": ("127.0.0.1", web.port)}
        ) as client:
            return await site_from_url("http://web.test/", client)


@pytest.mark.parametrize("status", [300, 304, 305])
async def test_unfollowable_redirect_for_robots_txt_is_unavailable(status: int) -> None:
    """No ValueError ("a redirect has no policy of its own"), so compare
    does not exit 2: a 3xx that cannot be followed reads as a 4xx (allow all)."""
    policy = await web_policy({"/robots.txt": Page(status)})
    assert policy.may_fetch("http://web.test/anything", BOT, AT).allowed
    assert policy.robots is not None and "unavailable" in policy.robots.blanket_reason


async def test_policy_file_over_the_client_limit_is_read_in_part() -> None:
    """A robots.txt larger than the client's body limit is cut and its
    first 500 KiB parsed, never taken as unreachable (which would disallow everything)."""
    body = "User-agent: *\nDisallow: /private\n" + "#" * (DEFAULT_MAX_BODY_SIZE + 1024)
    policy = await web_policy({"/robots.txt": text(body)})
    assert policy.may_fetch("http://web.test/public", BOT, AT).allowed
    assert not policy.may_fetch("http://web.test/private", BOT, AT).allowed
