"""The edge of ``classify --against``: from a SOURCE argument to a SitePolicy.

A SOURCE is one site:

* a policy file: ``robots2.txt`` and ``agents.txt`` are known by their names, any other
  file is read as robots.txt (a successful fetch of it, on a Gemini host by default);
* a folder (a capsule's or a site's document root): the three policy files in it, read as
  files (a missing one as an unavailable fetch: no restriction). How a server answers for
  them (a redirect, a temporary failure) is only seen through a URL;
* a ``gemini://`` URL: the three files are fetched from that host with the Gemini client
  (one after the other, then the robots2.txt chain), read through the same outcomes.

:func:`site_from_url` is also how ``compare`` obtains a live host's policy, over Gemini or
(with the web client) http(s); the portal fetches each file with :func:`fetch_policy_file`
too, but reads a robots.txt that got no answer as RFC 9309 does (everything disallowed)
rather than as :class:`~geminibot.policy.discovery.PolicyUnreachable`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import trio

from geminibot.cliutil import CommandError
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.urls import parse_url
from geminibot.http.client import WebClient, WebResponse
from geminibot.http.urls import parse_web_url
from geminibot.net.errors import FetchError, RedirectRefused, TooManyRedirects
from geminibot.policy.cli import read_policy_file
from geminibot.policy.discovery import (
    MAX_ROBOTS_REDIRECTS,
    POLICY_FETCH_BYTES,
    PolicyAnswer,
    PolicyDiscovery,
    discover_reachable,
    parse_retry_after,
)
from geminibot.policy.outcomes import fetch_outcome
from geminibot.policy.site_policy import AGENTS, ROBOTS, ROBOTS2, Fetched, SitePolicy
from geminibot.urls import InvalidURL, Scheme


def _file_kind(path: str) -> str:
    name = Path(path).name.lower()
    if name.endswith(ROBOTS2):
        return ROBOTS2
    if name.endswith(AGENTS):
        return AGENTS
    return ROBOTS


def site_from_file(source: str, protocol: Scheme) -> SitePolicy:
    """One policy file, as if fetched successfully from a host of ``protocol``."""
    _, data = read_policy_file(source)
    kind = _file_kind(source) if source != "-" else ROBOTS
    return SitePolicy.from_texts(
        protocol,
        robots=data if kind == ROBOTS else None,
        robots2=data if kind == ROBOTS2 else None,
        agents=data if kind == AGENTS else None,
    )


def fetch_from_folder(folder: Path, name: str) -> Fetched:
    """One policy file of ``folder`` read as a fetch: present is a success, absent (or
    not a regular file) is unavailable, unreadable is unreachable."""
    path = folder / name
    if not path.is_file():
        return Fetched(fetch_outcome("gemini", 51, meta=f"no {name} in {folder}"))
    try:
        body = path.read_bytes()
    except OSError as exc:
        return Fetched(fetch_outcome("gemini", failure=f"cannot read {path}: {exc.strerror}"))
    return Fetched(fetch_outcome("gemini", 20), body)


def site_from_folder(folder: Path) -> SitePolicy:
    """The policy of a folder's robots.txt, robots2.txt and agents.txt (its name is taken
    as the host name; a robots2.txt chain is followed to files of the same folder)."""
    host = folder.name
    discovery = PolicyDiscovery("gemini", f"gemini://{host}/")
    while (request := discovery.next_request()) is not None:
        parts = urlsplit(request.url)
        relative = (parts.path or "/").lstrip("/")
        if (parts.hostname or host) != host or not relative or ".." in relative.split("/"):
            discovery.receive(Fetched(fetch_outcome("gemini", 51, meta="not in the folder")))
        else:
            discovery.receive(fetch_from_folder(folder, relative))
    return discovery.result


async def fetch_policy_file(client: GeminiClient | WebClient, url: str) -> PolicyAnswer:
    """Fetch one policy file over either protocol, redirects followed by the client; never
    raises for the server's faults (a failed fetch is an answer with a failure). The answer
    is in the protocol's own terms: a Gemini meta, or the web's Location and Retry-After."""
    limits = replace(client.limits, max_body_size=POLICY_FETCH_BYTES, cut_body=True)
    try:
        response = await client.fetch(url, limits=limits)
    except (TooManyRedirects, RedirectRefused) as exc:
        # a redirect chain that does not end: RFC 9309 counts it as unavailable
        status = 30 if isinstance(client, GeminiClient) else 301
        return PolicyAnswer(status, str(exc), redirects=MAX_ROBOTS_REDIRECTS)
    except (FetchError, InvalidURL) as exc:
        return PolicyAnswer(None, failure=f"{type(exc).__name__}: {exc}")
    if isinstance(response, WebResponse):
        return PolicyAnswer(
            response.status,
            response.header("location") or "",
            response.body,
            redirects=len(response.redirects),
            retry_after=parse_retry_after(response.header("retry-after")),
        )
    return PolicyAnswer(
        response.status, response.meta, response.body, redirects=len(response.redirects)
    )


async def site_from_url(url: str, client: GeminiClient | WebClient) -> SitePolicy:
    """The policy a bot obtains from the host of ``url``: a ``gemini://`` URL with a
    :class:`GeminiClient`, an ``http(s)://`` URL (its origin) with a :class:`WebClient`.
    Raises :class:`~geminibot.policy.discovery.PolicyUnreachable` when the host does not
    answer."""

    async def fetch(target: str) -> PolicyAnswer:
        return await fetch_policy_file(client, target)

    if isinstance(client, WebClient):
        return await discover_reachable("http", parse_web_url(url).origin + "/", fetch)
    return await discover_reachable("gemini", f"gemini://{parse_url(url).authority}/", fetch)


def site_from_source(
    source: str, protocol: Scheme, client: GeminiClient | None = None
) -> SitePolicy:
    """A SOURCE argument (file, ``-``, folder or gemini:// URL) as a SitePolicy."""
    if source.lower().startswith("gemini://"):
        try:
            parse_url(source)
        except InvalidURL as exc:
            raise CommandError(f"{source}: {exc}") from None
        fetcher = client or GeminiClient()
        return trio.run(site_from_url, source, fetcher)
    folder = Path(source)
    if source != "-" and folder.is_dir():
        return site_from_folder(folder)
    return site_from_file(source, protocol)
