"""Capsule expectation files (``expect.toml``) and the policy a capsule really serves.

The format is described in capsules/README.md. :func:`served_policy` answers "what policy
does a bot get from this capsule": it asks the capsule for /robots.txt, /robots2.txt (and its
chain) and /agents.txt exactly as the server would answer, follows same-host redirects, and
maps each outcome with :func:`geminibot.policy.fetch_outcome` (so a 41 gives disallow-all, a
51 allow-all) into the :class:`~geminibot.policy.site_policy.SitePolicy` the crawler obeys.
:func:`served_robots` is its robots.txt part.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from capsule_server.files import EXPECT_FILE, Capsule
from geminibot.gemini.gemtext import resolve_link
from geminibot.policy import RobotsFile, fetch_outcome
from geminibot.policy.robots2 import ChainWalker, parse_robots2
from geminibot.policy.site_policy import Fetched, SitePolicy


class ExpectError(ValueError):
    """expect.toml is missing or not in the documented format."""


@dataclass(frozen=True, slots=True)
class Check:
    """One check of expect.toml: paths a bot must be allowed and refused."""

    agent: str
    virtual_agents: tuple[str, ...]
    strict: bool
    allowed: tuple[str, ...]
    disallowed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Expectation:
    """A capsule's expect.toml: what it tests, its honeypots and its checks."""

    host: str
    description: str
    honeypots: tuple[str, ...]
    checks: tuple[Check, ...]
    crawl: dict[str, dict[str, object]] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ExpectError(f"{where}: expected a list of strings")
    return tuple(value)


def load_expectation(capsule_dir: Path) -> Expectation:
    path = capsule_dir / EXPECT_FILE
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ExpectError(f"{path}: {exc}") from None
    head = raw.get("capsule", {})
    if not isinstance(head, dict) or not isinstance(head.get("description"), str):
        raise ExpectError(f"{path}: [capsule] needs a description")
    checks = []
    for i, item in enumerate(raw.get("check", [])):
        where = f"{path}: check {i + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("agent"), str):
            raise ExpectError(f"{where}: needs agent")
        checks.append(
            Check(
                agent=item["agent"],
                virtual_agents=_strings(item.get("virtual_agents", []), where),
                strict=bool(item.get("strict", False)),
                allowed=_strings(item.get("allowed", []), where),
                disallowed=_strings(item.get("disallowed", []), where),
            )
        )
    crawl = raw.get("crawl", {})
    if not isinstance(crawl, dict):
        raise ExpectError(f"{path}: [crawl.*] tables expected")
    extra = {k: v for k, v in raw.items() if k not in ("capsule", "check", "crawl")}
    return Expectation(
        host=capsule_dir.name,
        description=head["description"],
        honeypots=_strings(head.get("honeypots", []), f"{path}: honeypots"),
        checks=tuple(checks),
        crawl=crawl,
        extra=extra,
    )


def served_robots(capsule: Capsule) -> RobotsFile:
    """The robots.txt policy a bot obtains from ``capsule`` (outcome mapping applied)."""
    fetched, _paths = fetch_served(capsule, "/robots.txt")
    return fetched.outcome.policy(fetched.body)


def fetch_served(capsule: Capsule, path: str) -> tuple[Fetched, list[str]]:
    """A policy file as the server answers it, same-host redirects followed: the
    outcome and body, and every path requested on the way."""
    visited = [path]
    hops = 0
    while True:
        answer = capsule.resolve(path)
        outcome = fetch_outcome("gemini", answer.status, meta=answer.meta, redirects_followed=hops)
        if outcome.kind != "redirect":
            body = answer.read_body() if answer.status == 20 else None
            return Fetched(outcome, body), visited
        target = urlsplit(resolve_link(outcome.location or "", f"gemini://{capsule.host}{path}"))
        if target.netloc != capsule.host:
            gone = fetch_outcome("gemini", 51, meta="redirect to another host not followed")
            return Fetched(gone), visited
        path = target.path or "/"
        visited.append(path)
        hops += 1


def served_policy(capsule: Capsule) -> tuple[SitePolicy, frozenset[str]]:
    """The SitePolicy a bot obtains from ``capsule``, and the paths it fetches for it."""
    robots, robots_paths = fetch_served(capsule, "/robots.txt")
    robots2, robots2_paths = fetch_served(capsule, "/robots2.txt")
    agents, agents_paths = fetch_served(capsule, "/agents.txt")
    chain: dict[str, bytes | None] = {}
    paths = {*robots_paths, *robots2_paths, *agents_paths}
    if robots2.outcome.kind == "success":
        walker = ChainWalker(parse_robots2(robots2.body or b""), "/robots2.txt")
        while (target := walker.next_url()) is not None:
            parts = urlsplit(target)
            body: bytes | None = None
            if parts.netloc in ("", capsule.host):  # a chain is followed on its own host only
                link, link_paths = fetch_served(capsule, parts.path or "/")
                paths.update(link_paths)
                if link.outcome.kind == "success" and isinstance(link.body, bytes):
                    body = link.body
            chain[target] = body
            walker.feed(target, body)
    site = SitePolicy.build(
        "gemini", robots, robots2, agents, robots2_url="/robots2.txt", chain_fetch=chain
    )
    return site, frozenset(paths)
