"""The dialect capsules say what the project's dialect parsers read in them.

robots2-chain.test, agents-good.test / agents-bad.test and robots-v2.test carry extra
expect.toml tables ([robots2], [agents], [rate]); here geminibot.policy's SitePolicy reads
the files exactly as the capsule serves them and must agree with those tables.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from urllib.parse import urlsplit

from capsule_server.expect import load_expectation
from capsule_server.files import Capsule
from geminibot.policy import fetch_outcome
from geminibot.policy.site_policy import Bot, Fetched, SitePolicy

CAPSULES_DIR = Path(__file__).resolve().parents[2] / "capsules"
INDEXER = Bot("geminibot", ("indexer",))
NIGHT = dt.datetime(2026, 11, 23, 23, 30, tzinfo=dt.UTC)
NOON = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def fetched(cap: Capsule, path: str) -> Fetched:
    answer = cap.resolve(path)
    body = answer.read_body() if answer.status == 20 else None
    return Fetched(fetch_outcome("gemini", answer.status, meta=answer.meta), body)


def site(host: str) -> tuple[Capsule, SitePolicy]:
    cap = Capsule(host, CAPSULES_DIR / host)

    def chain_fetch(url: str) -> bytes | None:
        answer = cap.resolve(urlsplit(url).path)
        return answer.read_body() if answer.status == 20 else None

    policy = SitePolicy.build(
        "gemini",
        fetched(cap, "/robots.txt"),
        fetched(cap, "/robots2.txt"),
        fetched(cap, "/agents.txt"),
        robots2_url=f"gemini://{host}/robots2.txt",
        chain_fetch=chain_fetch,
    )
    return cap, policy


def test_robots2_chain() -> None:
    cap, policy = site("robots2-chain.test")
    table = load_expectation(cap.root).extra["robots2"]
    assert isinstance(table, dict)
    chain = policy.robots2
    assert chain is not None
    assert [urlsplit(link.url).path for link in chain.links] == table["chain"]
    assert chain.stop.startswith("depth limit")
    for directive, value in table["directives"].items():
        setting = chain.setting(directive)
        assert setting is not None and setting.value == value, directive
    assert chain.setting("crawl", "data-harvester").value == "no"  # type: ignore[union-attr]
    assert chain.setting("summarise", "ai-assistant").value == "yes"  # type: ignore[union-attr]
    assert not policy.may_fetch("gemini://robots2-chain.test/honeypot/a.gmi", INDEXER, NOON).allowed


def test_agents_good_and_bad() -> None:
    for host in ("agents-good.test", "agents-bad.test"):
        cap, policy = site(host)
        table = load_expectation(cap.root).extra["agents"]
        assert isinstance(table, dict)
        assert policy.agents is not None
        assert policy.agents.valid == table["hash_valid"], host
        for path in table["allowed"]:
            assert policy.agents.decide(f"gemini://{host}{path}").allowed, (host, path)
        for path in table["disallowed"]:
            assert not policy.agents.decide(f"gemini://{host}{path}").allowed, (host, path)
        for path, limit in table.get("limits", {}).items():
            found = policy.agents.limit_interval(f"gemini://{host}{path}")
            assert found is not None and found[1].limit == limit


def test_ext20_rate_and_visit_time() -> None:
    cap, policy = site("robots-v2.test")
    table = load_expectation(cap.root).extra["rate"]
    assert isinstance(table, dict)
    assert policy.delay(INDEXER, NIGHT).seconds == table["min_interval_seconds"]
    url = "gemini://robots-v2.test/public/a.gmi"
    assert policy.may_fetch(url, INDEXER, NIGHT).allowed  # inside 2200-0600
    assert not policy.may_fetch(url, INDEXER, NOON).allowed  # outside the visit window
    assert policy.may_fetch("gemini://robots-v2.test/private/open.gmi", INDEXER, NIGHT).allowed
    assert not policy.may_fetch("gemini://robots-v2.test/private/a.gmi", INDEXER, NIGHT).allowed
    # oddbot's set is version 2.1 (experimental): ignored, so oddbot falls back to `*`
    assert policy.may_fetch(url, Bot("oddbot"), NIGHT).allowed


def test_honeypots_are_disallowed_in_both_files() -> None:
    cap, policy = site("honeypot.test")
    for prefix in load_expectation(cap.root).honeypots:
        for bot in (INDEXER, Bot("somebot"), Bot("geminibot", ("archiver", "webproxy"))):
            url = f"gemini://honeypot.test{prefix}a.gmi"
            decision = policy.may_fetch(url, bot, NOON)
            assert not decision.allowed
            assert {r.file for r in decision.reasons if not r.allowed} >= {
                "robots.txt",
                "robots2.txt",
            }
