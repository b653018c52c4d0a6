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
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geminibot.cliutil import LINE_WIDTH

Value = str | int | float | bool | list[str]


@dataclass(frozen=True)
class Option:
    """One setting of the service: its section and key in the TOML file, its default and
    help (also a command-line flag)."""

    section: str
    key: str
    default: Value
    help: str

    @property
    def flag(self) -> str:
        return f"--{self.section}-{self.key.replace('_', '-')}"

    @property
    def dest(self) -> str:
        return f"{self.section}__{self.key}"


#: Every setting of the service, in the order of the commented default file.
OPTIONS: tuple[Option, ...] = (
    Option(
        "service",
        "db",
        "var/geminibot/crawl.db",
        "crawl database: an SQLite file, or postgresql://USER@HOST/DB",
    ),
    Option(
        "service",
        "restart_delay",
        1.0,
        "seconds before a component that died is started again; doubled at each death in a row, up to restart_max",
    ),
    Option("service", "restart_max", 60.0, "longest wait before a restart (seconds)"),
    Option(
        "service",
        "stop_timeout",
        30.0,
        "seconds a component has to stop after SIGTERM before it is killed",
    ),
    Option(
        "service",
        "background_nice",
        10,
        "CPU niceness (0-19) of the crawl, the index updates and link authority, so that"
        " on a busy machine the search capsule and the portal answer first",
    ),
    Option("crawl", "enabled", True, "run the crawl that keeps going (geminibot crawl --forever)"),
    Option(
        "crawl",
        "seeds",
        [],
        "URLs to start from (gemini:// or http(s)://); needed when crawl is enabled",
    ),
    Option(
        "crawl", "allow_hosts", [], "host patterns crawled beside the seeds' hosts (*.example.org)"
    ),
    Option("crawl", "role", "indexer", "indexer, archiver or researcher"),
    Option("crawl", "concurrency", 16, "requests in flight at once"),
    Option(
        "crawl",
        "min_delay",
        1.0,
        "seconds between two requests to one host when no policy sets a pace",
    ),
    Option(
        "crawl",
        "test_range",
        False,
        "local test capsules only: loopback addresses, no minimum delay",
    ),
    Option("crawl", "connect_to", [], "HOST:PORT:ADDR:PORT2 rules (as curl's --connect-to)"),
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
        "to search without a rebuild; 0: never",
    ),
    Option("search", "enabled", True, "serve the search capsule (geminibot serve-search)"),
    Option("search", "host", "127.0.0.1", "address it listens on"),
    Option("search", "port", 1965, "port it listens on"),
    Option("search", "hostname", "localhost", "host name it answers for (its certificate's)"),
    Option("search", "certs", "var/geminibot/certs", "its certificate folder"),
    Option("search", "args", [], "further 'geminibot serve-search' options"),
    Option("portal", "enabled", False, "serve the web portal (geminibot portal)"),
    Option("portal", "host", "127.0.0.1", "address it listens on"),
    Option("portal", "port", 8965, "port it listens on"),
    Option("portal", "args", [], "further 'geminibot portal' options"),
    Option("metrics", "enabled", True, "serve metrics in the Prometheus text format over HTTP"),
    Option("metrics", "host", "127.0.0.1", "address it listens on (loopback: this machine only)"),
    Option("metrics", "port", 9465, "port it listens on"),
)
SECTIONS = tuple(dict.fromkeys(o.section for o in OPTIONS))


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


def _check(option: Option, value: Any, where: str) -> Value:
    expected = type(option.default)
    if isinstance(option.default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {option.section}.{option.key} must be a list of strings")
        return list(value)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not expected:
        raise ConfigError(
            f"{where}: {option.section}.{option.key} must be a {expected.__name__}, "
            f"got {_toml(value) if isinstance(value, Value) else type(value).__name__}"
        )
    return value


def read_file(path: Path) -> Settings:
    """The settings of a TOML file over the defaults; :class:`ConfigError` for a file
    that cannot be read, or an unknown or mistyped key."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not TOML: {exc}") from None
    settings = defaults()
    known = {(o.section, o.key): o for o in OPTIONS}
    for section, table in data.items():
        if section not in settings or not isinstance(table, dict):
            raise ConfigError(f"{path}: unknown section [{section}] (one of {', '.join(SECTIONS)})")
        for key, value in table.items():
            option = known.get((section, key))
            if option is None:
                raise ConfigError(f"{path}: unknown setting {section}.{key}")
            settings[section][key] = _check(option, value, str(path))
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
                option.flag, type=kind, metavar=option.key.upper(), help=option.help, **common
            )


def load(args: argparse.Namespace, path: Path | None) -> Settings:
    """The file's settings (or the defaults), then the flags given on the command line."""
    settings = read_file(path) if path is not None else defaults()
    for option in OPTIONS:
        value = getattr(args, option.dest, None)
        if value is not None:
            settings[option.section][option.key] = value
    return settings


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
