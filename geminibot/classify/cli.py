"""``geminibot classify``: which virtual agents and robots2.txt categories a bot is."""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TextIO

from geminibot.classify.activities import Activity
from geminibot.classify.against import AppliedRules, SiteReport, effective_policy
from geminibot.classify.profile import (
    Profile,
    ProfileError,
    check_token,
    profile_from_flags,
    profile_from_toml,
)
from geminibot.classify.registry import KnownBot, RegistryError, load_registry
from geminibot.classify.rules import Assignment, Classification
from geminibot.classify.sources import site_from_source
from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    emit_json,
    read_source,
    say,
    terminal_safe,
)
from geminibot.gemini.client import GeminiClient
from geminibot.net.connect import Resolver, add_connect_to_option, connect_rules
from geminibot.policy.candidates import MAX_CANDIDATE_PATHS
from geminibot.policy.cli import agent_option, parse_time
from geminibot.policy.discovery import PolicyUnreachable
from geminibot.policy.site_policy import SitePolicy
from geminibot.urls import Scheme

#: Columns the help text fits in: an 80-column terminal, with room for argparse's margin.
HELP_WIDTH = 78


def _activity_help() -> str:
    width = max(len(a.value) for a in Activity)
    lines = []
    for a in Activity:
        wrapped = textwrap.wrap(a.meaning, HELP_WIDTH - width - 4)
        lines.append(f"  {a.value:<{width}}  {wrapped[0]}")
        lines.extend(f"  {'':<{width}}  {more}" for more in wrapped[1:])
    return "\n".join(lines)


DESCRIPTION = """\
Say which Gemini virtual user agents (archiver, indexer, researcher, webproxy)
and which robots2.txt agent categories a bot is, from what it does with the
content it fetches, and why: each answer names the activity and quotes the
sentence of the specification it rests on.

Describe the bot in one of three ways:
  a profile file    TOML: name = "mybot" / token = "mybot" /
                    activities = ["search-index"]
  --does A,B,...    the activities, comma-separated
  --bot NAME        a known bot from the registry (--list shows them)

Activities:
{activities}

Rules in short: archive -> archiver, search-index -> indexer, statistics ->
researcher (only while nothing is rehosted, linked to or searchable),
web-proxy -> webproxy. A bot that fits several virtual agents obeys the
most restrictive combination: a URL is allowed only if every applicable group
allows it. Activities that no virtual agent describes (training, answering
users, advertising, ...) leave the bot with `*` and its own token on Gemini;
the output warns and recommends strict mode when a virtual agent's group would
grant more than was meant. See docs/classify.md for every rule and its source.
"""

