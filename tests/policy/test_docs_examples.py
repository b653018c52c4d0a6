"""The worked examples of docs/policy.md section 4, decided by the engine."""

from importlib import resources

import pytest

from geminibot.policy import parse_robots

EXAMPLES = [
    ("searchbot", ("indexer",), False, "/journal/drafts/idea.gmi", False),
    ("searchbot", ("indexer",), False, "/journal/drafts/published-1.gmi", True),
    ("searchbot", ("indexer",), False, "/private/x.gmi", True),
    ("searchbot", ("indexer",), True, "/private/x.gmi", False),
    ("archivebot", ("archiver",), False, "/journal/2026-11-01.gmi", False),
    ("bothbot", ("indexer", "archiver"), False, "/journal/2026-11-01.gmi", False),
    ("proxybot", ("webproxy",), False, "/", False),
    ("statsbot", ("researcher",), False, "/cgi-bin/x", False),
    ("geminibot", ("indexer",), False, "/journal/drafts/idea.gmi", True),
    ("geminibot", ("indexer",), True, "/journal/drafts/idea.gmi", False),
    ("proxybot", ("webproxy",), True, "/robots.txt", True),
]


@pytest.mark.parametrize(("agent", "vas", "strict", "path", "allowed"), EXAMPLES)
def test_worked_example(
    agent: str, vas: tuple[str, ...], strict: bool, path: str, allowed: bool
) -> None:
    data = (resources.files("geminibot") / "data" / "example-robots.txt").read_bytes()
    robots = parse_robots(data)
    assert robots.allowed(f"gemini://example.org{path}", agent, vas, strict=strict) is allowed
    assert robots.crawl_delay("geminibot", ("indexer",)) == 2
