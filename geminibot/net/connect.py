"""Where to connect for a URL's host: ``--connect-to`` / ``--resolve`` rules and the
loopback guard of ``--test-range`` (no I/O; the clients call the result per connection).

A rule ``HOST:PORT:ADDR:PORT2`` sends connections for HOST port PORT to ADDR port PORT2;
``--resolve HOST:PORT:ADDR`` is the same with PORT2 = PORT. TLS SNI, the ``Host`` header
and Gemini's certificate pins keep the URL's host. HOST may be

- a name, in Unicode or punycode (``bücher.test`` and ``xn--bcher-kva.test`` are one
  host, as they are in URLs), an IPv4 address or a bracketed IPv6 address;
- a shell pattern (``*.test``), matched against the host in punycode and in Unicode.

ADDR is a name or an address, IPv6 in brackets. The first matching rule wins.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from geminibot.cliutil import CommandError
from geminibot.net.errors import ConnectionFailed
from geminibot.urls import InvalidURL, normalise_host, unicode_host

#: Names that always mean this machine.
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
#: Hosts whose route a :class:`Resolver` remembers (rules are matched once per host, not
#: once per request); past this many the memory starts again empty.
MAX_ROUTES = 20_000
_WILDCARDS = frozenset("*?[")
_PART = r"(\[[^\]]*\]|[^:\[\]]+)"
_CONNECT_TO = re.compile(rf"{_PART}:(\d+):{_PART}:(\d+)")
_RESOLVE = re.compile(rf"{_PART}:(\d+):{_PART}")

ConnectTo = Mapping[str, tuple[str, int]] | Callable[[str, int], tuple[str, int]]
"""Where to connect for a URL's host and port, instead of resolving the name: a mapping
from ``"host:port"`` or ``"host"`` to ``(address, port)``, or a function of (host, port)
such as a :class:`Resolver`."""


class ConnectToError(ValueError):
    """A ``--connect-to`` or ``--resolve`` rule that cannot be read."""


@dataclass(frozen=True, slots=True)
class ConnectRule:
    """A ``--connect-to`` or ``--resolve`` rule: connections for host and port go to
    another address and port."""

    host: str
    """A normalised host (punycode, compressed IPv6 without brackets) or a pattern."""
    port: int
    address: str
    """Where to connect instead: a name or an address (IPv6 without brackets)."""
    to_port: int

    def matches(self, host: str, port: int) -> bool:
        """Whether the rule covers a URL's (normalised) host and port."""
        if port != self.port:
            return False
        if host == self.host:
            return True
        if not _WILDCARDS & set(self.host):
            return False
        return fnmatch.fnmatchcase(host, self.host) or fnmatch.fnmatchcase(
            unicode_host(host), self.host
        )


def parse_connect_to(text: str) -> ConnectRule:
    """``HOST:PORT:ADDR:PORT2`` (see the module docstring); raises :class:`ConnectToError`."""
    m = _CONNECT_TO.fullmatch(text)
    if m is None:
        raise ConnectToError(f"--connect-to {text!r}: expected HOST:PORT:ADDR:PORT2")
    return _rule("--connect-to", text, m[1], m[2], m[3], m[4])


def add_connect_to_option(parser: Any, when: str = "") -> None:
    """Give a command the ``--connect-to`` option (repeatable; read by
    :func:`connect_rules`); ``when`` begins its help where the option serves only part of
    the command (``with --against gemini://...``)."""
    parser.add_argument(
        "--connect-to",
        action="append",
        default=[],
        metavar="HOST:PORT:ADDR:PORT2",
        help=f"{when}: " * bool(when) + "connect to ADDR:PORT2 for HOST:PORT (HOST may be a "
        "pattern: *.test; TLS SNI, Host and pins stay HOST); repeatable",
    )


def connect_rules(connect_to: Iterable[str], resolve: Iterable[str] = ()) -> list[ConnectRule]:
    """A command line's ``--connect-to`` rules, then its ``--resolve`` rules (the first
    that matches wins); :class:`~geminibot.cliutil.CommandError` (exit 2) for a rule
    that cannot be read."""
    try:
        return [*map(parse_connect_to, connect_to), *map(parse_resolve, resolve)]
    except ConnectToError as exc:
        raise CommandError(str(exc)) from None


def parse_resolve(text: str) -> ConnectRule:
    """``HOST:PORT:ADDR``: connect to ADDR on the same port; raises :class:`ConnectToError`."""
    m = _RESOLVE.fullmatch(text)
    if m is None:
        raise ConnectToError(f"--resolve {text!r}: expected HOST:PORT:ADDR")
    return _rule("--resolve", text, m[1], m[2], m[3], m[2])


def _rule(option: str, text: str, host: str, port: str, address: str, to_port: str) -> ConnectRule:
    ports = int(port), int(to_port)
    if not all(0 < p < 65536 for p in ports):
        raise ConnectToError(f"{option} {text!r}: port out of range (1 to 65535)")
    try:
        pattern = _host_pattern(host)
    except InvalidURL as exc:
        raise ConnectToError(f"{option} {text!r}: {exc}") from None
    return ConnectRule(pattern, ports[0], address.strip("[]"), ports[1])


def _host_pattern(host: str) -> str:
    """A rule's HOST as URLs hold hosts; a pattern label by label (wildcard labels are
    only lower-cased, and then also match the Unicode form of a host)."""
    if not _WILDCARDS & set(host) or host.startswith("["):
        return normalise_host(host)
    labels = host.rstrip(".").split(".")
    return ".".join(
        label.lower() if _WILDCARDS & set(label) else normalise_host(label) for label in labels
    )


def is_loopback(address: str) -> bool:
    if address.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class Resolver:
    """Where to connect for a host: the first matching rule, else the host itself.

    With ``loopback_only`` (``--test-range``) anything that is not a loopback address is
    refused (:class:`~geminibot.net.errors.ConnectionFailed`) before a connection is
    tried."""

    def __init__(self, rules: Iterable[ConnectRule], *, loopback_only: bool = False) -> None:
        self.rules = tuple(rules)
        self.loopback_only = loopback_only
        self._routes: dict[tuple[str, int], tuple[str, int]] = {}  # at most MAX_ROUTES

    def address(self, host: str, port: int) -> tuple[str, int]:
        known = self._routes.get((host, port))
        if known is not None:
            return known
        found = next(
            ((r.address, r.to_port) for r in self.rules if r.matches(host, port)), (host, port)
        )
        if len(self._routes) >= MAX_ROUTES:
            self._routes.clear()
        self._routes[(host, port)] = found
        return found

    def __call__(self, host: str, port: int) -> tuple[str, int]:
        address, to_port = self.address(host, port)
        if self.loopback_only and not is_loopback(address):
            raise ConnectionFailed(
                f"--test-range: {host} is not on this machine ({address}); refused"
            )
        return address, to_port


def route(connect_to: ConnectTo | None, host: str, port: int) -> tuple[str, int]:
    """Where to connect for ``host`` and ``port`` under a :data:`ConnectTo` override."""
    if connect_to is None:
        return host, port
    if callable(connect_to):
        return connect_to(host, port)
    found = connect_to.get(f"{host}:{port}") or connect_to.get(host)
    return found if found is not None else (host, port)
