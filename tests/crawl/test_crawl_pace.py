"""A server's pace learned from its answers, end to end on trio's mock clock: a policy
file's 44 waited out and the capsule crawled, policy files taking their address's slot,
and several capsules on one real capsule-server (its default rate limit) paced as one
polite client while another address runs in parallel. Counts of requests per window of
the server's own (mock) time, never timed assertions."""

from __future__ import annotations

import itertools
from bisect import bisect_left
from pathlib import Path

import trio
import trio.testing
from capsule_crawl import Hit, check_slow_downs_obeyed, serving
from crawl_fakes import FakeSite, gmi
from crawlers import sqlite_crawler
from served_capsules import generate

from geminibot.crawl.adapters import FetchResult
from geminibot.crawl.build import lookup_address
from geminibot.crawl.fetcher import gemini_fetch
from geminibot.crawl.politeness import MAX_RATE
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.server import ServerLimits
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.net.dns import DnsCache
from geminibot.store.db import connect


def mock_wall_clock() -> float:
    return 1.7e9 + trio.current_time()


async def same_address(host: str) -> str:
    return "127.0.0.1 port 1965"


def capsule(host: str) -> dict[str, FetchResult | list[FetchResult]]:
    home = gmi(f"# {host}\n=> /a.gmi A\n=> /b.gmi B\n")
    return {
        f"gemini://{host}/": home,
        f"gemini://{host}/a.gmi": gmi("# A\n"),
        f"gemini://{host}/b.gmi": gmi("# B\n"),
    }


async def test_a_policy_file_s_44_is_waited_out_and_the_capsule_crawled(
    tmp_path: Path, autojump_clock: object
) -> None:
    """robots.txt answers 44 five times and agents.txt four (more than the three a
    policy file was once allowed before the capsule was skipped for the run): each is
    waited out, the file asked again, and every page crawled; the hosts share one
    address, and no two requests to it, policy files included, were ever in flight at
    once."""
    pages: dict[str, FetchResult | list[FetchResult]] = {}
    for host in ("a.test", "b.test", "c.test"):
        pages.update(capsule(host))
    pages["gemini://a.test/robots.txt"] = [FetchResult(44, "3")] * 5 + [
        FetchResult(20, "text/plain", b"User-agent: *\nDisallow: /private/\n")
    ]
    pages["gemini://b.test/agents.txt"] = [FetchResult(44, "")] * 4 + [FetchResult(51, "none")]
    site = FakeSite(pages, latency=0.01)
    conn = connect(tmp_path / "c.db")
    crawler = sqlite_crawler(
        conn,
        site.fetch,
        CrawlOptions(test_range=True),
        wall_clock=mock_wall_clock,
        address_of=same_address,
    )
    crawler.seed([f"gemini://{h}/" for h in ("a.test", "b.test", "c.test")])
    progress = await crawler.run()
    assert progress.hosts_skipped == {}
    assert progress.pages == 9
    assert progress.slow_downs == 9
    robots = [t for t, url in site.log if url == "gemini://a.test/robots.txt"]
    assert len(robots) == 6
    assert all(b - a >= 3.0 for a, b in itertools.pairwise(robots))  # each 44 sat out
    assert len([u for u in site.urls() if u == "gemini://b.test/agents.txt"]) == 5
    assert site.max_in_flight == 1  # one address: one request at a time, policy files too


#: Where each capsule's name resolves: a.test and b.test on one IPv6 /64, c.test another.
SIXES = {"a.test": "2001:db8:1:2::1", "b.test": "2001:db8:1:2:ffff::9", "c.test": "2001:db8:1:3::1"}


async def six_lookup(name: str, port: int) -> list[str]:
    return [SIXES[name]]


