"""One shape, one meaning (issue 54 item 6): a rule is one JSON object in every command's
--json; allowed and disallowed reasons read alike; --as and --protocol mean one thing
in every command; an unknown argument is named with the command it was given to."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from commands import run_main

from geminibot.policy import parse_robots
from geminibot.policy.site_policy import Bot, SitePolicy

RULE_KEYS = ["file", "line", "directive", "pattern", "group"]
ROBOTS = "User-agent: *\nDisallow: /private/\nAllow: /private/open\n\nUser-agent: indexer\nDisallow: /drafts/\n"


@pytest.fixture
def robots(tmp_path: Path) -> Path:
    path = tmp_path / "robots.txt"
    path.write_text(ROBOTS)
    return path


def check(robots: Path, *argv: str) -> list[dict[str, object]]:
    proc = run_main(["policy", "check", str(robots), "--agent", "bot", "--json", *argv])
    assert proc.returncode in (0, 1), proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_policy_check_gives_every_rule_in_one_shape(robots: Path) -> None:
    refused, allowed, free = check(robots, "/private/x", "/private/open", "/public")
    assert refused["rule"] == {
        "file": "robots.txt",
        "line": 2,
        "directive": "Disallow",
        "pattern": "/private/",
        "group": "*",
    }
    assert allowed["rule"] == {
        "file": "robots.txt",
        "line": 3,
        "directive": "Allow",
        "pattern": "/private/open",
        "group": "*",
    }
    assert free["rule"] is None
    for record in (refused, allowed):
        reasons = record["reasons"]
        assert isinstance(reasons, list)
        assert [list(r["rule"]) for r in reasons] == [RULE_KEYS]
        groups = record["groups"]
        assert isinstance(groups, list)
        assert all(list(g["rule"]) == RULE_KEYS for g in groups if g["rule"])


def test_allowed_and_disallowed_reasons_read_alike(robots: Path) -> None:
    refused, allowed, free = check(robots, "/private/x", "/private/open", "/public")
    assert refused["reason"].startswith("robots.txt: disallowed by 'Disallow: /private/' (line 2)")
    assert allowed["reason"].startswith("robots.txt: allowed by 'Allow: /private/open' (line 3)")
    assert free["reason"].startswith("robots.txt: allowed: no rule in the group for *")
    for record in (refused, allowed, free):
        assert "allowed by robots.txt" not in str(record["reason"])
        assert "allowed: allowed" not in str(record["reason"])


def test_a_file_naming_no_group_says_each_name_once() -> None:
    robots = parse_robots("User-agent: other\nDisallow: /\n")
    reason = robots.decide("/x", "webproxy", ("webproxy",)).reason
    assert reason == "allowed: no group names webproxy or '*', so nothing is disallowed"
    two = robots.decide("/x", "bot", ("indexer", "archiver")).reason
    assert "any of bot, indexer, archiver or '*'" in two
    site = SitePolicy.from_texts("gemini", "User-agent: other\nDisallow: /\n")
    decision = site.may_fetch(
        "/x", Bot("webproxy", ("webproxy",)), datetime(2026, 12, 1, tzinfo=UTC)
    )
    assert decision.reason == f"robots.txt: {reason}"


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (
            ["policy", "check", "robots.txt", "--agent", "x", "/", "--bogus"],
            "geminibot policy check",
        ),
        (["policy", "lint", "robots.txt", "--bogus"], "geminibot policy lint"),
        (["why", "gemini://h.test/", "--db", "x.db", "--bogus"], "geminibot why"),
        (["stats", "--db", "x.db", "--bogus"], "geminibot stats"),
    ],
)
def test_an_unknown_argument_names_its_command(argv: list[str], command: str, robots: Path) -> None:
    argv = [str(robots) if a == "robots.txt" else a for a in argv]
    proc = run_main(argv)
    assert proc.returncode == 2
    assert proc.stderr == f"{command}: unrecognized arguments: --bogus\n"


def test_as_names_the_virtual_agents_the_bot_acts_as(robots: Path) -> None:
    """policy check --as takes virtual agents; the crawl's --as one of them; the
    compliance report's identity option is --detail (--as still accepted there)."""
    (record,) = check(robots, "--as", "indexer", "/drafts/a")
    assert record["virtual_agents"] == ["indexer"] and record["allowed"] is False
    crawl_help = run_main(["crawl", "--help"]).stdout
    assert "the Gemini virtual agent the crawler acts as" in " ".join(crawl_help.split())
    report_help = run_main(["report", "--help"], program="capsule-server")
    assert "--detail IDENTITY" in report_help.stdout and "--as" not in report_help.stdout


def test_protocol_is_the_protocol_of_the_host_the_files_are_from() -> None:
    for argv in (["policy", "check", "--help"], ["classify", "--help"]):
        text = " ".join(run_main(argv).stdout.split())
        assert "the protocol of the host the policy files are from" in text
