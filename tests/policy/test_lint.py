"""``policy lint`` a person can act on: levels that tell a harmless ``Name/1.0`` (info)
from a cut that changes which crawlers a group names (warning), a fix hint on every
warning and error, and the whole-file findings: a template left in, a User-agent nearly a
known crawler's token, ``$`` inside a pattern, a robots2 spec-version not implemented."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from commands import run_main

from geminibot.classify.registry import load_registry
from geminibot.policy.cli import known_crawler_tokens
from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.lint import HINTS, lint_policy

POLICY_SOURCES = Path(__file__).resolve().parents[2] / "geminibot" / "policy"


def lint(name: str, text: str) -> list[Diagnostic]:
    return list(lint_policy(name, text.encode("utf-8"), known_crawler_tokens()))


def codes(found: list[Diagnostic]) -> list[tuple[int, str, str]]:
    return [(d.line, d.level, d.code) for d in found]


def test_a_version_suffix_is_info_and_a_cut_name_a_warning() -> None:
    found = lint(
        "robots.txt",
        "User-agent: BrandVerity/1.0\nUser-agent: Kangaroo Bot\nUser-agent: quillbot.com\n"
        "User-agent: AI2Bot\nUser-agent: img2dataset\nDisallow: /\n",
    )
    assert codes(found) == [
        (1, "info", "agent-token-suffix"),
        (2, "info", "agent-token-suffix"),
        (3, "info", "agent-token-suffix"),
        (4, "warning", "agent-token-cut"),
        (5, "warning", "agent-token-cut"),
    ]
    assert "every crawler called 'img'" in found[4].message


@pytest.mark.parametrize(
    ("line", "placeholder"),
    [
        ("Sitemap: https://$DOMAIN/sitemap.xml", "$DOMAIN"),
        ("Sitemap: https://${HOST}/sitemap.xml", "${HOST}"),
        ("Disallow: /{{ private_dir }}/", "{{ private_dir }}"),
        ("Sitemap: https://example.com/sitemap.xml", "example.com"),
        ("Sitemap: https://www.example.org/s.xml", "example.org"),
    ],
)
def test_a_template_left_in_is_a_warning(line: str, placeholder: str) -> None:
    found = lint("robots.txt", f"User-agent: *\n{line}\nDisallow: /x\n")
    left = [d for d in found if d.code == "template-left"]
    assert [(d.line, d.level) for d in left] == [(2, "warning")]
    assert f"'{placeholder}'" in left[0].message and left[0].hint


def test_no_template_in_comments_or_ordinary_values() -> None:
    found = lint(
        "robots.txt",
        "# generated for example.com from $TEMPLATE\nUser-agent: *\n"
        "Disallow: /examples.com/\nDisallow: /*.zip$\nSitemap: https://my-example.com/s.xml\n",
    )
    assert [d for d in found if d.code == "template-left"] == []


@pytest.mark.parametrize(
    ("agent", "meant"),
    [
        ("Google", "Googlebot"),
        ("GPT-Bot", "GPTBot"),
        ("Claudebto", "ClaudeBot"),
        ("Bing", "bingbot"),
    ],
)
def test_a_user_agent_near_a_known_crawler_is_a_warning(agent: str, meant: str) -> None:
    found = lint("robots.txt", f"User-agent: {agent}\nDisallow: /\n")
    near = [d for d in found if d.code == "agent-near-known"]
    assert [(d.line, d.level) for d in near] == [(1, "warning")]
    assert f"'{meant}'" in near[0].message
    assert near[0].hint == f"if you meant {meant}, write 'User-agent: {meant}'"


@pytest.mark.parametrize("agent", ["Googlebot", "googlebot", "indexer", "*", "Amazonbot", "CC"])
def test_known_virtual_and_distant_tokens_are_not_near_misses(agent: str) -> None:
    found = lint("robots.txt", f"User-agent: {agent}\nDisallow: /\n")
    assert [d for d in found if d.code == "agent-near-known"] == []


def test_the_known_tokens_are_the_registrys() -> None:
    registry = {b.token for b in load_registry().bots if b.token}
    assert known_crawler_tokens() == frozenset(registry)


def test_a_dollar_inside_a_pattern_is_a_warning() -> None:
    found = lint("robots.txt", "User-agent: *\nDisallow: /a$b\nDisallow: /*.zip$\nAllow: /$x$\n")
    inside = [(d.line, d.level) for d in found if d.code == "dollar-inside"]
    assert inside == [(2, "warning"), (4, "warning")]
    # A version 2.0 set reads its patterns as globs: '$' is nothing special there.
    v2 = lint("robots.txt", "User-agent: *\nRobot-version: 2.0\nDisallow: /a$b*\n")
    assert [d for d in v2 if d.code == "dollar-inside"] == []


@pytest.mark.parametrize(("version", "warned"), [("2.1", True), ("0.3", True), ("0.2.1", False)])
def test_a_robots2_spec_version_not_implemented_is_a_warning(version: str, warned: bool) -> None:
    found = lint("robots2.txt", f"# meta: spec-version: {version}\ntrain: no\n")
    assert [(d.line, d.level, d.code) for d in found] == (
        [(1, "warning", "spec-version")] if warned else []
    )


def test_the_spec_examples_own_version_is_implemented() -> None:
    """The v0.2.1 document's example file declares spec-version 2.0."""
    assert lint("robots2.txt", "# meta: spec-version: 2.0\ntrain: no\n") == []


def _codes_in_sources(levels: tuple[str, ...]) -> set[str]:
    """Every code the policy core gives at one of ``levels``, from its source."""
    found: set[str] = set()
    for path in POLICY_SOURCES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            texts = [a.value for a in node.args if isinstance(a, ast.Constant)]
            for i, text in enumerate(texts[:-1]):
                if text in levels and isinstance(texts[i + 1], str):
                    found.add(texts[i + 1])
    return found


def test_every_warning_and_error_code_has_a_hint() -> None:
    codes_found = _codes_in_sources(("warning", "error"))
    assert len(codes_found) > 40  # the scan sees the parsers' calls
    assert codes_found - set(HINTS) == set()


def test_lint_prints_each_hint_and_json_carries_it(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: Google\nDisallow: /a$b\nSitemap: https://$DOMAIN/s.xml\n")
    text = run_main(["policy", "lint", str(robots)])
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"{robots}:1: warning: User-agent 'Google' names no known")
    assert lines[1] == "  hint: if you meant Googlebot, write 'User-agent: Googlebot'"
    assert all(len(line) <= 80 for line in lines if line.startswith("  "))
    assert text.stderr.strip() == "1 file: 0 errors, 3 warnings, 0 infos"
    data = run_main(["policy", "lint", str(robots), "--json"])
    records = [json.loads(line) for line in data.stdout.splitlines()]
    assert [r["code"] for r in records] == ["agent-near-known", "dollar-inside", "template-left"]
    assert all(r["hint"] for r in records)
