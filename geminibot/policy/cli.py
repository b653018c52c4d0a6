"""``geminibot policy ...``: check URLs against a policy file, and lint policy files."""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import tomllib
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    Parser,
    bounded_number,
    counted,
    emit_json,
    read_source,
    say,
    terminal_safe,
)
from geminibot.policy.agents_txt import NOT_THIS_DIALECT
from geminibot.policy.diagnostics import Diagnostic, has_errors
from geminibot.policy.lint import lint_policy
from geminibot.policy.render import FORMATS, PolicyError, load_policy, render
from geminibot.policy.robots2 import CATEGORIES
from geminibot.policy.robots_model import VIRTUAL_AGENTS
from geminibot.policy.robots_parse import MAX_ROBOTS_BYTES, own_token
from geminibot.policy.site_policy import (
    DIALECT_FILES,
    Bot,
    Dialect,
    SitePolicy,
    detect_dialect,
    looks_like_policy,
)
from geminibot.policy.textlines import not_text

#: Where the classify registry of known bots is (package, file).
REGISTRY_RESOURCE = ("geminibot", "data/bots.toml")
#: How much of a further argument's file is read to tell a policy file by its content.
SNIFF_BYTES = 64 * 1024
_POLICY_FILE_NAME = re.compile(r"(robots|agents)[^/\\]*$", re.IGNORECASE)

CHECK_EPILOG = """\
modes:
  precedence (default)  the bot's own-token group, if the file has one,
                        decides alone; otherwise every group naming one of its
                        virtual agents applies and all must allow; if none
                        does, the '*' group applies.
  strict (--strict)     own token, every matching virtual agent and '*' all
                        apply; a URL is allowed only if all of them allow it.

sources and URLs:
  SOURCE (the first argument) is always a policy file, or - for stdin. After
  it, an argument is another policy file only while it names an existing file
  that is one by its name (robots*, robots2*, agents*) or by its content in
  its first 64 KiB (a robots.txt field line, a robots2.txt directive, an
  agents.txt hash line); the first argument that is not, and everything after
  it, is a URL or path to check, even if a local file has that name
  (/etc/passwd is a path on the host). At most one file of each dialect; the
  dialect comes from the name, else from the content. A URL is allowed only
  if every file allows it; see docs/dialects.md.

agent:
  --agent is cut to its product token as Google's parser cuts a User-agent
  line (the leading letters, '-' and '_'): --agent MJ12bot/1.0 matches
  'User-agent: MJ12bot'.

examples:
  geminibot policy check robots.txt --agent mybot --as indexer \\
      gemini://example.org/a.gmi
  curl -s https://example.org/robots.txt |
      geminibot policy check - --agent mybot --json /x /y
  geminibot policy check robots.txt robots2.txt agents.txt --agent mybot \\
      --category search-indexer --at 2026-11-23T07:00Z --json \\
      https://example.org/a

exit status: 0 every URL allowed, 1 some URL disallowed, 2 usage or input
error.
"""

LINT_EPILOG = """\
Each finding is printed as FILE:LINE: level: message [code], and under a
warning or an error a hint on what to do. Levels: error (a line the parser
ignores or cannot read as intended), warning (read, but probably not as meant:
a User-agent cut inside its name such as AI2Bot read as AI, a template left in
such as $DOMAIN, a User-agent close to a known crawler's token such as Google,
'$' inside a pattern, a robots2 spec-version not implemented), info (worth
knowing, changes nothing: Name/1.0 read as Name). A file that is not text is
not a policy file. Exit status: 0 no errors, 1 errors found, 2 a file could not
be read or is not text.
"""


