"""``geminibot compare``: where a host's web and Gemini policies disagree, each difference
once with the bot classes it affects.

``geminibot compare HOST`` fetches robots.txt, robots2.txt and agents.txt from both
``https://HOST/`` and ``gemini://HOST/``; ``geminibot compare --web FILE... --gemini
FILE...`` reads them from files (dialect by name, else by content). The comparison itself
is :mod:`geminibot.policy.compare`; this command sits beside ``classify`` because, like
``classify --against``, it obtains policies over both protocols. Exit codes: 0 the policies agree, 1 they differ, 2 a
usage or input error.
"""

from __future__ import annotations

import argparse
import ssl
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import trio

from geminibot.classify.sources import site_from_url
from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    emit_json,
    positive_float,
    say,
    terminal_safe,
)
from geminibot.gemini.client import GeminiClient
from geminibot.http.client import DEFAULT_INFO_URL, WebClient, user_agent
from geminibot.net.connect import Resolver, add_connect_to_option, connect_rules
from geminibot.net.dns import DnsCache
from geminibot.net.limits import DEFAULT_TOTAL_TIMEOUT, Limits
from geminibot.policy.cli import load_sources, parse_time, parse_virtual_agents
from geminibot.policy.compare import (
    Comparison,
    PathDifference,
    UsageDifferences,
    WaitDifference,
    bot_classes,
    compare,
)
from geminibot.policy.discovery import PolicyUnreachable
from geminibot.policy.robots2 import CATEGORIES
from geminibot.policy.site_policy import Reason, SitePolicy, UsageAnswer
from geminibot.urls import Scheme

EPILOG = """\
bot classes: each Gemini virtual agent (a bot known only by it), '*' (a bot no
group names), and each --agent TOKEN[:VA,...] given. The report lists each
difference once: paths one side allows and the other forbids (one example path
per pair of deciding rules, the candidates made from the rules of both sides),
the waiting time between requests, the robots2.txt usage answers; each with
the rule behind it on each side and the bot classes it affects. A note says
when a file was cut at 500 KiB or the candidate paths were capped.

examples:
  geminibot compare example.org
  geminibot compare --web site/robots.txt site/robots2.txt \\
      --gemini capsule/robots.txt
  geminibot compare example.org --agent mybot:indexer --json

exit status: 0 the policies agree, 1 they differ or a side's robots.txt got no
answer, 2 usage or input error.
"""


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "compare",
        help="where a host's web and Gemini policies disagree, and for which bots",
        description=(
            "Compare the web policy (https://HOST/) and the Gemini policy (gemini://HOST/)\n"
            "of a host, or two sets of policy files, for every class of bot."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("host", nargs="?", metavar="HOST", help="host name to fetch both from")
    parser.add_argument("--web", nargs="+", metavar="FILE", help="the web side's policy files")
    parser.add_argument(
        "--gemini", nargs="+", metavar="FILE", help="the Gemini side's policy files"
    )
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="TOKEN[:VA,...]",
        help="a bot class: product token and optional virtual agents (repeatable)",
    )
    parser.add_argument(
        "--category", choices=CATEGORIES, metavar="CATEGORY", help="robots2.txt category"
    )
    parser.add_argument("--strict", action="store_true", help="strict virtual-agent mode")
    parser.add_argument("--at", type=parse_time, metavar="TIME", help="ISO 8601; default now")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    add_connect_to_option(parser)
    parser.add_argument(
        "--web-ca", metavar="FILE", help="CA certificates (PEM) to trust for https instead"
    )
    parser.add_argument(
        "--web-scheme",
        choices=("https", "http"),
        default="https",
        help="the web side's scheme (default https)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TOTAL_TIMEOUT,
        metavar="S",
        help="seconds for each fetch, redirects included",
    )
    parser.set_defaults(run=run_compare)


def parse_agent(text: str) -> tuple[str, tuple[str, ...]]:
    """``TOKEN[:VA,...]`` -> (token, virtual agents); a bad one is a usage error."""
    token, _, vas = text.partition(":")
    token = token.strip()
    if not token or not token.replace("-", "").replace("_", "").isalnum():
        raise CommandError(f"--agent {text!r}: expected TOKEN[:VA,...], e.g. mybot:indexer")
    return token, parse_virtual_agents(vas)


def _from_files(files: list[str], protocol: Scheme) -> SitePolicy:
    loaded = load_sources(files)
    return SitePolicy.from_texts(
        protocol,
        loaded["robots"][1] if "robots" in loaded else None,
        loaded["robots2"][1] if "robots2" in loaded else None,
        loaded["agents"][1] if "agents" in loaded else None,
    )


