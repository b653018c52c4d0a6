"""The DNS cache: names resolved once per DNS_TTL, at most DNS_CACHE_NAMES kept, each at
its edge; the system resolver on localhost; the crawl's address lookup sharing it."""

from __future__ import annotations

import pytest

from geminibot.crawl.build import lookup_address
from geminibot.net.connect import Resolver
from geminibot.net.dns import DNS_CACHE_NAMES, DNS_TTL, DnsCache, system_lookup


class Names:
    """A resolver of made-up names (name ``hK.test`` is at ``10.0.0.K``) that counts."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.moved = 0

    async def __call__(self, name: str, port: int) -> list[str]:
        self.asked.append(name)
        if not name.endswith(".test"):
            raise OSError(f"{name}: Name or service not known")
        k = int(name.split(".", maxsplit=1)[0][1:])
        return [f"10.{self.moved}.0.{k}", f"10.{self.moved}.0.{k}"]


def test_named_limits() -> None:
    assert DNS_TTL == 3600.0
    assert DNS_CACHE_NAMES == 20_000
    cache = DnsCache()
    assert (cache.ttl, cache.max_names) == (DNS_TTL, DNS_CACHE_NAMES)


async def test_ttl_edge() -> None:
    now = [100.0]
    names = Names()
    cache = DnsCache(lookup=names, clock=lambda: now[0])
    assert await cache.resolve("h1.test", 1965) == "10.0.0.1"
    names.moved = 1
    now[0] = 100.0 + DNS_TTL - 0.001  # just before the TTL: still the cached address
    assert await cache.resolve("H1.test", 1965) == "10.0.0.1"
    assert names.asked == ["h1.test"]
    now[0] = 100.0 + DNS_TTL  # at the TTL: resolved again
    assert await cache.resolve("h1.test", 1965) == "10.1.0.1"
    assert names.asked == ["h1.test", "h1.test"]
    assert await cache.addresses("h1.test", 1965) == ("10.1.0.1",)  # duplicates dropped


async def test_names_bound_edge_forgets_least_recently_used() -> None:
    names = Names()
    cache = DnsCache(lookup=names, max_names=3)
    for k in (1, 2, 3):
        await cache.resolve(f"h{k}.test", 1965)
    assert len(cache) == 3
    await cache.resolve("h1.test", 1965)  # h1 used again: h2 is now the oldest
    await cache.resolve("h4.test", 1965)  # one more than the bound
    assert len(cache) == 3
    assert cache.cached("h2.test") is None
    assert cache.cached("h1.test") == ("10.0.0.1",)
    with pytest.raises(ValueError):
        DnsCache(max_names=0)


async def test_failures_not_cached_and_literals_not_looked_up() -> None:
    names = Names()
    cache = DnsCache(lookup=names)
    for _ in range(2):
        with pytest.raises(OSError):
            await cache.resolve("nowhere.invalid", 1965)
    assert names.asked == ["nowhere.invalid", "nowhere.invalid"]
    assert await cache.resolve("127.0.1.7", 1965) == "127.0.1.7"
    assert await cache.resolve("[::1]", 1965) == "::1"
    assert len(names.asked) == 2 and len(cache) == 0


async def test_system_resolver_localhost() -> None:
    cache = DnsCache(lookup=system_lookup)
    addresses = await cache.addresses("localhost", 1965)
    assert set(addresses) & {"127.0.0.1", "::1"}
    assert cache.lookups == 1
    await cache.addresses("localhost", 1965)
    assert cache.lookups == 1


async def test_crawl_address_lookup_uses_the_shared_cache() -> None:
    names = Names()
    cache = DnsCache(lookup=names)
    lookup = lookup_address(Resolver(()), cache)
    assert await lookup("h5.test") == "10.0.0.5 port 1965"
    assert await lookup("h5.test") == "10.0.0.5 port 1965"
    assert names.asked == ["h5.test"]
    assert cache.cached("h5.test") == ("10.0.0.5",)
    assert await lookup("gone.invalid") == "gone.invalid port 1965"  # its own address
