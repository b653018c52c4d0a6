"""``geminibot compare``: where a host's web and Gemini policies disagree, per bot class.

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
from geminibot.policy.compare import BotClass, ClassComparison, Comparison, bot_classes, compare
from geminibot.policy.discovery import PolicyUnreachable
from geminibot.policy.robots2 import CATEGORIES
from geminibot.policy.site_policy import SitePolicy
from geminibot.urls import Scheme

EPILOG = """\
bot classes: each Gemini virtual agent (a bot known only by it), '*' (a bot no
group names), and each --agent TOKEN[:VA,...] given. For each class the report
lists the paths one side allows and the other forbids (one example path per
pair of deciding rules, the candidates made from the rules of both sides), the
waiting time between requests when it differs, and the robots2.txt usage
answers that differ.

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
        help="where a host's web and Gemini policies disagree, per bot class",
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
    out = sys.stdout
    for side, source in zip(("web:   ", "gemini:"), where, strict=True):  # whole, to copy
        print(terminal_safe(f"{side} {source}"), file=out)
    for c in result.classes:
        _print_class(c, out)
    say(out, result.summary())


def _describe_class(bot_class: BotClass) -> str:
    bot = bot_class.bot
    what = f"token {bot.token}"
    if bot.virtual_agents:
        what += f", virtual agents {','.join(bot.virtual_agents)}"
    return f"{bot_class.name} ({what})"


def _print_class(c: ClassComparison, out: TextIO) -> None:
    """Each line escaped and wrapped: paths and reasons quote the policy files, which may
    come from a server."""
    head = f"class {_describe_class(c.bot_class)}:"
    if c.agree:
        say(out, f"{head} agree")
        return
    say(out, head)
    for p in c.paths:
        more = f" (and {p.candidates - 1} more like it)" if p.candidates > 1 else ""
        say(out, f"path  {p.describe()}{more}", "  ", "        ")
        say(out, f"web:    {p.web_reason}", "        ", " " * 16)
        say(out, f"gemini: {p.gemini_reason}", "        ", " " * 16)
    if c.wait_differs:
        web, gemini = c.web_wait, c.gemini_wait
        say(
            out,
            f"wait  web {web.seconds:g} s ({_rule(web.file, web.line, web.rule)}), "
            f"gemini {gemini.seconds:g} s ({_rule(gemini.file, gemini.line, gemini.rule)})",
            "  ",
            "        ",
        )
    for u in c.usage:
        web_value = u.web.value or "-"
        gemini_value = u.gemini.value or "-"
        say(
            out,
            f"usage {u.directive}: web {web_value} ({_rule(u.web.file, u.web.line, u.web.note)}), "
            f"gemini {gemini_value} ({_rule(u.gemini.file, u.gemini.line, u.gemini.note)})",
            "  ",
            "        ",
        )


def _rule(file: str, line: int, text: str) -> str:
    if file and line:
        return f"{file}:{line}" + (f" {text}" if text else "")
    return text or "not stated"
