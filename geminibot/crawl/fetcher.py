"""The crawler's edge: the Gemini client as a ``fetch(url) -> Response`` function, and the
address overrides (``--connect-to``) and loopback guard (``--test-range``) of the command line.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re

from geminibot.crawl.crawler import Fetch, Response
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.errors import ConnectionFailed, GeminiError

#: Names that always mean this machine.
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


class ResolveError(ValueError):
    """A ``--connect-to`` rule that cannot be read."""


_CONNECT_TO = re.compile(r"([^:]+):(\d+):(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+):(\d+)")


def parse_connect_to(rule: str) -> tuple[str, int, str, int]:
    """``HOST:PORT:ADDR:PORT2`` as for ``geminibot fetch --connect-to``, except that HOST
    may be a shell pattern (``*.test``) -> (pattern, port, address, port2)."""
    m = _CONNECT_TO.fullmatch(rule)
    if m is None:
        raise ResolveError(f"--connect-to {rule!r}: expected HOST:PORT:ADDR:PORT2")
    port, port2 = int(m[2]), int(m[4])
    if not (0 < port < 65536 and 0 < port2 < 65536):
        raise ResolveError(f"--connect-to {rule!r}: port out of range")
    return m[1].lower(), port, m[3].strip("[]"), port2


def is_loopback(address: str) -> bool:
    if address.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class Resolver:
    """Where to connect for a host: the first matching ``--connect-to`` rule, else the host.

    With ``loopback_only`` (``--test-range``) anything that is not a loopback address is
    refused before a connection is tried."""

    def __init__(self, rules: list[tuple[str, int, str, int]], *, loopback_only: bool) -> None:
        self.rules = rules
        self.loopback_only = loopback_only

    def address(self, host: str, port: int) -> tuple[str, int]:
        for pattern, from_port, address, to_port in self.rules:
            if from_port == port and fnmatch.fnmatchcase(host.lower(), pattern):
                return address, to_port
        return host, port

    def __call__(self, host: str, port: int) -> tuple[str, int]:
        address, to_port = self.address(host, port)
        if self.loopback_only and not is_loopback(address):
            raise ConnectionFailed(
                f"--test-range: {host} is not on this machine ({address}); refused"
            )
        return address, to_port


def gemini_fetch(client: GeminiClient) -> Fetch:
    """The client as a crawler fetcher: one request, redirects returned, not followed."""

    async def fetch(url: str) -> Response:
        try:
            response = await client.fetch(url, follow_redirects=False)
        except GeminiError as exc:
            return Response(None, error=f"{type(exc).__name__}: {exc}")
        return Response(response.status, response.meta, response.body)

    return fetch
