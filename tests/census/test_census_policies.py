"""What robots.txt refuses a virtual agent, as the census counts it: entirely, in part,
not at all, in each mode."""

from __future__ import annotations

from geminibot.census.policies import refusal
from geminibot.policy import RobotsFile, parse_robots

BASE = "gemini://a.test"


def test_entirely_in_part_not_at_all() -> None:
    robots = parse_robots(
        b"User-agent: archiver\nDisallow: /\n\nUser-agent: researcher\nDisallow: /logs/*.gmi$\n"
    )
    assert refusal(robots, BASE, "geminibot", "archiver", False) == "entirely"
    assert refusal(robots, BASE, "geminibot", "researcher", False) == "in part"
    assert refusal(robots, BASE, "geminibot", "indexer", False) == "not at all"
    assert refusal(RobotsFile.allow_all("none"), BASE, "geminibot", "indexer", False) == (
        "not at all"
    )
    assert refusal(RobotsFile.disallow_all("unreachable"), BASE, "x", "indexer", False) == (
        "entirely"
    )


def test_the_strict_mode_also_obeys_the_global_group() -> None:
    robots = parse_robots(b"User-agent: *\nDisallow: /private/\n\nUser-agent: indexer\nAllow: /\n")
    assert refusal(robots, BASE, "geminibot", "indexer", False) == "not at all"
    assert refusal(robots, BASE, "geminibot", "indexer", True) == "in part"
