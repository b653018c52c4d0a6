"""A DNS cache for the clients and the crawler: each name resolved once an hour at most.

Without it every request resolves its host again (one ``getaddrinfo`` in a worker thread
per request); a crawl asks the same few thousand names hundreds of thousands of times. :class:`DnsCache` keeps a name's addresses for :data:`DNS_TTL` seconds and at most
:data:`DNS_CACHE_NAMES` names (the least recently used is forgotten first), so its memory
is bounded whatever the crawl meets. The system resolver's own TTLs are not visible
through ``getaddrinfo``; an hour is what most zones ask and short enough that a capsule
that moved is found again within the hour. A failed lookup is not cached (the next request
asks again, and fails on its own). IP address literals are returned as they are.

Given an :class:`~geminibot.net.guard.AddressGuard` (a crawl's), the cache returns only
the addresses the guard allows, literals included, and :class:`AddressRefused` (an
OSError: the name is treated as one that does not resolve) when none is left.

The Gemini client tries a name's addresses in order; the crawler paces the hosts that share
a first address as one (:mod:`geminibot.crawl.scheduler`).
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import trio

from geminibot.net.guard import AddressGuard

#: Seconds a resolved name is used before it is resolved again.
DNS_TTL = 3600.0
#: Most names kept (about 200 bytes each: some 4 MB at most).
DNS_CACHE_NAMES = 20_000

Lookup = Callable[[str, int], Awaitable[list[str]]]
"""Resolve (name, port) to addresses, first choice first; raises OSError."""


class AddressRefused(OSError):
    """No address of the name that the cache's address guard allows."""


async def system_lookup(name: str, port: int) -> list[str]:
    """The system resolver (``getaddrinfo`` in a trio worker thread), TCP addresses."""
    infos = await trio.socket.getaddrinfo(name, port, type=trio.socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class DnsCache:
    """Names to addresses, :data:`DNS_TTL` seconds each, at most :data:`DNS_CACHE_NAMES`
    names; ``clock`` gives monotonic seconds, ``lookup`` resolves (tests may inject);
    ``guard`` judges every address returned."""

    def __init__(
        self,
        *,
        ttl: float = DNS_TTL,
        max_names: int = DNS_CACHE_NAMES,
        lookup: Lookup = system_lookup,
        clock: Callable[[], float] = time.monotonic,
        guard: AddressGuard | None = None,
    ) -> None:
        if max_names < 1:
            raise ValueError("a DNS cache holds at least one name")
        self.ttl = ttl
        self.max_names = max_names
        self.lookup = lookup
        self.clock = clock
        self.guard = guard
        self._names: OrderedDict[str, tuple[float, tuple[str, ...]]] = OrderedDict()
        self.lookups = 0  # calls of ``lookup`` (for the benchmarks)

    def __len__(self) -> int:
        return len(self._names)

    def cached(self, name: str) -> tuple[str, ...] | None:
        """``name``'s addresses if cached and fresh, else None (no lookup)."""
        key = name.lower()
        entry = self._names.get(key)
        if entry is None:
            return None
        if self.clock() >= entry[0]:
            del self._names[key]
            return None
        self._names.move_to_end(key)
        return entry[1]

    async def addresses(self, name: str, port: int) -> tuple[str, ...]:
        """``name``'s addresses, first choice first (an address literal as it is), those
        the guard allows; raises OSError when the name does not resolve
        (:class:`AddressRefused` when it resolves only to addresses the guard refuses)."""
        found = await self._resolved(name, port)
        if self.guard is None:
            return found
        allowed = tuple(a for a in found if self.guard.refusal(name, a) is None)
        if not allowed:
            raise AddressRefused(
                f"refused by the address guard: {self.guard.refusal(name, found[0])}"
            )
        return allowed

    async def _resolved(self, name: str, port: int) -> tuple[str, ...]:
        if is_address(name):
            return (name.strip("[]"),)
        found = self.cached(name)
        if found is not None:
            return found
        self.lookups += 1
        addresses = tuple(dict.fromkeys(await self.lookup(name, port)))
        if not addresses:
            raise OSError(f"{name} has no address")
        key = name.lower()
        self._names[key] = (self.clock() + self.ttl, addresses)
        self._names.move_to_end(key)
        while len(self._names) > self.max_names:
            self._names.popitem(last=False)
        return addresses

    async def resolve(self, name: str, port: int) -> str:
        """``name``'s first address (see :meth:`addresses`)."""
        return (await self.addresses(name, port))[0]