EPILOG = """\
examples:
  geminibot classify --does search-index,statistics
  geminibot classify --bot GPTBot --json
  geminibot classify mybot.toml --against capsules/va-groups.test --agent mybot
  geminibot classify --bot tlgs --against gemini://example.org/ --path /private/
  geminibot classify --list
"""


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "classify",
        help="which virtual agents and robots2.txt categories a bot is, and what it must obey",
        description=DESCRIPTION.format(activities=_activity_help()),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("profile", nargs="?", metavar="PROFILE.toml", help="a bot profile file")
    parser.add_argument("--bot", metavar="NAME", help="a known bot: id, token or name")
    parser.add_argument(
        "--does", metavar="ACTIVITY,...", help="the bot's activities, comma-separated"
    )
    parser.add_argument(
        "--agent",
        metavar="TOKEN",
        help="the bot's own robots.txt product token (overrides the profile's or registry's)",
    )
    parser.add_argument(
        "--adapts",
        action="store_true",
        help="the bot applies each virtual agent's rules only to that activity's fetches",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the registry of known bots and exit"
    )
    parser.add_argument(
        "--against",
        nargs="+",
        metavar="SOURCE",
        help=(
            "also say what the bot must obey on each site: a policy file (robots.txt, "
            "robots2.txt, agents.txt by name), a folder holding them, or a gemini:// URL"
        ),
    )
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="PATH",
        help="with --against: a path to decide as well (repeatable); exit 1 if one is "
        "disallowed in the recommended mode",
    )
    parser.add_argument(
        "--at",
        type=parse_time,
        metavar="TIME",
        help="with --against: the UTC time for Visit-time windows (ISO 8601; default now)",
    )
    parser.add_argument(
        "--protocol",
        choices=("gemini", "http"),
        default="gemini",
        help="with --against and a policy file: the protocol of the host the policy files "
        "are from (on Gemini, robots2.txt's 'ask' counts as 'no')",
    )
    add_connect_to_option(parser, "with --against gemini://...")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        if args.profile or args.bot or args.does:
            raise CommandError("classify: --list takes no bot")
        return _list(args.json)
    profile, bot = _profile(args)
    result = profile.classify()
    if (args.path or args.at) and not args.against:
        raise CommandError("classify: --path and --at need --against")
    at = args.at or datetime.now(UTC)
    client = GeminiClient(connect_to=Resolver(connect_rules(args.connect_to), loopback_only=False))
    reports = [
        effective_policy(
            _site(source, args.protocol, client),
            agent=profile.token,
            virtual_agents=result.virtual_agent_names,
            categories=result.category_names,
            relevant_directives=result.directive_names,
            recommended_mode=result.recommended_mode,
            adapts_per_activity=result.adapts_per_activity,
            paths=args.path,
            at=at,
            source=source,
            documented_virtual_agents=bot.documented_virtual_agents
            if bot is not None and bot.obeys
            else None,
        )
        for source in args.against or ()
    ]
    if args.json:
        emit_json({**_as_json(profile, bot, result), "against": [r.as_dict() for r in reports]})
    else:
        _print(profile, bot, result, sys.stdout)
        for report in reports:
            _print_report(report, bot, sys.stdout)
    refused = any(
        not v.allowed for r in reports for v in r.mode(r.recommended_mode).verdicts if v.explicit
    )
    return EXIT_NEGATIVE if refused else EXIT_OK


def _site(source: str, protocol: Scheme, client: GeminiClient) -> SitePolicy:
    """The SOURCE's policy; a site whose robots.txt got no answer is one line, exit 1."""
    try:
        return site_from_source(source, protocol, client)
    except PolicyUnreachable as exc:
        raise CommandError(f"--against {exc}", EXIT_NEGATIVE) from None


def _profile(args: argparse.Namespace) -> tuple[Profile, KnownBot | None]:
    given = [x for x in (args.profile, args.bot, args.does) if x]
    if len(given) != 1:
        raise CommandError(
            "classify: describe the bot in exactly one way: PROFILE.toml, --bot NAME or "
            "--does ACTIVITY,... (see 'geminibot classify --help')"
        )
    agent = agent_option(args.agent) if args.agent is not None else None
    try:
        if args.does:
            return (
                profile_from_flags(args.does, token=agent, adapts_per_activity=args.adapts),
                None,
            )
        if args.bot:
            bot = _registry_bot(args.bot)
            profile = bot.profile()
        else:
            name, data = read_source(args.profile)
            profile = profile_from_toml(data, name)
            bot = None
        if agent is not None:
            profile = replace(profile, token=check_token(agent, "--agent"))
        if args.adapts:
            profile = replace(profile, adapts_per_activity=True)
    except ProfileError as exc:
        raise CommandError(str(exc)) from None
    return profile, bot


def _registry_bot(name: str) -> KnownBot:
    try:
        registry = load_registry()
    except RegistryError as exc:  # a broken package, not the user's fault: still say what
        raise CommandError(f"the bot registry is malformed: {exc}") from None
    bot = registry.find(name)
    if bot is None:
        raise CommandError(
            f"unknown bot {name!r}; 'geminibot classify --list' shows the known bots"
        )
    return bot


