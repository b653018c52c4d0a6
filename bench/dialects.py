"""Policy dialects, side by side: the frommitz.biz file under four engines, in one run.

Every engine parses the document's mixed 1.0/2.0 robots.txt and decides every (bot, page)
pair of its worked examples. The table shows parse time, decisions per second, and how
many of the 338 decisions agree with the version 2.0 reading (geminibot.policy.ext20),
which reproduces the document's text. RFC 9309 engines read the 2.0 sets as plain
longest-match rules, so they disagree where 2.0 precedence matters (and ignore Visit-time).
A second table times robots2.txt and agents.txt parsing. Bounded: fixed repetitions.

Run: .venv/bin/python bench/dialects.py
"""

from __future__ import annotations

import argparse
import hashlib
import time
import urllib.robotparser
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from protego import Protego

from geminibot.policy.agents_txt import parse_agents
from geminibot.policy.ext20 import parse_ext20
from geminibot.policy.robots2 import parse_robots2
from geminibot.policy.robots_parse import parse_robots

ROOT = Path(__file__).resolve().parent.parent
FROMMITZ = (ROOT / "tests" / "policy" / "data" / "frommitz-robots.txt").read_text()
ROBOTS2 = (ROOT / "tests" / "policy" / "data" / "robots2-example.txt").read_bytes()
#: Every bot the file names, and one it does not.
BOTS = [a for s in parse_ext20(FROMMITZ).sets for a in s.agents if a != "*"] + ["someotherbot"]
PAGES = [
    line
    for line in (ROOT / "tests" / "policy" / "data" / "frommitz-pages.txt").read_text().splitlines()
    if line.startswith("/")
]
AT = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
PARSE_REPEAT = 200
DECIDE_REPEAT = 20

Decider = Callable[[str, str], bool]


def geminibot_v2() -> Decider:
    f = parse_ext20(FROMMITZ)
    return lambda url, bot: f.decide(url, bot, at=AT).allowed


def geminibot_rfc() -> Decider:
    f = parse_robots(FROMMITZ)
    return f.allowed


def protego() -> Decider:
    p = Protego.parse(FROMMITZ)
    return lambda url, bot: bool(p.can_fetch(url, bot))


def stdlib() -> Decider:
    rp = urllib.robotparser.RobotFileParser()
    rp.parse(FROMMITZ.splitlines())
    return lambda url, bot: rp.can_fetch(bot, url)


ENGINES: dict[str, Callable[[], Decider]] = {
    "geminibot ext20 (2.0 reading)": geminibot_v2,
    "geminibot RobotsFile (RFC 9309)": geminibot_rfc,
    "protego": protego,
    "urllib.robotparser": stdlib,
}


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()  # no options: --help shows what it measures
    urls = [f"http://www.frommitz.biz{p}" for p in PAGES]
    reference = geminibot_v2()
    expected = {(u, b): reference(u, b) for u in urls for b in BOTS}
    print(
        f"frommitz.biz robots.txt: {len(BOTS)} bots x {len(PAGES)} pages = {len(expected)} decisions"
    )
    print(f"{'engine':<34} {'parse us':>9} {'decisions/s':>12} {'agree with 2.0':>15}")
    for name, make in ENGINES.items():
        start = time.perf_counter()
        for _ in range(PARSE_REPEAT):
            decide = make()
        parse_us = (time.perf_counter() - start) / PARSE_REPEAT * 1e6
        start = time.perf_counter()
        for _ in range(DECIDE_REPEAT):
            got = {(u, b): decide(u, b) for u in urls for b in BOTS}
        rate = DECIDE_REPEAT * len(expected) / (time.perf_counter() - start)
        agree = sum(got[k] == v for k, v in expected.items())
        print(f"{name:<34} {parse_us:>9.1f} {rate:>12,.0f} {agree:>9}/{len(expected)}")
    directives = [f"/p{i}/ {'ALLOW' if i % 2 else 'DISALLOW'} limit={i + 1}" for i in range(200)]
    digest = hashlib.sha256("\n".join(directives).encode()).hexdigest()
    agents = ("# version: 1.0\n" + f"*{digest}\n" + "\n".join(directives) + "\n").encode()
    print()
    print(f"{'parser':<34} {'bytes':>9} {'parse us':>12}")
    for name, data, parse in (
        ("robots2.txt (spec example)", ROBOTS2, parse_robots2),
        ("agents.txt (200 directives, SHA-256)", agents, parse_agents),
    ):
        start = time.perf_counter()
        for _ in range(PARSE_REPEAT):
            parse(data)  # type: ignore[operator]
        print(
            f"{name:<34} {len(data):>9} {(time.perf_counter() - start) / PARSE_REPEAT * 1e6:>12.1f}"
        )


if __name__ == "__main__":
    main()
