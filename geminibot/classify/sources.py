"""The edge of ``classify --against``: from a SOURCE argument to a SitePolicy.

A SOURCE is one site:

* a policy file: ``robots2.txt`` and ``agents.txt`` are known by their names, any other
  file is read as robots.txt (a successful fetch of it, on a Gemini host by default);
* a folder (a capsule's or a site's document root): the three policy files in it, read as
  files (a missing one as an unavailable fetch: no restriction). How a server answers for
  them (a redirect, a temporary failure) is only seen through a URL;
* a ``gemini://`` URL: the three files are fetched from that host with the Gemini client
  (one after the other, then the robots2.txt chain), read through the same outcomes.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import trio

from geminibot.cliutil import CommandError, read_source
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.urls import parse_url
from geminibot.net.errors import FetchError, RedirectRefused, TooManyRedirects
from geminibot.net.limits import Limits
from geminibot.policy.outcomes import MAX_ROBOTS_REDIRECTS, fetch_outcome
from geminibot.policy.robots2 import MAX_CHAIN_DEPTH, parse_robots2
from geminibot.policy.site_policy import AGENTS, ROBOTS, ROBOTS2, Fetched, SitePolicy
from geminibot.urls import InvalidURL, Scheme, resolve_reference

#: Largest policy file fetched over the network. robots.txt is parsed up to 500 KiB
#: (RFC 9309's minimum); a bigger body is refused by the client, which counts as a failed
#: fetch (unreachable: everything disallowed), never as a silently cut policy.
MAX_POLICY_FILE_BYTES = 2 * 1024 * 1024


def _file_kind(path: str) -> str:
    name = Path(path).name.lower()
    if name.endswith(ROBOTS2):
        return ROBOTS2
    if name.endswith(AGENTS):
        return AGENTS
    return ROBOTS


def site_from_file(source: str, protocol: Scheme) -> SitePolicy:
    """One policy file, as if fetched successfully from a host of ``protocol``."""
    _, data = read_source(source)
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

    def chain_fetch(url: str) -> bytes | None:
        parts = urlsplit(url)
        if parts.scheme not in ("", "gemini") or (parts.hostname or host) != host:
            return None
        relative = (parts.path or "/").lstrip("/")
        if not relative or ".." in relative.split("/"):
            return None
        fetched = fetch_from_folder(folder, relative)
        return fetched.body if isinstance(fetched.body, bytes) else None

    return SitePolicy.build(
        "gemini",
        fetch_from_folder(folder, ROBOTS),
        fetch_from_folder(folder, ROBOTS2),
        fetch_from_folder(folder, AGENTS),
        robots2_url=f"gemini://{host}/{ROBOTS2}",
        chain_fetch=chain_fetch,
    )


async def fetch_policy_file(client: GeminiClient, url: str) -> Fetched:
    """Fetch one policy file and read the result as RFC 9309 does (never raises for the
    server's faults: a failed fetch is an unreachable outcome)."""
    try:
        response = await client.fetch(url)
    except (TooManyRedirects, RedirectRefused) as exc:
        # a redirect chain that does not end: RFC 9309 counts it as unavailable
        outcome = fetch_outcome(
            "gemini", 30, meta=str(exc), redirects_followed=MAX_ROBOTS_REDIRECTS
        )
        return Fetched(outcome)
    except (FetchError, InvalidURL) as exc:
        return Fetched(fetch_outcome("gemini", failure=f"{type(exc).__name__}: {exc}"))
    outcome = fetch_outcome(
        "gemini", response.status, meta=response.meta, redirects_followed=len(response.redirects)
    )
    return Fetched(outcome, response.body if outcome.kind == "success" else None)


async def site_from_url(url: str, client: GeminiClient) -> SitePolicy:
    """The policy a bot obtains from the host of ``url`` (a ``gemini://`` URL)."""
    base = parse_url(url)
    root = f"gemini://{base.authority}/"
    robots = await fetch_policy_file(client, root + ROBOTS)
    robots2 = await fetch_policy_file(client, root + ROBOTS2)
    agents = await fetch_policy_file(client, root + AGENTS)
    chain: dict[str, bytes | None] = {}
    if robots2.outcome.kind == "success" and isinstance(robots2.body, bytes):
        # Fetch the chain ahead (the resolver is synchronous) under the very keys
        # resolve_chain will ask for; it applies the depth and loop rules itself.
        key, real, body = root + ROBOTS2, root + ROBOTS2, robots2.body
        for _ in range(MAX_CHAIN_DEPTH - 1):
            link = parse_robots2(body).chain
            if link is None:
                break
            key = real = resolve_reference(real, link.value)
            if key in chain:
                break
            fetched = await fetch_policy_file(client, real)
            chain[key] = fetched.body if isinstance(fetched.body, bytes) else None
            if chain[key] is None:
                break
            body = chain[key] or b""
    return SitePolicy.build(
        "gemini", robots, robots2, agents, robots2_url=root + ROBOTS2, chain_fetch=chain
    )


def site_from_source(
    source: str, protocol: Scheme, client: GeminiClient | None = None
) -> SitePolicy:
    """A SOURCE argument (file, ``-``, folder or gemini:// URL) as a SitePolicy."""
    if source.lower().startswith("gemini://"):
        try:
            parse_url(source)
        except InvalidURL as exc:
            raise CommandError(f"{source}: {exc}") from None
        fetcher = client or GeminiClient(limits=Limits(max_body_size=MAX_POLICY_FILE_BYTES))
        return trio.run(site_from_url, source, fetcher)
    folder = Path(source)
    if source != "-" and folder.is_dir():
        return site_from_folder(folder)
    return site_from_file(source, protocol)