def _list(as_json: bool) -> int:
    try:
        registry = load_registry()
    except RegistryError as exc:
        raise CommandError(f"the bot registry is malformed: {exc}") from None
    rows = []
    for bot in registry.bots:
        result = bot.profile().classify()
        if as_json:
            emit_json({**bot.as_dict(), "classification": _summary(result)})
            continue
        rows.append(
            (
                bot.id,
                bot.token or "-",
                bot.protocol,
                ",".join(a.value for a in bot.activities),
                ",".join(result.virtual_agent_names) or "-",
                ",".join(result.category_names) or "-",
            )
        )
    if not as_json:
        header = ("ID", "TOKEN", "PROTOCOL", "ACTIVITIES", "VIRTUAL AGENTS", "ROBOTS2 CATEGORIES")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def _summary(result: Classification) -> dict[str, object]:
    return {
        "virtual_agents": list(result.virtual_agent_names),
        "categories": list(result.category_names),
        "recommended_mode": result.recommended_mode,
        "warnings": [w.code for w in result.warnings],
    }


def _as_json(profile: Profile, bot: KnownBot | None, result: Classification) -> dict[str, object]:
    return {
        "profile": profile.as_dict(),
        "registry": bot.as_dict() if bot else None,
        "classification": result.as_dict(),
    }


def _print_assignments(title: str, items: tuple[Assignment, ...], out: TextIO) -> None:
    if not items:
        say(out, f"{title}: none")
        return
    say(out, f"{title}:")
    for item in items:
        for i, reason in enumerate(item.reasons):
            label = item.name if i == 0 else ""
            say(
                out,
                f"{label:<17} <- {reason.activity.value}: {reason.source.cite()}",
                "  ",
                " " * 23,
            )


def _print(profile: Profile, bot: KnownBot | None, result: Classification, out: TextIO) -> None:
    who = profile.name or "bot"
    token = f" (own token: {profile.token})" if profile.token else " (no own token)"
    say(out, f"{who}{token}")
    if bot is not None:
        _print_registry_entry(bot, out)
    say(out, f"activities: {', '.join(a.value for a in result.activities) or 'none'}")
    say(out, "")
    _print_assignments("Gemini virtual agents", result.virtual_agents, out)
    _print_assignments("robots2.txt categories", result.categories, out)
    if result.directives:
        say(
            out,
            f"robots2.txt directives that answer its activities: "
            f"{', '.join(result.directive_names)}",
        )
    if result.combination:
        say(out, f"combination: {result.combination}")
        if result.combination_source:
            say(out, f"<- {result.combination_source.cite()}", "  ", "     ")
    say(out, f"mode: {result.recommended_mode} ({result.mode_reason})")
    if bot is not None and bot.missing_virtual_agents:
        say(
            out,
            f"note: not documented to obey {', '.join(bot.missing_virtual_agents)}, "
            f"which its activities call for",
        )
    if result.warnings:
        say(out, "warnings:")
        for w in result.warnings:
            say(out, f"[{w.code}] {w.message}", "  ", "      ")


def _print_registry_entry(bot: KnownBot, out: TextIO) -> None:
    """What the registry documents of the bot."""
    say(out, f"documented as: {bot.documented_as}", "  ", "    ")
    say(out, f"source: {bot.source}", "  ", "    ")
    if bot.obeys:
        say(out, f"documented to obey: {', '.join(bot.obeys)}", "  ", "    ")
    if bot.notes:
        say(out, f"notes: {bot.notes}", "  ", "    ")
    if bot.protocol == "web":
        say(out, "(a web bot: its virtual agents matter when it fetches from Gemini hosts)", "  ")


def _yes(allowed: bool) -> str:
    return "allowed" if allowed else "disallowed"


#: Rules of one group listed in the text output (``--json`` lists them all).
MAX_RULES_SHOWN = 10


def _group_title(g: AppliedRules) -> str:
    plural = "s" if len(g.lines) > 1 else ""
    return f"{g.file} group {g.token} (User-agent line{plural} {', '.join(map(str, g.lines))})"


