"""Every limit of the portal at its edge, and its address guard."""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from portal_fixtures import browser, portal

from geminibot.cli import main
from geminibot.net.connect import parse_connect_to
from geminibot.net.dns import DnsCache, system_lookup
from geminibot.net.errors import ConnectionFailed
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import ClientBuckets, PortalLimits
from geminibot.portal.pages import HTTPResponse
from geminibot.portal.upstream import Upstream, UpstreamGuard, UpstreamRefused
from geminibot.store.database import Database
from geminibot.why.reads import CheckReads


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("certs")


def test_client_bucket_edge() -> None:
    buckets = ClientBuckets(rate=1.0, burst=3)
    assert [buckets.take("a", 0.0) for _ in range(3)] == [None, None, None]
    assert buckets.take("a", 0.0) == pytest.approx(1.0)
    assert buckets.take("b", 0.0) is None  # per client
    assert buckets.take("a", 1.0) is None  # one token back after a second


def test_client_buckets_are_bounded() -> None:
    buckets = ClientBuckets(rate=1.0, burst=1, max_clients=2)
    for client in ("a", "b", "c"):
        assert buckets.take(client, 0.0) is None
    assert buckets.take("c", 0.0) is not None  # remembered
    assert buckets.take("a", 0.0) is None  # forgotten: a full bucket again


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_upstream"):
        PortalLimits(max_upstream=0)
    with pytest.raises(ValueError, match="rate_per_second"):
        PortalLimits(rate_per_second=0)


def offline_app(limits: PortalLimits) -> PortalApp:
    return PortalApp(Upstream(limits, guard=UpstreamGuard(test_range=True)))


async def test_per_client_rate_limit_edge(loopback_clock: trio.testing.MockClock) -> None:
    app = offline_app(PortalLimits(rate_per_second=1.0, rate_burst=3))
    async with browser(app) as web, browser(app, client="127.0.0.2") as other:
        within = [(await web.get("/robots.txt")).status_code for _ in range(3)]
        over = await web.get("/robots.txt")
        elsewhere = await other.get("/robots.txt")
        await trio.sleep(1.0)
        again = await web.get("/robots.txt")
    assert within == [200, 200, 200]
    assert over.status_code == 429
    assert over.headers["retry-after"] == "1"
    assert elsewhere.status_code == 200
    assert again.status_code == 200


async def test_portal_robots_and_noindex() -> None:
    app = offline_app(PortalLimits())
    async with browser(app) as web:
        robots = await web.get("/robots.txt")
        home = await web.get("/")
        head = await web.head("/")
        delete = await web.delete("/")
    assert robots.text == (
        "# geminibot portal: proxied Gemini content is not for web crawlers.\n"
        "User-agent: *\nDisallow: /\n"
    )
    assert robots.headers["x-robots-tag"] == "noindex, nofollow"
    assert '<meta name="robots" content="noindex,nofollow">' in home.text
    assert '<form method="get" action="/">' in home.text
    assert head.status_code == 200
    assert head.content == b""
    assert delete.status_code == 405


@pytest.mark.parametrize(
    ("given", "status", "location"),
    [
        ("gemini://va-groups.test/a b", 303, "/gemini/va-groups.test/a%20b"),
        ("va-groups.test", 303, "/gemini/va-groups.test/"),
        ("gemini://VA-groups.test:1966/x?q", 303, "/gemini/va-groups.test:1966/x?q"),
        ("https://example.org/", 400, None),
        ("gemini://user@host.test/", 400, None),
    ],
)
async def test_only_gemini_urls(given: str, status: int, location: str | None) -> None:
    async with browser(offline_app(PortalLimits())) as web:
        r = await web.get("/", params={"url": given})
    assert r.status_code == status
    assert r.headers.get("location") == location


async def test_loopback_needs_test_range() -> None:
    guard = UpstreamGuard([parse_connect_to("*.test:1965:127.0.0.1:1965")], test_range=False)
    with pytest.raises(UpstreamRefused, match="--test-range"):
        await guard.address("a.test", 1965)
    with pytest.raises(UpstreamRefused, match="not a public address"):
        await guard.address("localhost", 1965)
    private = UpstreamGuard([parse_connect_to("*.test:1965:10.1.2.3:1965")])
    with pytest.raises(UpstreamRefused, match="not a public address"):
        await private.address("a.test", 1965)


async def test_test_range_reaches_loopback_only() -> None:
    guard = UpstreamGuard([parse_connect_to("far.test:1965:192.0.2.1:1965")], test_range=True)
    with pytest.raises(UpstreamRefused, match="not on this machine"):
        await guard.address("far.test", 1965)  # refused before any connection
    near = UpstreamGuard([parse_connect_to("*.test:1965:127.0.0.1:4000")], test_range=True)
    assert await near.address("near.test", 1965) == ("127.0.0.1", 4000)


