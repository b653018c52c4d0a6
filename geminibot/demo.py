"""``make demo``: the main job on the bundled data.

Until the crawler lands this is a policy check: the bundled example robots.txt, decided
for a few typical bots and URLs, with the reason for each verdict.
"""

from __future__ import annotations

from importlib import resources

from geminibot.policy import parse_robots

BOTS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("a search crawler", "searchbot", ("indexer",), False),
    ("an archive crawler", "archivebot", ("archiver",), False),
    ("a crawler that indexes and archives", "bothbot", ("indexer", "archiver"), False),
    ("a web proxy", "proxybot", ("webproxy",), False),
    ("geminibot as indexer", "geminibot", ("indexer",), False),
    ("geminibot as indexer, strict mode", "geminibot", ("indexer",), True),
)
URLS = (
    "gemini://example.org/",
    "gemini://example.org/journal/2026-11-01.gmi",
    "gemini://example.org/journal/drafts/idea.gmi",
    "gemini://example.org/journal/drafts/published-1.gmi",
    "gemini://example.org/private/open.gmi",
    "gemini://example.org/robots.txt",
)


def main() -> None:
    source = resources.files("geminibot") / "data" / "example-robots.txt"
    robots = parse_robots(source.read_bytes())
    print(f"Policy: {source} ({len(robots.groups)} groups)\n")
    for label, agent, vas, strict in BOTS:
        mode = "strict" if strict else "precedence"
        print(f"== {label}: --agent {agent} --as {','.join(vas)} ({mode})")
        for url in URLS:
            decision = robots.decide(url, agent, vas, strict)
            verdict = "allowed" if decision.allowed else "DISALLOWED"
            print(f"  {verdict:<11} {url}\n              {decision.reason}")
        print()
    print("Try it yourself: .venv/bin/geminibot policy check --help")


if __name__ == "__main__":
    main()
