"""The one way to build a crawler: :func:`build_crawler`, from the crawl's options, on a
store, with every part made here and handed to :class:`~geminibot.crawl.crawler.Crawler`
(which builds nothing and is given nothing after it is made).

The crawl fetches with the Gemini and web clients its :class:`Network` describes (one DNS
cache shared by both and by the lookup that paces the hosts of one server as one; the
Gemini client's certificates pinned in the store), or with a given ``fetch`` (a test's
site, a scripted answer).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from geminibot import __version__
from geminibot.crawl.adapters import Fetch
from geminibot.crawl.clock import Clock
from geminibot.crawl.crawler import Crawler, CrawlParts
from geminibot.crawl.downloader import Downloader
from geminibot.crawl.policy_files import PolicyFiles, researcher_security_txt
from geminibot.crawl.progress import Progress
from geminibot.crawl.scheduler import Scheduler
from geminibot.crawl.scope import CrawlScope
from geminibot.crawl.settings import ROLE_CATEGORIES, CrawlOptions, new_lease
from geminibot.crawl.tlsfacts import TLSRecorder
from geminibot.crawl.visit import Archive, Visitor
from geminibot.http.urls import DEFAULT_INFO_URL
from geminibot.net.addresses import address_key
from geminibot.net.connect import Resolver, is_loopback
from geminibot.net.guard import IPNetwork
from geminibot.policy.site_policy import Bot
from geminibot.store.crawlstore import CrawlStore
from geminibot.urls import host_url, parse_url

if TYPE_CHECKING:
    from geminibot.net.dns import DnsCache

#: Seconds a host name's lookup may take (for pacing by address).
RESOLVE_TIMEOUT = 10.0


@dataclass(frozen=True)
class Network:
    """How a crawl reaches hosts: where to connect (``--connect-to``, loopback only with
    ``--test-range``), the private networks it may reach (``--allow-address``), and the
    contact URL its web user agent names (``--contact``)."""

    resolver: Resolver = field(default_factory=lambda: Resolver(()))
    allow_address: tuple[IPNetwork, ...] = ()
    contact: str = DEFAULT_INFO_URL


def build_crawler(
    store: CrawlStore,
    options: CrawlOptions,
    clock: Clock,
    *,
    fetch: Fetch | None = None,
    network: Network | None = None,
    archive: Archive | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    address_of: Callable[[str], Awaitable[str]] | None = None,
    lease: str | None = None,
    poll_due: float | None = None,
) -> Crawler:
    """The crawler ``options`` ask for on ``store``, on the crawl's ``clock``: fetching
    with ``fetch`` when given, else with the clients of ``network`` (which the crawl opens
    and closes); its hosts paced by server address (``address_of``; by default, with the
    clients, the address ``network`` connects to; with a given fetch, the host itself);
    ``poll_due``: a continuous crawl's seconds between two looks for URLs come due during
    a run (:attr:`Crawler.poll_due`)."""
    network = network if network is not None else Network()
    clients = None
    if fetch is None:
        fetch, clients, dns = _clients(store, options, clock, network)
        address_of = address_of or lookup_address(network.resolver, dns)
    lease = lease if lease is not None else new_lease()
    progress = Progress(started=clock.now())
    scheduler = Scheduler(clock, test_range=options.test_range, min_delay=options.min_delay)
    scope = CrawlScope(options.allow_hosts, options.exclude, options.follow)
    role = options.role
    bot = Bot(options.agent, (role,), ROLE_CATEGORIES.get(role), options.strict, __version__)
    tls = TLSRecorder.trusting(store, options.trust_ca)
    downloader = Downloader(fetch, scheduler, store, clock, bot, lease, progress, tls)

    def slowed() -> None:
        progress.slow_downs += 1

    parts = CrawlParts(
        lease=lease,
        progress=progress,
        scheduler=scheduler,
        scope=scope,
        downloader=downloader,
        visitor=Visitor(downloader, store, scope, bot, role, progress, archive),
        policy_files=PolicyFiles(
            store,
            clock.now,
            downloader.policy_request,
            slowed,
            researcher_security_txt(bot, clock.now) if role == "researcher" else None,
        ),
    )
    return Crawler(
        store,
        options,
        parts,
        clock=clock,
        on_progress=on_progress,
        address_of=address_of,
        clients=clients,
        poll_due=poll_due,
    )


def _clients(
    store: CrawlStore, options: CrawlOptions, clock: Clock, network: Network
) -> tuple[Fetch, contextlib.AbstractAsyncContextManager[object], DnsCache]:
    """The fetch of both protocols, what opens and closes the clients, their DNS cache."""
    from geminibot.crawl.fetcher import CRAWL_LIMITS, ProtocolFetcher, gemini_fetch
    from geminibot.gemini.client import GeminiClient
    from geminibot.http.client import WebClient, user_agent
    from geminibot.net.dns import DnsCache
    from geminibot.net.guard import AddressGuard
    from geminibot.store.crawlstore import StoreKnownHosts

    # Every address connected to (links, redirects, policy files) passes the guard.
    guard = AddressGuard(
        loopback_only=options.test_range,
        allow=network.allow_address,
        advice="; --allow-address CIDR reaches such a network",
    )
    dns = DnsCache(guard=guard)
    web = WebClient(
        user_agent=user_agent(options.agent, info_url=network.contact),
        connect_to=network.resolver,
        limits=CRAWL_LIMITS,
        dns=dns,
    )
    # Certificates pinned in the crawl's database on first use; a changed one is refused.
    gemini = GeminiClient(
        connect_to=network.resolver,
        limits=CRAWL_LIMITS,
        known_hosts=StoreKnownHosts(store, clock.now),
        strict_tofu=True,
        dns=dns,
    )
    return ProtocolFetcher(gemini=gemini_fetch(gemini), web=web), web, dns


def lookup_address(
    resolver: Resolver, dns: DnsCache | None = None
) -> Callable[[str], Awaitable[str]]:
    """For the crawler: where a host key's requests go, ``address port N`` (the
    --connect-to rule applied, the name resolved through ``dns``, the cache the Gemini
    client shares, bounded by :data:`RESOLVE_TIMEOUT`), so that hosts on one server are
    paced as one; an IPv6 address as its /64, as the portal and the servers count
    clients (:func:`geminibot.net.addresses.address_key`: one machine or home usually
    holds a whole /64). A name that does not resolve is its own address (its requests
    will fail on their own)."""
    import trio

    from geminibot.net.dns import DnsCache

    cache = dns if dns is not None else DnsCache()

    async def lookup(host: str) -> str:
        url = parse_url(host_url(host))
        address, port = resolver.address(url.host, url.port)
        if resolver.loopback_only and not is_loopback(address):
            return f"{address_key(address)} port {port}"  # refused anyway: no lookup
        with trio.move_on_after(RESOLVE_TIMEOUT):
            with contextlib.suppress(OSError):
                address = await cache.resolve(address, port)
        return f"{address_key(address)} port {port}"

    return lookup