async def test_names_resolved_once_through_the_dns_cache() -> None:
    """The guard resolves through one DnsCache (localhost via /etc/hosts), which the
    portal's Gemini clients share; a name that does not resolve is one clear error."""
    cache = DnsCache(lookup=system_lookup)
    guard = UpstreamGuard(test_range=True, dns=cache)
    first = await guard.address("localhost", 1965)
    assert ipaddress.ip_address(first[0]).is_loopback and first[1] == 1965
    assert await guard.address("localhost", 1965) == first
    assert cache.lookups == 1
    upstream = Upstream(PortalLimits(), guard=guard)
    assert upstream.page_client.dns is cache and upstream.policy_client.dns is cache

    async def no_such_name(name: str, port: int) -> list[str]:
        raise OSError(f"{name}: Name or service not known")

    lost = UpstreamGuard(test_range=True, dns=DnsCache(lookup=no_such_name))
    with pytest.raises(ConnectionFailed, match=r"cannot resolve gone\.test"):
        await lost.address("gone.test", 1965)


async def test_the_portal_never_fetches_from_itself() -> None:
    guard = UpstreamGuard(
        [parse_connect_to("*.test:1965:127.0.0.1:8965")], test_range=True, own={("127.0.0.1", 8965)}
    )
    with pytest.raises(UpstreamRefused, match="this portal itself"):
        await guard.address("me.test", 1965)
    wildcard = UpstreamGuard(
        [parse_connect_to("*.test:1965:127.0.0.1:8965")], test_range=True, own={("0.0.0.0", 8965)}
    )
    with pytest.raises(UpstreamRefused, match="this portal itself"):
        await wildcard.address("me.test", 1965)


async def test_loopback_page_refused_without_test_range(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir, test_range=False) as (served, web):
        r = await web.get("/gemini/va-groups.test/")
    assert r.status_code == 403
    assert "does not connect to <code>va-groups.test</code>" in r.text
    assert "127.0.0.1" not in r.text  # the address a name resolves to is not told
    assert served.hits == []


@pytest.mark.parametrize(("slots", "status"), [(1, 503), (2, 200)])
async def test_max_concurrent_upstream_edge(
    tmp_path: Path, cert_dir: Path, loopback_clock: trio.testing.MockClock, slots: int, status: int
) -> None:
    limits = PortalLimits(
        rate_per_second=1e6, rate_burst=1000, min_host_delay=0.0, max_upstream=slots
    )
    async with portal(tmp_path / "c", cert_dir, limits=limits) as (served, web):
        app: PortalApp = web._transport.app  # type: ignore[attr-defined]
        async with app.upstream.slots.hold("elsewhere", "192.0.2.1", trio.current_time()):
            r = await web.get("/gemini/va-groups.test/")  # one fetch in flight meanwhile
    assert r.status_code == status
    if status == 503:
        assert "upstream slots are busy" in r.text
        assert served.hits == []


@pytest.mark.parametrize(("max_wait", "status"), [(5.0, 200), (4.9, 503)])
async def test_host_pacing_and_max_wait_edge(
    tmp_path: Path,
    cert_dir: Path,
    loopback_clock: trio.testing.MockClock,
    max_wait: float,
    status: int,
) -> None:
    limits = PortalLimits(
        rate_per_second=1e6, rate_burst=1000, min_host_delay=5.0, max_wait=max_wait
    )
    async with portal(tmp_path / "c", cert_dir, limits=limits) as (served, web):
        first = await web.get("/gemini/wildcards.test/")
        second = await web.get("/gemini/wildcards.test/README.gmi")
    # robots.txt, then 5 s later the page, then 5 s later the next page
    assert (first.status_code, second.status_code) == (status, status)
    times = [h.at for h in served.hits]
    assert all(b - a >= 5.0 for a, b in itertools.pairwise(times))
    if status == 503:
        assert int(second.headers["retry-after"]) == 5


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["portal", "--capsule", "https://example.org/"]) == 2
    assert "expected a gemini:// URL" in capsys.readouterr().err
    assert main(["portal", "--connect-to", "nonsense"]) == 2
    assert "HOST:PORT:ADDR:PORT2" in capsys.readouterr().err
    assert main(["portal", "--max-upstream", "0"]) == 2
    assert "max_upstream" in capsys.readouterr().err


