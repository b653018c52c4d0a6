"""A web host's policy as a bot obtains it: robots.txt, robots2.txt (and its chain) and
agents.txt fetched with the http(s) client, read by :mod:`geminibot.policy.discovery` (the
same reading as the crawler's and the Gemini side's, :mod:`geminibot.classify.sources`).
"""

from __future__ import annotations

from dataclasses import replace

from geminibot.http.client import WebClient
from geminibot.http.urls import parse_web_url
from geminibot.net.errors import FetchError, RedirectRefused, TooManyRedirects
from geminibot.policy.discovery import (
    MAX_ROBOTS_REDIRECTS,
    POLICY_FETCH_BYTES,
    PolicyAnswer,
    discover_reachable,
    parse_retry_after,
)
from geminibot.policy.site_policy import SitePolicy
from geminibot.urls import InvalidURL


async def fetch_policy_file(client: WebClient, url: str) -> PolicyAnswer:
    """Fetch one policy file, redirects followed by the client; never raises for the
    server's faults (a failed fetch is an answer with a failure)."""
    try:
        limits = replace(client.limits, max_body_size=POLICY_FETCH_BYTES, cut_body=True)
        response = await client.fetch(url, limits=limits)
    except (TooManyRedirects, RedirectRefused) as exc:
        # a redirect chain that does not end: RFC 9309 counts it as unavailable
        return PolicyAnswer(301, str(exc), redirects=MAX_ROBOTS_REDIRECTS)
    except (FetchError, InvalidURL) as exc:
        return PolicyAnswer(None, failure=f"{type(exc).__name__}: {exc}")
    return PolicyAnswer(
        response.status,
        response.header("location") or "",
        response.body,
        redirects=len(response.redirects),
        retry_after=parse_retry_after(response.header("retry-after")),
    )


async def site_from_web(url: str, client: WebClient) -> SitePolicy:
    """The policy a bot obtains from the origin of ``url`` (an http(s) URL); raises
    :class:`~geminibot.policy.discovery.PolicyUnreachable` when the host does not answer."""

    async def fetch(target: str) -> PolicyAnswer:
        return await fetch_policy_file(client, target)

    return await discover_reachable("http", parse_web_url(url).origin + "/", fetch)
