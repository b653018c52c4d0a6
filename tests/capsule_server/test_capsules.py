"""Every bundled capsule is complete and its expectations hold against the policy it serves."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from capsule_server.expect import load_expectation, served_robots
from capsule_server.files import Capsule, load_capsules
from geminibot.gemini.gemtext import parse_gemtext
from geminibot.gemini.urls import parse_url
from geminibot.policy import VIRTUAL_AGENTS

CAPSULES_DIR = Path(__file__).resolve().parents[2] / "capsules"
HOSTS = sorted(load_capsules(CAPSULES_DIR))
SCENARIOS = {
    "va-groups.test",
    "va-conflict.test",
    "own-token.test",
    "wildcards.test",
    "percent.test",
    "robots-missing.test",
    "robots-41.test",
    "robots-44.test",
    "robots-redirect.test",
    "robots-large.test",
    "robots-malformed.test",
    "robots2-chain.test",
    "robots2-ask.test",
    "agents-good.test",
    "agents-bad.test",
    "robots-v2.test",
    "honeypot.test",
    "maze.test",
    "non-utf8.test",
    "large-file.test",
    "why.test",
    "feeds.test",
    "ops.test",
    "de.ops.test",
}


def capsule(host: str) -> Capsule:
    return Capsule(host, CAPSULES_DIR / host)


def test_every_scenario_of_the_issue_has_a_capsule() -> None:
    assert set(HOSTS) == SCENARIOS
    assert all(host.endswith(".test") for host in HOSTS)


@pytest.mark.parametrize("host", HOSTS)
def test_capsule_is_complete(host: str) -> None:
    cap = capsule(host)
    for name in ("index.gmi", "README.gmi", "expect.toml"):
        assert (cap.root / name).is_file(), name
    assert cap.resolve("/").status == 20
    assert cap.resolve("/README.gmi").status == 20
    assert cap.resolve("/expect.toml").status == 51
    expect = load_expectation(cap.root)
    assert expect.description and expect.checks
    for name, crawl in expect.crawl.items():
        assert name in VIRTUAL_AGENTS
        assert "fetched" in crawl or "must_fetch" in crawl


@pytest.mark.parametrize("host", HOSTS)
def test_checks_hold_against_the_served_policy(host: str) -> None:
    cap = capsule(host)
    robots = served_robots(cap)
    for check in load_expectation(cap.root).checks:
        for path in check.allowed:
            decision = robots.decide(path, check.agent, check.virtual_agents, strict=check.strict)
            assert decision.allowed, (check, path, decision.reason)
        for path in check.disallowed:
            decision = robots.decide(path, check.agent, check.virtual_agents, strict=check.strict)
            assert not decision.allowed, (check, path, decision.reason)


@pytest.mark.parametrize("host", HOSTS)
def test_links_from_home_page_resolve(host: str) -> None:
    cap = capsule(host)
    page = cap.resolve("/").read_body().decode()
    links = parse_gemtext(page, f"gemini://{host}/").links
    assert links
    for link in links:
        url = parse_url(link.url)
        assert url.host == host
        assert cap.resolve(url.path).status == 20, url


@pytest.mark.parametrize("host", HOSTS)
def test_crawl_expectations_are_allowed_and_reachable(host: str) -> None:
    cap = capsule(host)
    robots = served_robots(cap)
    for va, crawl in load_expectation(cap.root).crawl.items():
        paths = crawl.get("fetched", crawl.get("must_fetch", []))
        assert isinstance(paths, list)
        for path in paths:
            assert path in ("/robots.txt", "/agents.txt") or robots.allowed(
                path, "geminibot", (va,)
            ), (va, path)


def test_served_policy_follows_fetch_outcomes() -> None:
    assert not served_robots(capsule("robots-41.test")).allowed("/", "geminibot", ("indexer",))
    assert not served_robots(capsule("robots-44.test")).allowed("/", "geminibot", ("indexer",))
    assert served_robots(capsule("robots-missing.test")).allowed("/x", "geminibot")
    redirected = served_robots(capsule("robots-redirect.test"))
    assert not redirected.allowed("/private/a.gmi", "geminibot")


def _agents_hash_ok(data: bytes) -> bool:
    lines = data.decode("utf-8").split("\n")
    content = [line for line in lines if line.strip() and not line.startswith("#")]
    declared, directives = content[0], content[1:]
    digest = hashlib.sha256("\n".join(directives).encode()).hexdigest()
    return declared == "*" + digest


def test_agents_txt_hashes() -> None:
    assert _agents_hash_ok(capsule("agents-good.test").resolve("/agents.txt").read_body())
    assert not _agents_hash_ok(capsule("agents-bad.test").resolve("/agents.txt").read_body())


def test_robots2_chain_ends_on_last_line() -> None:
    cap = capsule("robots2-chain.test")
    for path in ("/robots2.txt", "/policies/robots2-b.txt", "/policies/robots2-c.txt"):
        body = cap.resolve(path).read_body().decode().rstrip("\n").split("\n")
        assert body[-1].startswith("chain: ")
    decoy = cap.resolve("/robots2-decoy.txt").read_body().decode().rstrip("\n").split("\n")
    assert not decoy[-1].startswith("chain:")