def _from_host(args: argparse.Namespace) -> tuple[SitePolicy, SitePolicy]:
    host: str = args.host.strip().lower()
    if not host or "/" in host or "@" in host:
        raise CommandError(f"{args.host!r}: give a host name, not a URL")
    resolver = Resolver(connect_rules(args.connect_to), loopback_only=False)
    verify = _web_verify(args.web_ca)
    limits = Limits(total_timeout=args.timeout)
    dns = DnsCache()  # one host asked over both protocols: resolved once

    async def fetch_web() -> SitePolicy:
        agent = user_agent(info_url=DEFAULT_INFO_URL)
        async with WebClient(
            user_agent=agent, limits=limits, connect_to=resolver, verify=verify, dns=dns
        ) as web_client:
            return await site_from_url(f"{args.web_scheme}://{host}/", web_client)

    async def fetch_gemini() -> SitePolicy:
        gemini_client = GeminiClient(limits=limits, connect_to=resolver, dns=dns)
        return await site_from_url(f"gemini://{host}/", gemini_client)

    async def fetch_both() -> tuple[SitePolicy, SitePolicy]:
        sides: list[SitePolicy | PolicyUnreachable] = []
        for fetch in (fetch_web, fetch_gemini):
            try:
                sides.append(await fetch())
            except PolicyUnreachable as exc:
                sides.append(exc)
        web, gemini = sides
        if isinstance(web, SitePolicy) and isinstance(gemini, SitePolicy):
            return web, gemini
        # No answer from a side: nothing to compare (never "the policies agree").
        failed = [f"{e.url}: {e.failure}" for e in sides if isinstance(e, PolicyUnreachable)]
        what = "neither policy could" if len(failed) == 2 else "a policy could not"
        raise CommandError(f"{host}: {what} be fetched: {'; '.join(failed)}", EXIT_NEGATIVE)

    try:
        return trio.run(fetch_both)
    except ValueError as exc:  # a host name neither URL parser accepts
        raise CommandError(f"{host}: {exc}") from None


def _web_verify(ca_file: str | None) -> ssl.SSLContext | bool:
    """How the web side checks certificates: the system's CAs, or --web-ca's."""
    if not ca_file:
        return True
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise CommandError(f"--web-ca {ca_file}: {exc}") from None


def run_compare(args: argparse.Namespace) -> int:
    files = args.web is not None or args.gemini is not None
    if args.host and files:
        raise CommandError("give HOST, or --web FILE... and --gemini FILE..., not both")
    if not args.host and not (args.web and args.gemini):
        raise CommandError("give HOST, or both --web FILE... and --gemini FILE...")
    agents = [parse_agent(a) for a in args.agent]
    if files:
        web, gemini = _from_files(args.web, "http"), _from_files(args.gemini, "gemini")
        where = (", ".join(args.web), ", ".join(args.gemini))
    else:
        web, gemini = _from_host(args)
        where = (f"{args.web_scheme}://{args.host}/", f"gemini://{args.host}/")
    at: datetime = args.at if args.at is not None else datetime.now(UTC)
    classes = bot_classes((web, gemini), agents, category=args.category, strict=args.strict)
    result = compare(web, gemini, classes, at)
    if args.json:
        emit_json({"web": where[0], "gemini": where[1], **result.as_dict()})
    else:
        _print(result, where)
    return EXIT_OK if result.agree else EXIT_NEGATIVE


def _print(result: Comparison, where: tuple[str, str]) -> None:
    """One entry per difference: what decides on each side and which classes it affects.
    Each line escaped and wrapped: paths and rules quote the policy files, which may come
    from a server."""
    out = sys.stdout
    for side, source in zip(("web:   ", "gemini:"), where, strict=True):  # whole, to copy
        print(terminal_safe(f"{side} {source}"), file=out)
    for note in result.notes:
        say(out, f"note: {note}", "", "  ")
    names = [c.bot_class.name for c in result.classes]
    for diff in result.differences:
        if isinstance(diff, PathDifference):
            _print_path(diff, names, out)
        elif isinstance(diff, WaitDifference):
            _print_wait(diff, names, out)
        else:
            _print_usage(diff, names, out)
    say(out, result.summary(), "", "  ")


def _classes(names: tuple[str, ...], every: list[str]) -> str:
    if len(names) == len(every) and len(every) > 1:
        return f"for all {len(every)} bot classes"
    return "for " + ", ".join(names)


