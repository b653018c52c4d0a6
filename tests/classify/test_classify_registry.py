"""The registry of known bots (every entry) and bot profiles (good and bad files)."""

from __future__ import annotations

import re

import pytest

from geminibot.classify import Activity, ProfileError, load_registry, profile_from_toml
from geminibot.classify.profile import MAX_PROFILE_BYTES, is_product_token, profile_from_flags
from geminibot.classify.registry import MAX_REGISTRY_BYTES, KnownBot, RegistryError, parse_registry
from geminibot.classify.rules import VIRTUAL_AGENT_NAMES

REGISTRY = load_registry()
TOKEN = re.compile(r"[A-Za-z_-]+")


def test_registry_has_the_gemini_and_web_bots() -> None:
    ids = {b.id for b in REGISTRY.bots}
    gemini = {"gus", "kennedy", "tlgs", "lupa", "antenna", "mozz-archiver", "portal-mozz"}
    web = {
        "googlebot",
        "bingbot",
        "gptbot",
        "chatgpt-user",
        "oai-searchbot",
        "claudebot",
        "claude-user",
        "claude-searchbot",
        "google-extended",
        "ccbot",
        "perplexitybot",
        "applebot-extended",
        "bytespider",
    }
    assert gemini | web <= ids


@pytest.mark.parametrize("bot", REGISTRY.bots, ids=lambda b: b.id)
def test_every_entry_is_valid(bot: KnownBot) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", bot.id)
    assert bot.name.strip() and bot.operator.strip()
    assert bot.source.strip() and bot.documented_as.strip()
    assert bot.protocol in ("gemini", "web")
    assert bot.evidence in ("operator", "third-party")
    assert bot.activities and all(isinstance(a, Activity) for a in bot.activities)
    if bot.token is not None:
        assert TOKEN.fullmatch(bot.token), bot.token
    for t in bot.obeys:
        assert t == "*" or TOKEN.fullmatch(t), t
    # a capsule owner can address every entry: by its token, a documented group or its class
    result = bot.profile().classify()
    assert bot.token or bot.obeys or result.virtual_agents or result.categories or bot.notes
    # classification is complete: every activity got a class or a warning
    for act in bot.activities:
        covered = any(act in a.activities for a in (*result.virtual_agents, *result.categories))
        assert covered or any(act in w.activities for w in result.warnings)
    if bot.protocol == "web":
        assert bot.token is not None, "web bots are addressed by their product token"


def test_registry_facts_that_matter() -> None:
    find = REGISTRY.find
    gus, tlgs, kennedy = find("gus"), find("TLGS"), find("kennedy")
    assert gus and tlgs and kennedy
    assert gus.obeys == ("gus", "indexer", "*")
    assert tlgs.documented_virtual_agents == ("indexer",)
    assert kennedy.token is None and kennedy.obeys == ("indexer", "*")
    portal = find("portal.mozz.us")
    assert portal and portal.token == "webproxy-mozz" and "webproxy" in portal.obeys
    lupa = find("lupa")
    assert lupa and lupa.profile().classify().virtual_agent_names == ("researcher",)


def test_missing_virtual_agents_are_reported() -> None:
    archiver = REGISTRY.find("mozz-archiver")
    assert archiver is not None
    assert archiver.missing_virtual_agents == ("archiver",)
    for ok in ("gus", "tlgs", "kennedy", "portal-mozz", "gemplex"):
        bot = REGISTRY.find(ok)
        assert bot is not None and bot.missing_virtual_agents == (), ok
    lupa = REGISTRY.find("lupa")
    assert lupa is not None and lupa.missing_virtual_agents == ()  # documents nothing
    web = REGISTRY.find("googlebot")
    assert web is not None and web.missing_virtual_agents == ()  # not a Gemini bot


def test_find_is_case_insensitive_on_id_token_and_name() -> None:
    assert REGISTRY.find("gptbot") is REGISTRY.find("GPTBot") is REGISTRY.find(" GPTBOT ")
    assert REGISTRY.find("Claude-User") is not None
    assert REGISTRY.find("no-such-bot") is None


def test_documented_virtual_agents_are_virtual_agents() -> None:
    for bot in REGISTRY.bots:
        assert set(bot.documented_virtual_agents) <= set(VIRTUAL_AGENT_NAMES)


GOOD = b"""
[[bot]]
id = "x"
name = "X"
operator = "me"
protocol = "gemini"
token = "xbot"
activities = ["archive"]
documented_as = "an archive"
source = "here"
"""