def open_limits(**changes: float) -> PortalLimits:
    base = {"rate_per_second": 1e6, "rate_burst": 1000, "min_host_delay": 0.0}
    return PortalLimits(**{**base, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(("hosts", "robots_fetches"), [(2, 1), (1, 2)])
async def test_policy_cache_hosts_edge(
    tmp_path: Path, cert_dir: Path, hosts: int, robots_fetches: int
) -> None:
    limits = open_limits(policy_cache_hosts=hosts)
    async with portal(tmp_path / "c", cert_dir, limits=limits) as (served, web):
        await web.get("/gemini/va-groups.test/")
        await web.get("/gemini/wildcards.test/")
        await web.get("/gemini/va-groups.test/public/a.gmi")
    assert served.paths("va-groups.test").count("/robots.txt") == robots_fetches


async def test_page_cache_bytes_edge(tmp_path: Path, cert_dir: Path) -> None:
    """The cache counts the page as rendered (HTML), not the capsule's body."""
    async with portal(tmp_path / "c", cert_dir) as (_, web):
        size = len((await web.get("/gemini/va-groups.test/public/a.gmi")).content)
    for budget, fetches in ((size, 1), (size - 1, 2)):
        async with portal(
            tmp_path / f"c{budget}", cert_dir, limits=open_limits(page_cache_bytes=budget)
        ) as (served, web):
            for _ in range(2):
                await web.get("/gemini/va-groups.test/public/a.gmi")
        assert served.paths("va-groups.test").count("/public/a.gmi") == fetches


async def test_a_large_robots_txt_is_read_as_the_core_reads_it(
    tmp_path: Path, cert_dir: Path
) -> None:
    async with portal(tmp_path / "c", cert_dir) as (_, web):
        home = await web.get("/gemini/robots-large.test/")
        private = await web.get("/gemini/robots-large.test/private/x.gmi")
    assert home.status_code == 200  # 600 KiB: read in part, never "unreachable"
    assert private.status_code == 403
    assert "Disallow: /private/" in private.text


@pytest.mark.parametrize("retries", [0, 2])
async def test_slow_down_retries_edge(
    tmp_path: Path, cert_dir: Path, loopback_clock: trio.testing.MockClock, retries: int
) -> None:
    """robots-44.test always answers "44 60": sat out ``retries`` times, then a 503."""
    limits = open_limits(max_wait=1000.0, max_slow_down_retries=retries)
    async with portal(tmp_path / "c", cert_dir, limits=limits) as (served, web):
        r = await web.get("/gemini/robots-44.test/a.gmi")
    assert r.status_code == 503
    times = [h.at for h in served.hits]
    assert len(times) == retries + 1
    assert all(b - a >= 60 for a, b in itertools.pairwise(times))


async def test_an_ipv6_client_is_counted_by_its_64(
    loopback_clock: trio.testing.MockClock,
) -> None:
    app = offline_app(PortalLimits(rate_per_second=1.0, rate_burst=3))
    async with (
        browser(app, client="2001:db8::1") as one,
        browser(app, client="2001:db8::2") as same_64,
        browser(app, client="2001:db8:0:1::1") as other_64,
    ):
        within = [(await one.get("/robots.txt")).status_code for _ in range(2)]
        within.append((await same_64.get("/robots.txt")).status_code)
        over = await same_64.get("/robots.txt")
        elsewhere = await other_64.get("/robots.txt")
    assert within == [200, 200, 200]
    assert over.status_code == 429
    assert elsewhere.status_code == 200


async def test_send_chunk_edge() -> None:
    """An answer goes to the server in slices of send_chunk_bytes, the last one marked."""
    app = offline_app(PortalLimits(send_chunk_bytes=4))
    for size, pieces in ((8, [4, 4]), (9, [4, 4, 1]), (0, [0])):
        sent: list[dict[str, Any]] = []

        async def send(message: Any, into: list[dict[str, Any]] = sent) -> None:
            into.append(dict(message))

        await app._send(send, HTTPResponse(200, b"x" * size), "GET")
        bodies = [m for m in sent if m["type"] == "http.response.body"]
        assert [len(m["body"]) for m in bodies] == pieces
        assert [m.get("more_body", False) for m in bodies] == [True] * (len(pieces) - 1) + [False]


async def test_a_fault_of_the_portal_is_a_page_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crawl database closed under /check: the portal's own fault, still a page."""
    conn = sqlite3.connect(tmp_path / "crawl.db", check_same_thread=False)
    conn.close()
    db = Database("crawl.db", conn, path=tmp_path / "crawl.db")
    app = offline_app(PortalLimits())
    app.checks = CheckReads(lambda: contextlib.nullcontext(db))
    async with browser(app) as web:
        r = await web.get("/check?q=gemini://a.test/")
    assert r.status_code == 500
    assert r.headers["x-robots-tag"] == "noindex, nofollow"
    assert "Portal error" in r.text
    err = capsys.readouterr().err
    assert err.startswith("geminibot portal: GET /check: internal error: ProgrammingError")
    assert "Traceback" not in err
    assert len(err.splitlines()) <= 2  # one message, wrapped at 80 columns
