"""The service's settings: one table of options, read from a TOML file and the command line.

:data:`OPTIONS` is the one description of every setting: its section and key in the file
(``[crawl] seeds = [...]``), its command-line flag (``--crawl-seeds``), its type, its
default and what it does. :func:`default_config` writes it out as the commented file of
the defaults (``geminibot serve --print-config``); :func:`load` reads a file, checks every
key and type, and lets the command line override it (flags given win over the file, the
file over the defaults).
"""

from __future__ import annotations

import argparse
import re
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geminibot import defaults as shared
from geminibot.cliutil import LINE_WIDTH
from geminibot.service import checks
from geminibot.urls import DEFAULT_PORTS

Value = str | int | float | bool | list[str]


@dataclass(frozen=True)
class Option:
    """One setting of the service: its section and key in the TOML file, its default,
    its help (also a command-line flag) and the check of its values (of each item, for a
    list): :mod:`geminibot.service.checks`."""

    section: str
    key: str
    default: Value
    help: str
    check: checks.Check | None = None

    @property
    def flag(self) -> str:
        return f"--{self.section}-{self.key.replace('_', '-')}"

    @property
    def dest(self) -> str:
        return f"{self.section}__{self.key}"

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"


#: Every setting of the service, in the order of the commented default file. The
#: defaults a command has too are its own (:mod:`geminibot.defaults`).
OPTIONS: tuple[Option, ...] = (
    Option(
        "service",
        "db",
        "var/geminibot/crawl.db",
        "crawl database: an SQLite file, or postgresql://USER@HOST/DB",
        checks.database,
    ),
    Option(
        "service",
        "restart_delay",
        1.0,
        "seconds before a component that died is started again; doubled at each death "
        "in a row, up to restart_max",
        checks.above_zero,
    ),
    Option(
        "service", "restart_max", 60.0, "longest wait before a restart (seconds)", checks.above_zero
    ),
    Option(
        "service",
        "stop_timeout",
        30.0,
        "seconds a component has to stop after SIGTERM before it is killed (the index "
        "updater's SIGTERM comes once the crawl has ended)",
        checks.seconds,
    ),
    Option(
        "service",
        "background_nice",
        10,
        "CPU niceness (0-19) of the crawl, the index updates and link authority, so that"
        " on a busy machine the search capsule and the portal answer first",
        checks.whole(0, 19),
    ),
    Option("crawl", "enabled", True, "run the crawl that keeps going (geminibot crawl --forever)"),
    Option(
        "crawl",
        "seeds",
        [],
        "URLs to start from (gemini:// or http(s)://); needed when crawl is enabled",
        checks.url(("gemini", "http", "https")),
    ),
    Option(
        "crawl",
        "allow_hosts",
        [],
        "host patterns crawled beside the seeds' hosts (*.example.org)",
        checks.host_pattern,
    ),
    Option(
        "crawl",
        "role",
        shared.CRAWL_ROLE,
        "the virtual agent it acts as: " + ", ".join(shared.CRAWL_ROLES),
        checks.one_of(shared.CRAWL_ROLES),
    ),
    Option(
        "crawl",
        "concurrency",
        shared.CRAWL_CONCURRENCY,
        "requests in flight at once, across hosts (each host gets one at a time)",
        checks.whole(1),
    ),
    Option(
        "crawl",
        "min_delay",
        shared.CRAWL_MIN_DELAY,
        "seconds at least between two requests to one host or address, whatever a policy "
        "or the address's adaptive pace says (0: no minimum)",
        checks.seconds,
    ),
    Option(
        "crawl",
        "test_range",
        False,
        "local test capsules only: loopback addresses only, an address's pace starts "
        "unbounded; the portal's too",
    ),
    Option(
        "crawl",
        "connect_to",
        [],
        "HOST:PORT:ADDR:PORT2 rules (as curl's --connect-to); the portal's too",
        checks.connect_to,
    ),
    Option(
        "crawl",
        "allow_addresses",
        [],
        "networks reached although not public (CIDR: 10.1.2.0/24, fd00::/8)",
        checks.network,
    ),
    Option("crawl", "args", [], "further 'geminibot crawl' options, as on its command line"),
    Option(
        "index",
        "enabled",
        True,
        "keep search current: the tantivy index follows the store (geminibot index update "
        "--follow; SQLite only) and link authority is computed again every authority_every",
    ),
    Option(
        "index",
        "authority_every",
        3600.0,
        "seconds between two computations of link authority (TrustRank over the links "
        "between hosts, trusting the seeds; geminibot index authority --every), applied "
        "to search without a rebuild; the first once the crawl has been round the seeds' "
        "reach; 0: never",
        checks.seconds,
    ),
    Option("search", "enabled", True, "serve the search capsule (geminibot serve-search)"),
    Option("search", "host", shared.LISTEN_HOST, "address it listens on", checks.address),
    Option("search", "port", DEFAULT_PORTS["gemini"], "port it listens on", checks.port),
    Option(
        "search",
        "hostname",
        shared.SEARCH_HOSTNAME,
        "host name it answers for (its certificate's)",
        checks.host_name,
    ),
    Option("search", "certs", shared.SEARCH_CERTS, "its certificate folder", checks.folder),
    Option("search", "args", [], "further 'geminibot serve-search' options"),
    Option("portal", "enabled", False, "serve the web portal (geminibot portal)"),
    Option("portal", "host", shared.LISTEN_HOST, "address it listens on", checks.address),
    Option("portal", "port", shared.PORTAL_PORT, "port it listens on", checks.port),
    Option("portal", "args", [], "further 'geminibot portal' options"),
    Option("metrics", "enabled", True, "serve metrics in the Prometheus text format over HTTP"),
    Option(
        "metrics",
        "host",
        "127.0.0.1",
        "address it listens on (loopback: this machine only)",
        checks.address,
    ),
    Option("metrics", "port", 9465, "port it listens on", checks.port),
)
SECTIONS = tuple(dict.fromkeys(o.section for o in OPTIONS))
#: What a value of each type is called in a message.
KINDS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