def _print_groups(groups: tuple[AppliedRules, ...], out: TextIO, indent: str) -> None:
    """Each group and its rules, as the file has them: ``line 7   Disallow: /youtube``."""
    for g in groups:
        say(out, f"{_group_title(g)}:" if g.rules else f"{_group_title(g)}: no rules", indent)
        width = len(str(max((r.line for r in g.rules), default=0)))
        for r in g.rules[:MAX_RULES_SHOWN]:
            say(out, f"line {r.line:<{width}}  {r.text()}", indent + "  ", indent + "    ")
        hidden = len(g.rules) - MAX_RULES_SHOWN
        if hidden > 0:
            say(out, f"... and {hidden:,} more rules (--json lists them all)", indent + "  ")


def _key(g: AppliedRules) -> tuple[str, str]:
    return g.file, g.token


def _print_modes(report: SiteReport, out: TextIO) -> None:
    """The recommended mode's groups and rules; the other mode only where it differs."""
    main = report.mode(report.recommended_mode)
    other = report.strict if main.mode == "precedence" else report.precedence
    same = [_key(g) for g in main.groups] == [_key(g) for g in other.groups]
    also = f", {other.mode} mode the same" if same else ""
    if not main.groups:
        say(out, f"{main.mode} mode (recommended){also}: no group applies", "  ")
    else:
        say(out, f"{main.mode} mode (recommended){also}:", "  ")
        _print_groups(main.groups, out, "    ")
    if same:
        return
    shown = {_key(g) for g in main.groups}
    extra = tuple(g for g in other.groups if _key(g) not in shown)
    if extra:
        say(out, f"{other.mode} mode also applies:", "  ")
        _print_groups(extra, out, "    ")
    else:
        names = ", ".join(f"{g.file} group {g.token}" for g in other.groups) or "no group"
        say(out, f"{other.mode} mode applies only {names}", "  ", "    ")


def _print_star(report: SiteReport, out: TextIO) -> None:
    """What ``*`` gets, for contrast."""
    if not report.star_groups:
        free = "" if report.file_states else ", nothing is restricted"
        say(out, f"`*` for contrast: no group applies to it{free}", "  ", "    ")
        return
    shown = {_key(g) for g in (*report.precedence.groups, *report.strict.groups)}
    if all(_key(g) in shown for g in report.star_groups):
        names = ", ".join(g.token for g in report.star_groups)
        say(out, f"`*` for contrast: group {names} alone (listed above)", "  ", "    ")
        return
    say(out, "`*` for contrast:", "  ")
    _print_groups(report.star_groups, out, "    ")


def _print_documented(report: SiteReport, bot: KnownBot, out: TextIO) -> None:
    """What a known bot is documented to obey, beside what it must obey."""
    if report.documented is None:
        return
    obeys = ", ".join(bot.obeys)
    main = report.mode(report.recommended_mode)
    if [_key(g) for g in report.documented] == [_key(g) for g in main.groups]:
        say(out, f"documented to obey {obeys}: the same groups here", "  ", "    ")
        return
    gives = ", ".join(f"{g.file} group {g.token}" for g in report.documented)
    free = "" if report.file_states else ": nothing restricted"
    said = f"here that is {gives}" if gives else f"here no group names them{free}"
    missing = ", ".join(
        va for va in report.virtual_agents if va not in bot.documented_virtual_agents
    )
    why = (
        f"; not documented to obey {missing}, so the groups above are what it should obey, "
        "not what it is known to do"
        if missing
        else ""
    )
    say(out, f"documented to obey {obeys}: {said}{why}", "  ", "    ")


def _print_delay(report: SiteReport, out: TextIO) -> None:
    delay = report.mode(report.recommended_mode).delay
    star = report.mode(report.recommended_mode).star_delay
    where = f", {delay.file} line {delay.line}" if delay.file and delay.line else ""
    contrast = (
        "the same for `*`"
        if abs(delay.seconds - star.seconds) < 1e-9
        else f"`*` gets {star.seconds:g} s"
    )
    say(out, f"waiting time: {delay.seconds:g} s ({delay.rule}{where}); {contrast}", "  ", "    ")