async def test_capsules_on_one_ipv6_slash_64_are_paced_as_one_address(
    tmp_path: Path, autojump_clock: object
) -> None:
    """Two capsules on two addresses of one IPv6 /64 (one machine or home, as the
    portal and the servers count clients) are paced as one address: one request at a
    time between them. Another /64 is another address."""
    lookup = lookup_address(Resolver(()), DnsCache(lookup=six_lookup))
    assert await lookup("a.test") == await lookup("b.test") == "2001:db8:1:2::/64 port 1965"
    assert await lookup("c.test") == "2001:db8:1:3::/64 port 1965"
    site = FakeSite({**capsule("a.test"), **capsule("b.test")}, latency=0.5)
    crawler = sqlite_crawler(
        connect(tmp_path / "c.db"),
        site.fetch,
        CrawlOptions(test_range=True),
        wall_clock=mock_wall_clock,
        address_of=lookup,
    )
    crawler.seed(["gemini://a.test/", "gemini://b.test/"])
    progress = await crawler.run()
    assert progress.pages == 6
    assert site.max_in_flight == 1


def generated_capsules(root: Path, prefix: str, hosts: int, pages: int) -> list[str]:
    """``hosts`` generated capsules named ``PREFIXhostNN.test``; their seeds."""
    generate(root / "gen", hosts, pages)
    seeds = []
    for folder in sorted((root / "gen").iterdir()):
        name = f"{prefix}{folder.name}"
        for page in folder.glob("*.gmi"):  # no page a copy of another capsule's
            page.write_text(page.read_text() + f"\n{name}\n")
        folder.rename(root / name)
        seeds.append(f"gemini://{name}/")
    (root / "gen").rmdir()
    return seeds


def most_in_window(hits: list[Hit], window: float) -> int:
    times = sorted(h.at for h in hits)
    return max((bisect_left(times, t + window) - i for i, t in enumerate(times)), default=0)


async def test_capsules_on_one_server_are_paced_as_one_polite_client(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    """Four capsules on each of two capsule-servers with their default rate limit (10/s,
    burst 60), crawled with default politeness: on each server at most MAX_RATE requests
    a second in any 10 s window and no 44 at all, every page fetched; the two servers
    (two addresses) are crawled side by side, not one after the other."""
    sources = {}
    for prefix in ("a", "b"):
        sources[prefix] = tmp_path / f"src-{prefix}"
        sources[prefix].mkdir()
    seeds = {p: generated_capsules(src, p, 4, 24) for p, src in sources.items()}
    limits = ServerLimits()
    async with (
        serving(
            [s.split("/")[2] for s in seeds["a"]],
            tmp_path / "a",
            tmp_path / "certs",
            limits,
            sources["a"],
        ) as a,
        serving(
            [s.split("/")[2] for s in seeds["b"]],
            tmp_path / "b",
            tmp_path / "certs",
            limits,
            sources["b"],
        ) as b,
    ):
        rules = [
            ConnectRule("a*.test", 1965, "127.0.0.1", a.port),
            ConnectRule("b*.test", 1965, "127.0.0.1", b.port),
        ]
        resolver = Resolver(rules, loopback_only=True)
        conn = connect(tmp_path / "c.db")
        crawler = sqlite_crawler(
            conn,
            gemini_fetch(GeminiClient(connect_to=resolver)),
            CrawlOptions(),
            wall_clock=mock_wall_clock,
            address_of=lookup_address(resolver),
        )
        crawler.seed(seeds["a"] + seeds["b"])
        progress = await crawler.run()
    assert progress.hosts_skipped == {}
    assert progress.queued == 0
    assert progress.pages == 2 * 4 * 6  # every capsule's home page and its five pages
    spans = []
    for served in (a, b):
        hits = [h for host_hits in served.hits.values() for h in host_hits]
        assert hits and not [h for h in hits if h.status == 44]
        assert most_in_window(hits, 10.0) <= 10 * MAX_RATE
        assert check_slow_downs_obeyed(hits) == 0
        times = sorted(h.at for h in hits)
        spans.append((times[0], times[-1]))
    (a_first, a_last), (b_first, b_last) = spans
    overlap = min(a_last, b_last) - max(a_first, b_first)
    assert overlap >= 0.9 * min(a_last - a_first, b_last - b_first)