def _print_path(diff: PathDifference, every: list[str], out: TextIO) -> None:
    say(out, diff.describe(), "", "  ")
    own = _own_groups(diff)
    for label, allowed, rules, reason in (
        ("web:   ", diff.web_allowed, diff.web_rules, diff.web_reason),
        ("gemini:", diff.gemini_allowed, diff.gemini_rules, diff.gemini_reason),
    ):
        say(out, f"{label} {rules_text(allowed, rules, reason, own)}", "  ", " " * 10)
    more = diff.candidates - 1
    tail = (", each by its own group" if own else "") + (
        f"; {more:,} more path{'s' if more != 1 else ''} like it" if more else ""
    )
    say(out, _classes(diff.classes, every) + tail, "  ", "    ")


def _own_groups(diff: PathDifference) -> bool:
    """Whether one side's rules stand in the affected classes' own groups, one each (the
    archiver, indexer and researcher groups of one file saying the same thing)."""
    return len(diff.classes) > 1 and any(
        sorted(r.group for r in rules) == sorted(diff.classes)
        for rules in (diff.web_rules, diff.gemini_rules)
    )


def rules_text(allowed: bool, rules: tuple[Reason, ...], reason: str, own: bool = False) -> str:
    """The rules that decide, each once, with where it stands: ``Disallow: /youtube
    (robots.txt line 3 in group archiver, line 7 in indexer)``."""
    if not rules:
        if reason.startswith("allowed: no policy file"):
            return "allows it: no policy file"
        return "allows it: no rule matches" if allowed else reason
    by_text: dict[str, list[Reason]] = {}
    for r in rules:
        by_text.setdefault(r.rule or f"{r.file}: {r.text}", []).append(r)
    parts = []
    for text, same in by_text.items():
        if not same[0].rule:  # a file as a whole (unreachable, a fault): its own words
            parts.append(text)
            continue
        parts.append(f"{text} ({_where(same, own)})")
    return "; ".join(parts)


def _where(rules: list[Reason], own: bool) -> str:
    """``robots.txt line 6, robots2.txt line 30, group *``; with the classes' own groups,
    the lines alone: ``robots.txt lines 3, 7, 11``."""
    files = {r.file for r in rules}
    if own and len(files) == 1:
        return f"{rules[0].file} lines {', '.join(str(r.line) for r in rules)}"
    groups = {r.group for r in rules}
    places: list[str] = []
    last_file = ""
    for r in rules:
        place = f"line {r.line}" if r.file == last_file else f"{r.file} line {r.line}"
        if len(groups) > 1 and r.group:
            place += f" in {'group ' if not places else ''}{r.group}"
        places.append(place)
        last_file = r.file
    (group,) = groups if len(groups) == 1 else ("",)
    return ", ".join(places) + (f", group {group}" if group else "")


def _print_wait(diff: WaitDifference, every: list[str], out: TextIO) -> None:
    web, gemini = diff.web, diff.gemini
    say(out, f"wait: web {web.seconds:g} s, Gemini {gemini.seconds:g} s", "", "  ")
    say(out, f"web:    {_rule(web.file, web.line, web.rule)}", "  ", " " * 10)
    say(out, f"gemini: {_rule(gemini.file, gemini.line, gemini.rule)}", "  ", " " * 10)
    say(out, _classes(diff.classes, every), "  ", "    ")


def _print_usage(diff: UsageDifferences, every: list[str], out: TextIO) -> None:
    n = len(diff.usage)
    what = f"{n} directives differ" if n != 1 else "1 directive differs"
    say(out, f"AI usage (robots2.txt): {what}", "", "  ")
    for label, pick in (("web:   ", 0), ("gemini:", 1)):
        answers = [(u.web, u.gemini)[pick] for u in diff.usage]
        say(out, f"{label} {_usage_text(answers)}", "  ", " " * 10)
    say(out, _classes(diff.classes, every), "  ", "    ")


def _usage_text(answers: list[UsageAnswer]) -> str:
    """``train no, quote short-only (robots2.txt lines 1-2)``, or why nothing is stated."""
    stated = [a for a in answers if a.value is not None]
    if not stated:
        return f"not stated ({answers[0].note})" if answers[0].note else "not stated"
    values = ", ".join(f"{a.directive} {a.value or '-'}" for a in answers)
    lines = sorted({a.line for a in stated if a.line})
    files = sorted({a.file for a in stated if a.file})
    where = ""
    if files and lines:
        span = f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}-{lines[-1]}"
        where = f" ({', '.join(files)} {span})"
    return values + where


def _rule(file: str, line: int, text: str) -> str:
    if file and line:
        return f"{text} ({file} line {line})" if text else f"{file} line {line}"
    return text or "not stated"