def _print_asked(report: SiteReport, out: TextIO) -> None:
    main = report.mode(report.recommended_mode)
    other = report.strict if main.mode == "precedence" else report.precedence
    explicit = [v for v in main.verdicts if v.explicit]
    if not explicit:
        return
    say(out, f"paths asked ({main.mode} mode):", "  ")
    for v in explicit:
        notes = []
        if v.robots_allowed != v.allowed:
            notes.append(f"robots.txt alone: {_yes(v.robots_allowed)}")
        twin = other.verdict(v.path)
        if twin is not None and twin.allowed != v.allowed:
            notes.append(f"{other.mode}: {_yes(twin.allowed)}")
        if v.star_allowed != v.allowed:
            notes.append(f"`*`: {_yes(v.star_allowed)}")
        path = terminal_safe(v.path)
        extra = f" ({'; '.join(notes)})" if notes else ""
        say(out, f"{path:<28} {_yes(v.allowed)}{extra}", "    ", "      ")
        say(out, v.reason, "      ", "      ")


def _print_report(report: SiteReport, bot: KnownBot | None, out: TextIO) -> None:
    who = f"agent {report.agent}" if report.agent else "no own token"
    as_ = ", ".join(report.virtual_agents) or "no virtual agent"
    say(out, "")
    print(terminal_safe(f"against {report.source} ({who}; {as_})"), file=out)
    for state in report.file_states:
        say(out, state, "  ", "    ")
    groups = (*report.precedence.groups, *report.strict.groups, *report.star_groups)
    if groups or not report.file_states:  # else the files' states are the whole answer
        _print_modes(report, out)
    for va, mode in report.per_agent:
        names = ", ".join(f"{g.file} group {g.token}" for g in mode.groups) or "no group"
        say(out, f"adapting per activity, the fetches made as {va} alone: {names}", "  ", "    ")
    _print_beyond(report, out)
    if groups or not report.file_states:
        _print_star(report, out)
    if bot is not None:
        _print_documented(report, bot, out)
    _print_delay(report, out)
    _print_asked(report, out)
    if report.truncated:
        say(
            out,
            f"(only the first {MAX_CANDIDATE_PATHS:,} paths made from the rules were "
            "decided: the files have very many rules)",
            "  ",
            "   ",
        )
    _print_usage(report, out)


def _print_beyond(report: SiteReport, out: TextIO) -> None:
    """The rules of other files that refuse what robots.txt allows (robots2.txt ``crawl:``,
    agents.txt, Visit-time windows)."""
    for r in report.mode(report.recommended_mode).beyond:
        group = f", {'group' if r.file == 'robots.txt' else 'for'} {r.group}" if r.group else ""
        what = f"{r.rule} ({r.file} line {r.line}{group})" if r.rule else f"{r.file}: {r.text}"
        say(out, f"also refused by {what}", "  ", "    ")


def _print_usage(report: SiteReport, out: TextIO) -> None:
    stated = [u for u in report.usage if u.answer.value is not None]
    if not stated:
        note = report.usage[0].answer.note if report.usage else ""
        say(out, f"AI usage (robots2.txt): nothing stated ({note})", "  ")
        return
    say(out, "AI usage (robots2.txt; * marks the directives its activities need):", "  ")
    for u in report.usage:
        a = u.answer
        mark = "*" if u.relevant else " "
        if a.value is None:
            say(out, f"{mark} {a.directive:<12} not stated", "   ")
            continue
        where = f"{a.file} line {a.line}" if a.line else a.file
        label = f"the most restrictive, for {u.category}" if u.category else ""
        extra = "; ".join(x for x in (a.note, label) if x)
        say(
            out,
            f"{mark} {a.directive:<12} {a.value:<13} {where}{'  (' + extra + ')' if extra else ''}",
            "   ",
            " " * 32,
        )
