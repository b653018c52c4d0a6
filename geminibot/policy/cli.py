"""``geminibot policy ...``: check URLs against a policy file, and lint policy files."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from geminibot.cliutil import EXIT_NEGATIVE, EXIT_OK, CommandError, emit_json, read_source
from geminibot.policy.diagnostics import has_errors
from geminibot.policy.robots import VIRTUAL_AGENTS, parse_robots

_TOKEN = re.compile(r"[A-Za-z_-]+")

CHECK_EPILOG = """\
modes:
  precedence (default)  the bot's own-token group, if the file has one, decides alone;
                        otherwise every group naming one of its virtual agents applies and
                        all must allow; if none does, the '*' group applies.
  strict (--strict)     own token, every matching virtual agent and '*' all apply;
                        a URL is allowed only if all of them allow it.

examples:
  geminibot policy check robots.txt --agent mybot --as indexer gemini://example.org/a.gmi
  curl -s https://example.org/robots.txt | geminibot policy check - --agent mybot --json /x /y

exit status: 0 every URL allowed, 1 some URL disallowed, 2 usage or input error.
"""

LINT_EPILOG = """\
Each finding is printed as FILE:LINE: level: message [code]. Levels: error (a line the
parser ignores or cannot read as intended), warning (read, but probably not as meant),
info (worth knowing). Exit status: 0 no errors, 1 errors found, 2 a file could not be read.
"""


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "policy",
        help="check URLs against robots.txt and lint policy files",
        description="Decide URLs against policy files and lint them.",
    )
    actions = parser.add_subparsers(title="policy commands", metavar="ACTION")

    check = actions.add_parser(
        "check",
        help="may this bot fetch these URLs? one verdict and reason per URL",
        description="Decide each URL against a robots.txt for a bot, and say why.",
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("source", metavar="SOURCE", help="the robots.txt file, or - for stdin")
    check.add_argument("urls", metavar="URL", nargs="+", help="gemini://, http(s):// URLs or paths")
    check.add_argument(
        "--agent",
        required=True,
        metavar="TOKEN",
        help="the bot's own product token, e.g. geminibot",
    )
    check.add_argument(
        "--as",
        dest="virtual_agents",
        default="",
        metavar="VA,...",
        help=f"the Gemini virtual agents the bot acts as: {', '.join(VIRTUAL_AGENTS)}",
    )
    check.add_argument(
        "--strict", action="store_true", help="apply own, virtual and * groups together"
    )
    check.add_argument("--json", action="store_true", help="one JSON object per URL")
    check.set_defaults(run=run_check)

    lint = actions.add_parser(
        "lint",
        help="report what the parser will do with each doubtful line",
        description="Lint robots.txt files.",
        epilog=LINT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lint.add_argument("files", metavar="FILE", nargs="+", help="a robots.txt file, or - for stdin")
    lint.add_argument("--json", action="store_true", help="one JSON object per finding")
    lint.set_defaults(run=run_lint)


def parse_virtual_agents(text: str) -> tuple[str, ...]:
    """``indexer,archiver`` -> ("indexer", "archiver"); unknown names are a usage error."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in VIRTUAL_AGENTS]
    if unknown:
        raise CommandError(
            f"unknown virtual agent '{unknown[0]}' in --as; choose from {', '.join(VIRTUAL_AGENTS)}"
        )
    return names


def run_check(args: argparse.Namespace) -> int:
    vas = parse_virtual_agents(args.virtual_agents)
    agent: str = args.agent
    if not agent.strip():
        raise CommandError("--agent needs a product token, e.g. --agent geminibot")
    if not _TOKEN.fullmatch(agent):
        print(
            f"geminibot: warning: '{agent}' is not a plain product token (letters, '-', '_'); "
            "it only matches a User-agent line naming exactly that",
            file=sys.stderr,
        )
    name, data = read_source(args.source)
    robots = parse_robots(data)
    if has_errors(robots.diagnostics):
        errors = sum(1 for d in robots.diagnostics if d.level == "error")
        print(
            f"geminibot: note: {name} has {errors} line(s) the parser ignores; "
            f"see 'geminibot policy lint {name}'",
            file=sys.stderr,
        )
    delay = robots.crawl_delay(agent, vas, args.strict)
    any_refused = False
    for url in args.urls:
        decision = robots.decide(url, agent, vas, args.strict)
        any_refused = any_refused or not decision.allowed
        if args.json:
            record: dict[str, object] = {"url": url, "allowed": decision.allowed}
            record.update(decision.as_dict())
            record.update(
                {"agent": agent, "virtual_agents": list(vas), "source": name, "crawl_delay": delay}
            )
            emit_json(record)
        else:
            verdict = "allowed" if decision.allowed else "DISALLOWED"
            print(f"{verdict:<11} {url}\n            {decision.reason}")
    return EXIT_NEGATIVE if any_refused else EXIT_OK


def run_lint(args: argparse.Namespace) -> int:
    found_errors = False
    counts = {"error": 0, "warning": 0, "info": 0}
    for source in args.files:
        name, data = read_source(source)
        robots = parse_robots(data)
        for diag in robots.diagnostics:
            counts[diag.level] += 1
            if args.json:
                emit_json({"file": name, "dialect": "robots.txt", **diag.as_dict()})
            else:
                print(diag.format(name))
        found_errors = found_errors or has_errors(robots.diagnostics)
    if not args.json:
        summary = ", ".join(f"{n} {level}{'s' if n != 1 else ''}" for level, n in counts.items())
        print(f"{len(args.files)} file(s): {summary}", file=sys.stderr)
    return EXIT_NEGATIVE if found_errors else EXIT_OK
