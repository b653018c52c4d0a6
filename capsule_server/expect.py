"""Capsule expectation files (``expect.toml``) and the policy a capsule really serves.

The format is described in capsules/README.md. :func:`served_robots` answers "what policy
does a bot get from this capsule": it asks the capsule for /robots.txt exactly as the server
would answer, follows redirects, and maps the outcome with :func:`geminibot.policy.fetch_outcome`
(so a 41 gives disallow-all, a 51 allow-all).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from capsule_server.files import EXPECT_FILE, Capsule
from geminibot.policy import RobotsFile, fetch_outcome


class ExpectError(ValueError):
    """expect.toml is missing or not in the documented format."""


@dataclass(frozen=True, slots=True)
class Check:
    agent: str
    virtual_agents: tuple[str, ...]
    strict: bool
    allowed: tuple[str, ...]
    disallowed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Expectation:
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
    path = "/robots.txt"
    hops = 0
    while True:
        answer = capsule.resolve(path)
        outcome = fetch_outcome("gemini", answer.status, meta=answer.meta, redirects_followed=hops)
        if outcome.kind != "redirect":
            return outcome.policy(answer.read_body() if answer.status == 20 else None)
        target = urlsplit(outcome.location or answer.meta)
        if target.netloc and target.hostname != capsule.host:
            return RobotsFile.allow_all("robots.txt redirects to another host")
        path = target.path or "/"
        hops += 1
