"""A web host's policy as a bot obtains it: robots.txt, robots2.txt (and its chain) and
agents.txt fetched with the http(s) client, each read through RFC 9309's fetch outcomes.

The Gemini counterpart is :func:`geminibot.classify.sources.site_from_url`. (The crawler
fetches the same files through its own politeness schedule and cache instead.)
"""

from __future__ import annotations

from geminibot.http.client import WebClient
from geminibot.http.urls import parse_web_url
from geminibot.net.errors import FetchError, RedirectRefused, TooManyRedirects
from geminibot.policy.outcomes import MAX_ROBOTS_REDIRECTS, fetch_outcome
from geminibot.policy.robots2 import ChainWalker, parse_robots2
from geminibot.policy.site_policy import AGENTS, ROBOTS, ROBOTS2, Fetched, SitePolicy
from geminibot.urls import InvalidURL


async def fetch_policy_file(client: WebClient, url: str) -> Fetched:
    """Fetch one policy file (redirects followed by the client); never raises for the
    server's faults: a failed fetch is an unreachable outcome."""
    try:
        response = await client.fetch(url)
    except (TooManyRedirects, RedirectRefused) as exc:
        # a redirect chain that does not end: RFC 9309 counts it as unavailable
        return Fetched(
            fetch_outcome("http", 301, meta=str(exc), redirects_followed=MAX_ROBOTS_REDIRECTS)
        )
    except (FetchError, InvalidURL) as exc:
        return Fetched(fetch_outcome("http", failure=f"{type(exc).__name__}: {exc}"))
    retry = (response.header("retry-after") or "").strip()
    outcome = fetch_outcome(
        "http",
        response.status,
        meta=response.header("location") or "",
        redirects_followed=len(response.redirects),
        retry_after=float(retry) if retry.isascii() and retry.isdigit() else None,
    )
    return Fetched(outcome, response.body if outcome.kind == "success" else None)


async def site_from_web(url: str, client: WebClient) -> SitePolicy:
    """The policy a bot obtains from the origin of ``url`` (an http(s) URL)."""
    root = parse_web_url(url).origin + "/"
    robots = await fetch_policy_file(client, root + ROBOTS)
    robots2 = await fetch_policy_file(client, root + ROBOTS2)
    agents = await fetch_policy_file(client, root + AGENTS)
    chain: dict[str, bytes | str | None] = {}
    if robots2.outcome.kind == "success" and robots2.body is not None:
        walker = ChainWalker(parse_robots2(robots2.body), root + ROBOTS2)
        while (link := walker.next_url()) is not None:
            fetched = (
                await fetch_policy_file(client, link)
                if link.startswith(("http://", "https://"))
                else Fetched(fetch_outcome("http", failure="not an http(s) URL"))
            )
            chain[link] = fetched.body
            walker.feed(link, fetched.body)
    return SitePolicy.build(
        "http", robots, robots2, agents, robots2_url=root + ROBOTS2, chain_fetch=chain
    )