class _IntermixedParser(Parser):
    """Lets options sit between positionals: ``check a.txt b.txt --agent x URL``."""

    _inner = False

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._inner:
            return super().parse_known_args(args, namespace)
        self._inner = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inner = False


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "policy",
        help="check URLs against robots.txt and lint policy files",
        description="Decide URLs against policy files and lint them.",
    )
    actions = parser.add_subparsers(
        title="policy commands", metavar="ACTION", parser_class=_IntermixedParser
    )

    check = actions.add_parser(
        "check",
        help="may this bot fetch these URLs? one verdict and reason per URL",
        description=(
            "Decide each URL against a host's policy files (robots.txt, robots2.txt,\n"
            "agents.txt) for a bot, and say why."
        ),
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("source", metavar="SOURCE", help="a policy file, or - for stdin")
    check.add_argument(
        "items",
        metavar="URL",
        nargs="+",
        help="gemini://, http(s):// URLs or paths; more policy files may come first",
    )
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
        help="the Gemini virtual agents the bot acts as, comma-separated: "
        f"{', '.join(VIRTUAL_AGENTS)} (default none: only its own token and '*')",
    )
    check.add_argument(
        "--strict", action="store_true", help="apply own, virtual and * groups together"
    )
    check.add_argument(
        "--category",
        choices=CATEGORIES,
        metavar="CATEGORY",
        help=f"the bot's robots2.txt category: {', '.join(CATEGORIES)}",
    )
    check.add_argument(
        "--at",
        type=parse_time,
        metavar="TIME",
        help="the time to decide at, ISO 8601 (UTC unless an offset is given); default now",
    )
    check.add_argument(
        "--protocol",
        choices=("auto", "gemini", "http"),
        default="auto",
        help="the protocol of the host the policy files are from (on Gemini, robots2.txt's "
        "'ask' counts as 'no'); auto: http if a URL is http(s)://, else gemini",
    )
    check.add_argument(
        "--last-duration",
        type=bounded_number(float, 0),
        metavar="SECONDS",
        help="how long the last fetch took, for the rule of thumb when no file sets a pace",
    )
    check.add_argument("--json", action="store_true", help="one JSON object per URL")
    check.set_defaults(run=run_check)

    lint = actions.add_parser(
        "lint",
        help="report what the parser will do with each doubtful line",
        description="Lint robots.txt, robots2.txt and agents.txt files (dialect by name or content).",
        epilog=LINT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lint.add_argument("files", metavar="FILE", nargs="+", help="a policy file, or - for stdin")
    lint.add_argument("--json", action="store_true", help="one JSON object per finding")
    lint.set_defaults(run=run_lint)

    render_cmd = actions.add_parser(
        "render",
        help="render a structured agent policy (TOML) as robots.txt, robots2.txt or agents.txt",
        description=(
            "Render POLICY.toml deterministically: the same policy gives byte-identical output. "
            "The file format is described in docs/dialects.md."
        ),
    )
    render_cmd.add_argument("policy", metavar="POLICY.toml", help="the policy file, or - for stdin")
    render_cmd.add_argument("--format", choices=FORMATS, required=True, help="what to write")
    render_cmd.set_defaults(run=run_render)


def agent_option(value: str) -> str:
    """``--agent`` of any command: the bot's product token, cut as Google's parser cuts a
    User-agent line (a warning on stderr says so); a usage error when there is none."""
    try:
        token, warning = own_token(value)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if warning is not None:
        print(f"geminibot: warning: {terminal_safe(warning)}", file=sys.stderr)
    return token


def parse_virtual_agents(text: str) -> tuple[str, ...]:
    """``indexer,archiver`` -> ("indexer", "archiver"); unknown names are a usage error."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in VIRTUAL_AGENTS]
    if unknown:
        raise CommandError(
            f"unknown virtual agent '{unknown[0]}' in --as; choose from {', '.join(VIRTUAL_AGENTS)}"
        )
    return names


def parse_time(text: str) -> datetime:
    """``--at``: ISO 8601; a trailing Z and a missing offset both mean UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not an ISO 8601 time, e.g. 2026-11-23T07:00Z"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _split_sources(items: list[str]) -> tuple[list[str], list[str]]:
    """Leading items naming existing policy files (by name or content) are more sources;
    from the first other item on, everything is a URL (see CHECK_EPILOG)."""
    n = 0
    while n < len(items) and _is_policy_file(items[n]):
        n += 1
    return items[:n], items[n:]


def _is_policy_file(item: str) -> bool:
    if "://" in item or not os.path.isfile(item):
        return False
    if _POLICY_FILE_NAME.search(item):
        return True
    try:
        with open(item, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return False
    return looks_like_policy(head)


def _file_notes(name: str, data: bytes) -> list[str]:
    """What a person should know about a policy file before its verdicts: lines the parser
    cannot read, a size cut, an agents.txt that is not this dialect."""
    notes: list[str] = []
    diags = lint_file(name, data)
    errors = sum(1 for d in diags if d.level == "error")
    restricted = next((d for d in diags if d.code == "site-restricted"), None)
    if any(d.code == "not-this-dialect" for d in diags):
        notes.append(f"note: {name} is {NOT_THIS_DIALECT}; ignored, it restricts nothing")
    elif restricted is not None:
        notes.append(f"warning: {name}: {restricted.message}")
    elif errors:
        notes.append(
            f"note: {name} has {errors} line(s) the parser ignores or cannot read; "
            f"see 'geminibot policy lint {name}'"
        )
    cut = next((d for d in diags if d.code == "size-limit"), None)
    if cut is not None and detect_dialect(name, data) == "robots":
        notes.append(
            f"warning: {name} is {len(data)} bytes; only its first {MAX_ROBOTS_BYTES} bytes "
            f"(whole lines, up to line {max(cut.line - 1, 0)}) are read: later rules do "
            "not apply (RFC 9309 section 2.5)"
        )
    return notes


def read_policy_file(source: str) -> tuple[str, bytes]:
    """:func:`read_source` for a policy file: (display name, bytes); a file that is not
    text (an executable, an image, mostly control bytes) is a usage error, one line."""
    name, data = read_source(source)
    what = not_text(data)
    if what is not None:
        raise CommandError(f"{name} is not a policy file: not text ({what})")
    return name, data


def load_sources(sources: list[str]) -> dict[Dialect, tuple[str, bytes]]:
    """Read policy files (:func:`read_policy_file`) and sort them by dialect (by name,
    else by content): dialect -> (display name, bytes). Two files of one dialect are a
    usage error."""
    loaded: dict[Dialect, tuple[str, bytes]] = {}
    for source in sources:
        name, data = read_policy_file(source)
        dialect = detect_dialect(name, data)
        if dialect in loaded:
            raise CommandError(
                f"{name} and {loaded[dialect][0]} are both {DIALECT_FILES[dialect]} files; give one"
            )
        loaded[dialect] = (name, data)
    return loaded


def _protocol(choice: str, urls: list[str]) -> str:
    if choice != "auto":
        return choice
    return "http" if any(u.lower().startswith(("http://", "https://")) for u in urls) else "gemini"


def run_check(args: argparse.Namespace) -> int:
    vas = parse_virtual_agents(args.virtual_agents)
    agent = agent_option(args.agent)
    more, urls = _split_sources(args.items)
    sources = [args.source, *more]
    if not urls:
        raise CommandError("give at least one URL to check after the policy file(s)")
    loaded = load_sources(sources)
    for name, data in loaded.values():
        for note in _file_notes(name, data):
            print(f"geminibot: {terminal_safe(note)}", file=sys.stderr)
    protocol = _protocol(args.protocol, urls)
    site = SitePolicy.from_texts(
        "http" if protocol == "http" else "gemini",
        loaded["robots"][1] if "robots" in loaded else None,
        loaded["robots2"][1] if "robots2" in loaded else None,
        loaded["agents"][1] if "agents" in loaded else None,
    )
    bot = Bot(agent, vas, args.category, args.strict)
    at: datetime = args.at if args.at is not None else datetime.now(UTC)
    delay = site.delay(bot, at, args.last_duration)
    usage = site.usage(bot) if site.robots2 is not None or site.robots2_blocked else ()
    names = {d: n for d, (n, _) in loaded.items()}
    robots = site.robots
    any_refused = False
    for url in urls:
        decision = site.may_fetch(url, bot, at)
        any_refused = any_refused or not decision.allowed
        if args.json:
            record: dict[str, object] = {"url": url, "allowed": decision.allowed}
            if robots is not None:
                record.update(robots.decide(url, agent, vas, strict=args.strict).as_dict())
            record.update(decision.as_dict())
            record.update(
                {
                    "agent": agent,
                    "virtual_agents": list(vas),
                    "category": args.category,
                    "source": ", ".join(names.values()),
                    "sources": {DIALECT_FILES[d]: n for d, n in names.items()},
                    "at": at.isoformat(),
                    "crawl_delay": robots.crawl_delay(agent, vas, args.strict) if robots else None,
                    "delay": delay.as_dict(),
                    "usage": [u.as_dict() for u in usage],
                }
            )
            emit_json(record)
        else:
            verdict = "allowed" if decision.allowed else "DISALLOWED"
            print(terminal_safe(f"{verdict:<11} {url}"))  # whole, to copy
            say(sys.stdout, decision.reason, " " * 12, " " * 12)
    if not args.json:
        where = (
            f" ({delay.file} line {delay.line}: {delay.rule})" if delay.file else f" ({delay.rule})"
        )
        say(sys.stdout, f"{'wait':<11} {delay.seconds:g} s between requests{where}", "", " " * 12)
        for u in usage:
            origin = f"{u.file}:{u.line}" if u.line else (u.note or "not stated")
            note = f"; {u.note}" if u.note and u.line else ""
            say(
                sys.stdout,
                f"{'usage':<11} {u.directive}: {u.value or '-'} ({origin}{note})",
                "",
                " " * 12,
            )
    return EXIT_NEGATIVE if any_refused else EXIT_OK


@functools.cache
def known_crawler_tokens() -> frozenset[str]:
    """The product tokens of the crawlers in the classify registry (geminibot/data/bots.toml,
    which ``geminibot.classify.registry`` reads and checks; the policy layer cannot import
    it, and needs only this field)."""
    package, name = REGISTRY_RESOURCE
    table = tomllib.loads(resources.files(package).joinpath(name).read_text("utf-8"))
    return frozenset(
        bot["token"] for bot in table.get("bot", ()) if isinstance(bot.get("token"), str)
    )


def lint_file(name: str, data: bytes) -> tuple[Diagnostic, ...]:
    """``policy lint``'s findings about one file (:func:`lint_policy`, with the known
    crawlers of the registry)."""
    return lint_policy(name, data, known_crawler_tokens())


def run_lint(args: argparse.Namespace) -> int:
    found_errors = False
    counts = {"error": 0, "warning": 0, "info": 0}
    for source in args.files:
        name, data = read_policy_file(source)
        dialect = DIALECT_FILES[detect_dialect(name, data)]
        diagnostics = lint_file(name, data)
        for diag in diagnostics:
            counts[diag.level] += 1
            if args.json:
                emit_json({"file": name, "dialect": dialect, **diag.as_dict()})
            else:
                print(terminal_safe(diag.format(name)))  # whole: FILE:LINE to copy
                if diag.hint:
                    say(sys.stdout, f"hint: {diag.hint}", "  ", "        ")
        found_errors = found_errors or has_errors(diagnostics)
    if not args.json:
        summary = ", ".join(counted(n, level) for level, n in counts.items())
        print(f"{counted(len(args.files), 'file')}: {summary}", file=sys.stderr)
    return EXIT_NEGATIVE if found_errors else EXIT_OK


def run_render(args: argparse.Namespace) -> int:
    name, data = read_source(args.policy)
    try:
        text = render(load_policy(data), args.format)
    except PolicyError as exc:
        raise CommandError(f"{name}: {exc}") from None
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()
    return EXIT_OK