def test_a_minimal_registry_parses() -> None:
    reg = parse_registry(GOOD)
    assert [b.id for b in reg.bots] == ["x"]
    assert reg.bots[0].profile().classify().virtual_agent_names == ("archiver",)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda s: s.replace(b'token = "xbot"', b'token = "x/1.0"'),
            "not an RFC 9309 product token",
        ),
        (lambda s: s.replace(b'"archive"]', b'"crawl"]'), "unknown activity 'crawl'"),
        (lambda s: s.replace(b'source = "here"\n', b""), "missing 'source'"),
        (lambda s: s.replace(b'source = "here"', b'source = "  "'), "'source' must be a non-empty"),
        (lambda s: s.replace(b'protocol = "gemini"', b'protocol = "gopher"'), "protocol must be"),
        (lambda s: s + b'colour = "red"\n', "unknown key 'colour'"),
        (lambda s: s.replace(b'id = "x"', b'id = "X Y"'), "id must be lower-case"),
        (lambda s: s.replace(b'["archive"]', b"[]"), "'activities' must be a non-empty list"),
        (lambda s: s + b'obeys = ["indexer", "a b"]\n', "obeys 'a b' is neither"),
        (lambda s: s + b'evidence = "rumour"\n', "evidence must be one of"),
        (lambda s: s + s, "'x' is also used by bot 'x'"),
        (lambda s: b"bot = 3\n", "expected only [[bot]] entries"),
        (lambda s: b"[[bot]\n", "not valid TOML"),
        (lambda s: b"\xff\xfe", "not UTF-8"),
        (lambda s: b"bot = [1]\n", "bot #1: not a table"),
    ],
)
def test_bad_registries_are_refused_with_the_reason(edit: object, problem: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse_registry(edit(GOOD))  # type: ignore[operator]
    assert any(problem in p for p in info.value.problems), info.value.problems


def test_registry_size_limit_edge() -> None:
    padding = b"#" * (MAX_REGISTRY_BYTES - len(GOOD) - 1) + b"\n"
    assert len(GOOD + padding) == MAX_REGISTRY_BYTES
    assert parse_registry(GOOD + padding).bots
    with pytest.raises(RegistryError, match="larger than"):
        parse_registry(GOOD + padding + b"\n")


# -- profiles ----------------------------------------------------------------------------------


def test_profile_from_toml() -> None:
    p = profile_from_toml(
        b'name = "mybot"\ntoken = "mybot"\nactivities = ["statistics", "link"]\n'
        b"adapts_per_activity = true\n",
        "p.toml",
    )
    assert p.name == "mybot" and p.token == "mybot" and p.adapts_per_activity
    assert p.activities == (Activity.STATISTICS, Activity.LINK)
    assert p.classify().virtual_agent_names == ("researcher",)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"activities = [", "p.toml: not valid TOML"),
        (b"\xff", "p.toml: not UTF-8"),
        (b'activities = ["archive"]\nflavour = 1\n', "unknown key(s) flavour"),
        (b'activities = ["crawl"]\n', "unknown activity 'crawl'"),
        (b"activities = []\n", "'activities' must be a non-empty list"),
        (b'name = "x"\n', "'activities' must be a non-empty list"),
        (b'activities = ["archive"]\ntoken = "my bot"\n', "is not a robots.txt product token"),
        (b'activities = ["archive"]\ntoken = "bot/1.0"\n', "is not a robots.txt product token"),
        (b'activities = ["archive"]\ntoken = 7\n', "is not a robots.txt product token"),
        (b'activities = ["archive"]\nname = 7\n', "'name' must be a string"),
        (b'activities = ["archive"]\nadapts_per_activity = "yes"\n', "must be true or false"),
    ],
)
def test_bad_profiles_are_refused_clearly(data: bytes, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        profile_from_toml(data, "p.toml")
    assert message in str(info.value)


def test_profile_size_limit_edge() -> None:
    body = b'activities = ["archive"]\n'
    at_limit = body + b"#" * (MAX_PROFILE_BYTES - len(body) - 1) + b"\n"
    assert len(at_limit) == MAX_PROFILE_BYTES
    assert profile_from_toml(at_limit, "p").activities == (Activity.ARCHIVE,)
    with pytest.raises(ProfileError, match="larger than"):
        profile_from_toml(at_limit + b"\n", "p")


def test_profile_from_flags() -> None:
    p = profile_from_flags("archive, search-index", token="my_bot-x")
    assert p.activities == (Activity.ARCHIVE, Activity.SEARCH_INDEX)
    with pytest.raises(ProfileError, match="name at least one"):
        profile_from_flags(" , ")
    with pytest.raises(ProfileError, match="--agent"):
        profile_from_flags("archive", token="bot1")


def test_product_token_is_rfc9309() -> None:
    assert is_product_token("Googlebot") and is_product_token("webproxy-mozz")
    assert is_product_token("my_bot")
    for bad in ("", "bot1", "a b", "bot/1.0", "archive.org_bot", "*", "été"):
        assert not is_product_token(bad), bad
