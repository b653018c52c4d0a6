"""The forms and ranges of the service's settings: one check per kind of value.

A check takes a value of the setting's type (TOML has already given it one) and returns
what is wrong with it, as the end of a sentence ("must be 1 to 65535"), or None when it
is fine. :mod:`geminibot.service.config` runs them over every setting before anything
starts and says which setting, on which line, is wrong.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from geminibot.net.connect import ConnectToError, parse_connect_to
from geminibot.net.guard import parse_network
from geminibot.urls import InvalidURL, parse_url

#: What a check returns: the problem, or None.
Check = Callable[[Any], str | None]
#: Longest delay or interval accepted (a week), in seconds: a larger one is a mistake of
#: unit (milliseconds for seconds), not a choice.
MAX_SECONDS = 7 * 86400.0


def whole(low: int, high: int | None = None) -> Check:
    """A whole number from ``low`` to ``high`` (no upper bound when None)."""

    def check(value: int) -> str | None:
        if value < low or (high is not None and value > high):
            return f"must be {low} to {high}" if high is not None else f"must be {low} or more"
        return None

    return check


#: A port to listen on.
port = whole(1, 65535)


def seconds(value: float) -> str | None:
    """A delay or an interval: 0 to :data:`MAX_SECONDS`."""
    if not math.isfinite(value) or value < 0:
        return "must be 0 or more (seconds)"
    if value > MAX_SECONDS:
        return f"must be at most {MAX_SECONDS:g} s (a week)"
    return None


def above_zero(value: float) -> str | None:
    """A delay that must not be 0 (a restart at once would spin)."""
    return "must be more than 0 (seconds)" if value <= 0 else seconds(value)


def one_of(choices: tuple[str, ...]) -> Check:
    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    return check


def url(schemes: tuple[str, ...]) -> Check:
    """An absolute URL of one of ``schemes``, with a host."""

    def check(value: str) -> str | None:
        try:
            parse_url(value, schemes)
        except InvalidURL as exc:
            return str(exc)
        return None

    return check


def database(value: str) -> str | None:
    """An SQLite file (not a folder, its folder not a file) or a ``postgresql://`` URL."""
    if value.startswith(("postgresql://", "postgres://")):
        return None
    if "://" in value:
        return "must be an SQLite file's path or a postgresql:// URL"
    return path(value, folder=False)


def path(value: str, *, folder: bool) -> str | None:
    """A file's or folder's path that can be one: not empty, not the other kind."""
    if not value or "\0" in value:
        return "must be a path"
    where = Path(value)
    if folder and where.exists() and not where.is_dir():
        return "names a file, not a folder"
    if not folder and where.is_dir():
        return "names a folder, not a file"
    for parent in where.parents:
        if parent.exists():
            return None if parent.is_dir() else f"{parent} is a file, not a folder"
    return None


def folder(value: str) -> str | None:
    return path(value, folder=True)


def address(value: str) -> str | None:
    """An address to listen on: an IP address or a host name."""
    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        pass
    return None if _is_host_name(value) else "must be an IP address or a host name"


def host_name(value: str) -> str | None:
    return None if _is_host_name(value) else "must be a host name, such as localhost"


def _is_host_name(value: str) -> bool:
    if not value or any(c in value for c in "/:?#@[]%\\ \t") or value.strip() != value:
        return False
    try:
        parse_url(f"gemini://{value}/")
    except InvalidURL:
        return False
    return True


def host_pattern(value: str) -> str | None:
    """A host or a shell pattern of hosts (``*.example.org``), no scheme or path."""
    if not value or any(c in value for c in "/@ \t") or "://" in value:
        return "must be a host or a pattern of hosts, such as *.example.org"
    return None


def connect_to(value: str) -> str | None:
    try:
        parse_connect_to(value)
    except ConnectToError as exc:
        return str(exc).removeprefix(f"--connect-to {value!r}: ")
    return None


def network(value: str) -> str | None:
    """An address or a network in CIDR notation."""
    try:
        parse_network(value)
    except ValueError:
        return "must be an address or a network (CIDR), such as 10.1.2.0/24"
    return None
