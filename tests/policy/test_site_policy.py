"""SitePolicy: one answer from robots.txt, robots2.txt and agents.txt and their fetch outcomes."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from geminibot.policy.outcomes import fetch_outcome
from geminibot.policy.robots2_ask import AskLedger, AskResponse, ask_outcome
from geminibot.policy.site_policy import Bot, Fetched, SitePolicy

DATA = Path(__file__).parent / "data"
NOON = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
BOT = Bot("geminibot", ("indexer",), "search-indexer")

ROBOTS = """\
User-agent: indexer
Disallow: /private/
Crawl-delay: 5

User-agent: *
Disallow: /
"""
ROBOTS2 = """\
User-agent: *
Disallow: /drafts/
crawl: yes
train: ask
summarise: ask
rate: 30
[agent: search-indexer]
train: no
[agent: data-harvester]
crawl: no
[agent: ai-researcher]
crawl: ask
"""


def agents_file(*directives: str) -> str:
    digest = hashlib.sha256("\n".join(directives).encode()).hexdigest()
    return "\n".join(["# version: 1.0", f"*{digest}", *directives]) + "\n"


AGENTS = agents_file("/api/ DISALLOW", "/feed ALLOW limit=50")


def site(protocol: str = "gemini") -> SitePolicy:
    return SitePolicy.from_texts(protocol, ROBOTS, ROBOTS2, AGENTS)  # type: ignore[arg-type]


def test_every_file_must_allow_and_reasons_name_file_and_line() -> None:
    policy = site()
    ok = policy.may_fetch("gemini://h.test/page.gmi", BOT, NOON)
    assert ok.allowed
    d = policy.may_fetch("gemini://h.test/private/a.gmi", BOT, NOON)
    assert not d.allowed and (d.reasons[0].file, d.reasons[0].line) == ("robots.txt", 2)
    d = policy.may_fetch("gemini://h.test/drafts/a.gmi", BOT, NOON)
    assert not d.allowed
    assert [(r.file, r.line) for r in d.reasons if not r.allowed] == [("robots2.txt", 2)]
    d = policy.may_fetch("gemini://h.test/api/x", BOT, NOON)
    assert [(r.file, r.line, r.rule) for r in d.reasons if not r.allowed] == [
        ("agents.txt", 3, "/api/ DISALLOW")
    ]
    assert d.reason.startswith("agents.txt: line 3")


def test_robots2_crawl_directive_per_category() -> None:
    policy = site()
    harvester = Bot("geminibot", ("indexer",), "data-harvester")
    d = policy.may_fetch("gemini://h.test/page.gmi", harvester, NOON)
    assert not d.allowed and [(r.file, r.line) for r in d.reasons if not r.allowed] == [
        ("robots2.txt", 10)
    ]


def test_crawl_ask_is_no_on_gemini_and_an_ask_on_http() -> None:
    researcher = Bot("geminibot", ("indexer",), "ai-researcher", version="0.1")
    d = site("gemini").may_fetch("gemini://h.test/page.gmi", researcher, NOON)
    assert not d.allowed and d.ask is None and "Gemini" in d.reason
    http = site("http")
    d = http.may_fetch("https://h.test/page.gmi", researcher, NOON)
    assert not d.allowed and d.ask is not None
    assert d.ask.target == "/.well-known/robots2-ask?directive=crawl&agent=geminibot/0.1"
    assert d.ask.headers == (("X-Agent-Identity", "geminibot/0.1 (ai-researcher)"),)
    ledger = AskLedger()
    granted = AskResponse(200, (("X-Robots2-Decision", "allow"), ("X-Robots2-Scope", "/page*")))
    ledger.record("crawl", ask_outcome(granted, NOON))
    assert http.may_fetch("https://h.test/page.gmi", researcher, NOON, ledger).allowed
    assert not http.may_fetch("https://h.test/other.gmi", researcher, NOON, ledger).allowed


def test_delay_is_the_most_restrictive_limit() -> None:
    policy = site()
    d = policy.delay(BOT, NOON)
    assert (d.seconds, d.file, d.rule) == (5.0, "robots.txt", "Crawl-delay: 5")
    only_rate = SitePolicy.from_texts("gemini", robots2="rate: 6\n")
    d = only_rate.delay(BOT, NOON)
    assert (d.seconds, d.file, d.line) == (10.0, "robots2.txt", 1)
    only_agents = SitePolicy.from_texts("gemini", agents=agents_file("/ ALLOW limit=2"))
    assert only_agents.delay(BOT, NOON).seconds == 30.0
    slow = SitePolicy.from_texts(
        "gemini",
        "User-agent: *\nRobot-version: 2.0\nRequest-rate: 1/30m\nDisallow: /x\n",
        "rate: 60\n",
    )
    d = slow.delay(BOT, NOON)
    assert (d.seconds, d.line) == (1800.0, 3)


def test_a_rate_counts_between_request_starts_and_a_delay_from_the_end() -> None:
    """Request-rate, robots2 ``rate`` and agents.txt ``limit=`` are rates (requests per
    time); Crawl-delay and the rule of thumb are delays; of a Crawl-delay and a rate
    that ask the same seconds, the Crawl-delay (it asks the longer wait) answers."""
    assert site().delay(BOT, NOON).between_starts is False  # Crawl-delay: 5
    rates = [
        SitePolicy.from_texts("gemini", robots2="rate: 6\n"),
        SitePolicy.from_texts("gemini", agents=agents_file("/ ALLOW limit=2")),
        SitePolicy.from_texts("gemini", "User-agent: *\nRobot-version: 2.0\nRequest-rate: 6/1m\n"),
    ]
    assert [p.delay(BOT, NOON).between_starts for p in rates] == [True, True, True]
    thumb = SitePolicy.from_texts("gemini", "User-agent: *\nDisallow: /x\n")
    assert thumb.delay(BOT, NOON).between_starts is False
    tie = SitePolicy.from_texts("gemini", "User-agent: *\nCrawl-delay: 10\n", "rate: 6\n")
    d = tie.delay(BOT, NOON)
    assert (d.seconds, d.file, d.between_starts) == (10.0, "robots.txt", False)
    assert "between_starts" not in d.as_dict()  # the explanation's fields are unchanged


@pytest.mark.parametrize(("last", "seconds"), [(None, 10.0), (1.0, 10.0), (7.5, 15.0)])
def test_delay_rule_of_thumb_when_nothing_is_set(last: float | None, seconds: float) -> None:
    policy = SitePolicy.from_texts("gemini", "User-agent: *\nDisallow: /x\n", "rate: polite\n")
    d = policy.delay(BOT, NOON, last_duration=last)
    assert d.seconds == seconds and d.file == "" and "rule of thumb" in d.rule


def test_usage_answers_with_file_line_and_gemini_ask() -> None:
    answers = {u.directive: u for u in site("gemini").usage(BOT)}
    assert (answers["train"].value, answers["train"].line) == ("no", 8)
    assert "search-indexer" in answers["train"].note
    assert (answers["summarise"].value, answers["summarise"].stated) == ("no", "ask")
    assert "Gemini" in answers["summarise"].note
    assert answers["quote"].value is None and answers["quote"].note == "not stated"
    http = {u.directive: u for u in site("http").usage(BOT)}
    assert http["summarise"].value == "ask" and "robots2-ask" in http["summarise"].note
    assert len(answers) == 13
    none = {u.directive: u for u in SitePolicy.from_texts("gemini", ROBOTS).usage(BOT)}
    assert none["crawl"].value is None and none["crawl"].note == "no robots2.txt"


def test_frommitz_through_site_policy_with_visit_time() -> None:
    text = (DATA / "frommitz-robots.txt").read_text()
    policy = SitePolicy.from_texts("http", text)
    bot = Bot("suckemdry")
    early = datetime(2026, 11, 23, 6, 30, tzinfo=UTC)
    assert policy.may_fetch("http://www.frommitz.biz/products.html", bot, early).allowed
    late = policy.may_fetch("http://www.frommitz.biz/products.html", bot, NOON)
    assert not late.allowed and late.reasons[0].line == 68
    assert not policy.may_fetch(
        "http://www.frommitz.biz/products.html", Bot("alfred"), NOON
    ).allowed
    assert policy.delay(Bot("hackerbot"), NOON).seconds == 1800.0


def test_visit_time_in_a_10_file_is_honoured() -> None:
    policy = SitePolicy.from_texts("gemini", "User-agent: *\nVisit-time: 2200-0200\nDisallow: /x\n")
    bot = Bot("geminibot")
    assert policy.may_fetch("/a", bot, datetime(2026, 1, 1, 23, 0, tzinfo=UTC)).allowed
    d = policy.may_fetch("/a", bot, NOON)
    assert not d.allowed and d.reasons[-1].line == 2
    assert policy.may_fetch("/robots.txt", bot, NOON).allowed


def test_fetch_outcomes_of_each_file() -> None:
    ok = fetch_outcome("gemini", 20)
    missing = fetch_outcome("gemini", 51)
    down = fetch_outcome("gemini", None, failure="TLS handshake failed")
    page = "gemini://h.test/a.gmi"
    policy = SitePolicy.build("gemini", Fetched(ok, ROBOTS), Fetched(missing), Fetched(missing))
    assert policy.may_fetch(page, BOT, NOON).allowed
    policy = SitePolicy.build("gemini", Fetched(down), Fetched(missing), Fetched(missing))
    assert not policy.may_fetch(page, BOT, NOON).allowed
    policy = SitePolicy.build("gemini", Fetched(missing), Fetched(down), Fetched(missing))
    assert not policy.may_fetch(page, BOT, NOON).allowed
    assert {u.value for u in policy.usage(BOT) if u.directive == "train"} == {"no"}
    policy = SitePolicy.build("gemini", Fetched(missing), Fetched(missing), Fetched(down))
    d = policy.may_fetch(page, BOT, NOON)
    assert not d.allowed and d.reasons[-1].file == "agents.txt"
    policy = SitePolicy.build("gemini", Fetched(missing), None, Fetched(ok, "/x ALLOW\n"))
    assert policy.may_fetch(page, BOT, NOON).allowed  # no hash line: not this dialect
    bad_hash = "*" + "0" * 64 + "\n/x ALLOW\n"
    policy = SitePolicy.build("gemini", Fetched(missing), None, Fetched(ok, bad_hash))
    assert not policy.may_fetch(page, BOT, NOON).allowed  # the draft's form, wrong hash


def test_bot_validation() -> None:
    with pytest.raises(ValueError):
        Bot("x", ("spider",))
    with pytest.raises(ValueError):
        Bot("x", (), "crawler")


def test_chained_robots2_fills_in_usage_with_its_url() -> None:
    ok = fetch_outcome("http", 200)
    base = "https://base.example/baseline.txt"
    policy = SitePolicy.build(
        "http",
        robots2=Fetched(ok, "train: no\nchain: https://base.example/baseline.txt\n"),
        robots2_url="https://h.example/robots2.txt",
        chain_fetch={base: "train: yes\nstore: no\nrate: 2\n"},
    )
    answers = {u.directive: u for u in policy.usage(BOT)}
    assert (answers["train"].value, answers["train"].file) == (
        "no",
        "https://h.example/robots2.txt",
    )
    assert (answers["store"].value, answers["store"].file, answers["store"].line) == ("no", base, 2)
    d = policy.delay(BOT, NOON)
    assert (d.seconds, d.file, d.line) == (30.0, base, 3)
