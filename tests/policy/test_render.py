"""Rendering structured policies: determinism, the production rule, and parse(render(p)) == p."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geminibot.policy.agents_txt import parse_agents
from geminibot.policy.render import FORMATS, PolicyError, load_policy, render
from geminibot.policy.robots2 import CATEGORIES, DIRECTIVE_VALUES, parse_robots2
from geminibot.policy.robots_parse import parse_robots

POLICY = (Path(__file__).parent / "data" / "policy.toml").read_bytes()


def test_robots_output_follows_the_production_rule() -> None:
    text = render(load_policy(POLICY), "robots")
    lines = text.splitlines()
    assert lines[1] == "# Source: kno://content/agent-policy • Identity: 01KPY2N1SXNM9X0NV4N6EP3E87"
    agents = [line.split(": ")[1] for line in lines if line.startswith("User-agent:")]
    assert agents == [
        "ChatGPT-User",
        "Claude-User",
        "GPTBot",
        "ClaudeBot",
        "CCBot",
        "geminibot",
        "*",
    ]
    assert "Sitemap: https://example.org/sitemap.xml" in lines
    assert lines[-1] == "# https://example.org/llms.txt"
    assert parse_robots(text).diagnostics == ()


@pytest.mark.parametrize("fmt", FORMATS)
def test_rendering_is_byte_identical_and_key_order_free(fmt: str) -> None:
    policy = load_policy(POLICY)
    first = render(policy, fmt)  # type: ignore[arg-type]
    assert render(load_policy(POLICY), fmt) == first  # type: ignore[arg-type]
    shuffled = POLICY.replace(b'crawl = "yes"\nread = "yes"\n', b'read = "yes"\ncrawl = "yes"\n')
    assert shuffled != POLICY
    assert render(load_policy(shuffled), fmt) == first  # type: ignore[arg-type]


def test_agents_output_carries_the_correct_hash() -> None:
    text = render(load_policy(POLICY), "agents")
    parsed = parse_agents(text)
    assert parsed.valid and parsed.declared_hash == parsed.computed_hash
    assert [d.text() for d in parsed.directives][1] == "/status ALLOW limit=60"


def test_robots2_output_reads_back_cleanly() -> None:
    parsed = parse_robots2(render(load_policy(POLICY), "robots2"))
    assert parsed.diagnostics == ()
    assert parsed.chain_id == "example-org-v1"
    crawl = parsed.setting("crawl", "data-harvester")
    assert crawl is not None and crawl.value == "no"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("", "default_policy"),
        ('default_policy = "maybe"', "default_policy"),
        ('default_policy = "allow"\ncolour = 1', "colour"),
        ('default_policy = "allow"\n[[agents]]\ntokens = ["bad token"]', "agents[0].tokens"),
        (
            'default_policy = "allow"\n[[agents]]\ntokens = ["a"]\n[[agents]]\ntokens = ["A"]',
            "agents[1]",
        ),
        ('default_policy = "allow"\n[default]\nrules = [{ allow = "nope" }]', "default.rules[0]"),
        ('default_policy = "allow"\n[default]\nrules = [{ allow = "/a", limit = 0 }]', "limit"),
        ('default_policy = "allow"\n[ai]\ntrain = "sometimes"', "ai.train"),
        ('default_policy = "allow"\n[ai]\nrate = -1', "ai.rate"),
        ('default_policy = "allow"\n[categories.spammer]\ncrawl = "no"', "spammer"),
        ("default_policy = ", "TOML"),
    ],
)
def test_bad_policy_files_name_the_key(text: str, key: str) -> None:
    with pytest.raises(PolicyError, match=key.replace("[", r"\[").replace("]", r"\]")):
        load_policy(text)


def test_agents_format_refuses_wildcards() -> None:
    policy = load_policy('default_policy = "allow"\n[default]\nrules = [{ disallow = "/*.gif" }]')
    with pytest.raises(PolicyError, match=r"agents\.txt"):
        render(policy, "agents")


# -- the property: every rendering decides like the policy ---------------------------------

TOKENS = ("alphabot", "Beta-Bot", "gamma_crawler", "delta", "epsilon")
SEGMENTS = ("a", "b", "ab", "x1", "a.html")
segment_paths = st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=3).map(
    lambda segs: "/" + "/".join(segs)
)


@st.composite
def patterns(draw: st.DrawFn, wildcards: bool) -> str:
    base = draw(segment_paths)
    if draw(st.booleans()):
        base += "/"
    if wildcards and draw(st.integers(0, 3)) == 0:
        cut = draw(st.integers(1, len(base)))
        base = base[:cut] + "*" + base[cut:]
    if wildcards and draw(st.integers(0, 4)) == 0:
        base += "$"
    return base


@st.composite
def rule_lists(draw: st.DrawFn, wildcards: bool) -> list[dict[str, Any]]:
    pats = draw(st.lists(patterns(wildcards), max_size=5, unique=True))
    out: list[dict[str, Any]] = []
    for p in pats:
        rule: dict[str, Any] = {"allow" if draw(st.booleans()) else "disallow": p}
        if not wildcards and draw(st.integers(0, 3)) == 0:
            rule["limit"] = draw(st.integers(1, 600))
        out.append(rule)
    return out


def toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


@st.composite
def policy_files(draw: st.DrawFn) -> str:
    wildcards = draw(st.booleans())
    lines = [f'default_policy = "{draw(st.sampled_from(["allow", "disallow"]))}"']
    lines.append(f"[default]\nrules = {toml_value(draw(rule_lists(wildcards)))}")
    tokens = list(TOKENS)
    for _ in range(draw(st.integers(0, 3))):
        take = draw(st.integers(1, 2))
        mine, tokens = tokens[:take], tokens[take:]
        if not mine:
            break
        policy = draw(st.sampled_from(["allow", "disallow"]))
        rules = toml_value(
            [{k: v for k, v in r.items() if k != "limit"} for r in draw(rule_lists(True))]
        )
        lines.append(
            f'[[agents]]\ntokens = {toml_value(mine)}\npolicy = "{policy}"\nrules = {rules}'
        )
    ai = {d: draw(st.sampled_from(v)) for d, v in DIRECTIVE_VALUES.items() if draw(st.booleans())}
    if draw(st.booleans()):
        ai["rate"] = draw(st.sampled_from(["polite", 1, 30, 120]))  # type: ignore[assignment]
    lines.append("[ai]\n" + "\n".join(f'"{k}" = {toml_value(v)}' for k, v in ai.items()))
    for cat in draw(st.lists(st.sampled_from(CATEGORIES), max_size=3, unique=True)):
        block = {
            d: draw(st.sampled_from(v))
            for d, v in DIRECTIVE_VALUES.items()
            if draw(st.integers(0, 3)) == 0
        }
        lines.append(
            f"[categories.{cat}]\n"
            + "\n".join(f'"{k}" = {toml_value(v)}' for k, v in block.items())
        )
    return "\n".join(lines) + "\n"


URL_PATHS = st.lists(
    st.one_of(
        segment_paths, segment_paths.map(lambda p: p + "/"), segment_paths.map(lambda p: p + "?q=1")
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy_files(), URL_PATHS)
def test_parse_of_render_decides_like_the_policy(text: str, paths: list[str]) -> None:
    policy = load_policy(text)
    robots = parse_robots(render(policy, "robots"))
    robots2 = parse_robots2(render(policy, "robots2"))
    agents_wildcards = any(("*" in r.pattern or "$" in r.pattern) for r in policy.default.rules)
    agents = None if agents_wildcards else parse_agents(render(policy, "agents"))
    assert robots.diagnostics == ()
    for path in paths:
        url = f"gemini://h.test{path}"
        for agent in (*TOKENS, "unnamedbot"):
            want = policy.allows(path, agent)
            assert robots.decide(url, agent).allowed is want, (agent, path)
            assert robots2.robots().decide(url, agent).allowed is want, (agent, path)
        if agents is not None:
            assert agents.valid
            # agents.txt has no agents: it carries the default policy for every bot.
            assert agents.decide(url).allowed is policy.default.allows(path), path
    for category in (None, *CATEGORIES):
        want_usage = policy.usage(category)
        got = {
            d: s.value for d in (*DIRECTIVE_VALUES, "rate") if (s := robots2.setting(d, category))
        }
        assert got == want_usage