class ConfigError(ValueError):
    """A configuration file or option that cannot be used; the message says where."""


Settings = dict[str, dict[str, Value]]


def defaults() -> Settings:
    out: Settings = {s: {} for s in SECTIONS}
    for option in OPTIONS:
        value = option.default
        out[option.section][option.key] = list(value) if isinstance(value, list) else value
    return out


def _toml(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def default_config() -> str:
    """The configuration file of the defaults, each setting with what it does."""
    lines = [
        "# geminibot serve: the crawl that keeps going, the search index kept current,",
        "# the search capsule and, if enabled, the web portal, as one service.",
        "# Each setting is shown with its default; each is also a command-line option",
        "# (--SECTION-KEY, e.g. --crawl-seeds), which wins over this file.",
    ]
    section = ""
    for option in OPTIONS:
        if option.section != section:
            section = option.section
            lines += ["", f"[{section}]"]
        lines += textwrap.wrap(
            f"{option.help} ({option.flag})",
            LINE_WIDTH,
            initial_indent="# ",
            subsequent_indent="# ",
            break_on_hyphens=False,
        )
        lines.append(f"{option.key} = {_toml(option.default)}")
    return "\n".join(lines) + "\n"


def _check(option: Option, value: Any, at: str | None) -> Value:
    """``value`` as the setting's type, checked; :class:`ConfigError` naming where it
    came from (``at``, ``FILE:LINE``, and the setting; or its flag when ``at`` is None)
    and what is wrong."""
    label, equals = (f"{at}: {option.name}", " = ") if at is not None else (option.flag, " ")
    if isinstance(option.default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{label}: must be a list of strings")
        for item in value:
            problem = option.check(item) if option.check is not None else None
            if problem is not None:
                shown = _toml(item)
                raise ConfigError(f"{label}: {shown}: {problem.removesuffix(f': {item!r}')}")
        return list(value)
    expected = type(option.default)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not expected:
        got = _toml(value) if isinstance(value, Value) else type(value).__name__
        raise ConfigError(f"{label}{equals}{got}: must be {KINDS[expected]}")
    problem = option.check(value) if option.check is not None else None
    if problem is not None:
        raise ConfigError(f"{label}{equals}{_toml(value)}: {problem}")
    return value


_SECTION = re.compile(r"\[\s*([A-Za-z0-9_-]+)\s*\]\s*(?:#.*)?")
_KEY = re.compile(r"([A-Za-z0-9_-]+)\s*=")


def key_lines(text: str) -> dict[tuple[str, str], int]:
    """The line (from 1) of each ``key = value`` of a TOML file, by (section, key)."""
    lines: dict[tuple[str, str], int] = {}
    section = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if found := _SECTION.fullmatch(stripped):
            section = found[1]
        elif found := _KEY.match(stripped):
            lines.setdefault((section, found[1]), number)
    return lines


def read_file(path: Path) -> Settings:
    """The settings of a TOML file over the defaults; :class:`ConfigError` for a file
    that cannot be read, or an unknown, mistyped or out-of-range value, naming its line."""
    try:
        source = path.read_text()
        data = tomllib.loads(source)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not TOML: {exc}") from None
    settings = defaults()
    known = {(o.section, o.key): o for o in OPTIONS}
    lines = key_lines(source)
    for section, table in data.items():
        if section not in settings or not isinstance(table, dict):
            raise ConfigError(f"{path}: unknown section [{section}] (one of {', '.join(SECTIONS)})")
        for key, value in table.items():
            line = lines.get((section, key))
            at = f"{path}:{line}" if line is not None else str(path)
            option = known.get((section, key))
            if option is None:
                raise ConfigError(f"{at}: unknown setting {section}.{key}")
            settings[section][key] = _check(option, value, at)
    return settings


def add_options(parser: argparse.ArgumentParser) -> None:
    """One flag per setting (default: unset, so that the file's value stands)."""
    for option in OPTIONS:
        kind = type(option.default)
        common: dict[str, Any] = {"dest": option.dest, "default": None}
        if kind is bool:
            parser.add_argument(
                option.flag, action=argparse.BooleanOptionalAction, help=option.help, **common
            )
        elif kind is list:
            parser.add_argument(
                option.flag,
                action="append",
                metavar="VALUE",
                help=option.help + " (repeatable)",
                **common,
            )
        else:
            parser.add_argument(
                option.flag,
                type=_typed(kind, option.flag),
                metavar=option.key.upper(),
                help=option.help,
                **common,
            )


def _typed(kind: type, flag: str) -> Any:
    """The argparse ``type=`` of a flag: ``kind``, or a usage error naming the flag and
    what it must be."""

    def parse(text: str) -> Value:
        try:
            value: Value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: must be {KINDS[kind]}") from None
        return value

    return parse


def load(args: argparse.Namespace, path: Path | None) -> Settings:
    """The file's settings (or the defaults), then the flags given on the command line."""
    settings = read_file(path) if path is not None else defaults()
    for option in OPTIONS:
        value = getattr(args, option.dest, None)
        if value is not None:
            settings[option.section][option.key] = _check(option, value, None)
    check_whole(settings)
    return settings


def check_whole(settings: Settings) -> None:
    """What no one setting says alone: a crawl needs seeds, one component at least is
    enabled, the longest restart delay is not below the first, and no two servers of
    the service listen on one port; :class:`ConfigError` if not."""
    if enabled(settings, "crawl") and not settings["crawl"]["seeds"]:
        raise ConfigError("crawl.seeds is empty (set it, or crawl.enabled = false)")
    if not any(enabled(settings, s) for s in ("crawl", "index", "search", "portal")):
        raise ConfigError("every component is disabled: nothing to run")
    if number(settings, "service", "restart_max") < number(settings, "service", "restart_delay"):
        raise ConfigError("service.restart_max must not be below service.restart_delay")
    taken: dict[int, str] = {}
    for section in ("search", "portal", "metrics"):
        if enabled(settings, section):
            port = int(number(settings, section, "port"))
            if port in taken:
                raise ConfigError(f"{taken[port]}.port and {section}.port are both {port}")
            taken[port] = section


def text(settings: Settings, section: str, key: str) -> str:
    return str(settings[section][key])


def number(settings: Settings, section: str, key: str) -> float:
    value = settings[section][key]
    assert isinstance(value, int | float)
    return float(value)


def strings(settings: Settings, section: str, key: str) -> list[str]:
    value = settings[section][key]
    assert isinstance(value, list)
    return list(value)


def enabled(settings: Settings, section: str) -> bool:
    return bool(settings[section]["enabled"])
