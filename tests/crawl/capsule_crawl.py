"""Helpers for end-to-end crawls of the test capsules on loopback (capsule_server in-process).

The server and the crawler share trio's clock, so a test under a mock clock sits out
policy delays and 44 waits without sleeping, and the server's rate limiter sees the same
time as the crawler.
"""

from __future__ import annotations

import itertools
import sqlite3
import tomllib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio
from capsule_fixtures import policies_of, serving_on_trio_time
from crawlers import sqlite_crawler

from capsule_server.judge import ClientReport, build_report
from capsule_server.server import CapsuleServer
from geminibot.crawl.fetcher import gemini_fetch
from geminibot.crawl.progress import Progress
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.server import ServerLimits
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.store.db import connect

CAPSULES = Path(__file__).resolve().parents[2] / "capsules"
POLICY_FILES = ("/robots.txt", "/robots2.txt", "/agents.txt")
#: Read by a researcher's crawl where the policy allows it (docs/crawl.md): like robots2.txt
#: and agents.txt, a file a compliant crawl may or may not request.
SECURITY_TXT = "/.well-known/security.txt"
#: Where the access log's clock starts: the crawls' night-time wall clock, since the report
#: judges Visit-time on the log's own times.
EPOCH = datetime(2026, 11, 23, 23, 0, tzinfo=UTC).timestamp()


def expectation(host: str) -> dict[str, Any]:
    with (CAPSULES / host / "expect.toml").open("rb") as fh:
        return tomllib.load(fh)


def crawl_cases(roles: tuple[str, ...]) -> list[tuple[str, str]]:
    cases = []
    for folder in sorted(CAPSULES.glob("*.test")):
        crawl = expectation(folder.name).get("crawl", {})
        cases.extend((folder.name, role) for role in roles if role in crawl)
    return cases


@dataclass
class Hit:
    at: float  # trio time the request was answered
    path: str
    status: int | None
    meta: str
    limited: str | None


@dataclass
class Served:
    server: CapsuleServer
    root: Path
    hits: dict[str, list[Hit]] = field(default_factory=dict)
    records: list[AccessRecord] = field(default_factory=list)

    @property
    def port(self) -> int:
        assert self.server.port is not None
        return self.server.port

    def report(self) -> ClientReport:
        """The server's compliance report on the one client (the crawler)."""
        (report,) = build_report(self.records, policies_of(self.root))
        return report


@asynccontextmanager
async def serving(
    hosts: list[str],
    root: Path,
    cert_dir: Path,
    limits: ServerLimits | None = None,
    source: Path = CAPSULES,
) -> AsyncIterator[Served]:
    """Serve only ``hosts`` of ``source`` (linked into ``root``), logging on trio's clock."""
    root.mkdir(parents=True, exist_ok=True)
    for host in hosts:
        (root / host).symlink_to(source / host, target_is_directory=True)
    served: Served

    def log(r: AccessRecord) -> None:
        served.records.append(r)
        if r.host is not None and r.path is not None:
            hit = Hit(trio.current_time(), r.path, r.status, r.meta or "", r.limited)
            served.hits.setdefault(r.host, []).append(hit)

    async with serving_on_trio_time(root, cert_dir, limits, log, EPOCH) as server:
        served = Served(server, root)
        yield served


async def crawl_host(
    port: int,
    host: str,
    db: Path,
    options: CrawlOptions,
    wall_clock: Callable[[], float] | None = None,
) -> tuple[Progress, sqlite3.Connection]:
    resolver = Resolver([ConnectRule("*", 1965, "127.0.0.1", port)], loopback_only=True)
    fetch = gemini_fetch(GeminiClient(connect_to=resolver))
    conn = connect(db)
    kwargs = {} if wall_clock is None else {"wall_clock": wall_clock}
    crawler = sqlite_crawler(conn, fetch, options, **kwargs)  # type: ignore[arg-type]
    crawler.seed([f"gemini://{host}/"])
    return await crawler.run(), conn


def check_fetched(hits: list[Hit], expect: dict[str, Any], role: str) -> None:
    """The crawl's requests against the ``[crawl.ROLE]`` table (see capsules/README.md)."""
    table = expect["crawl"][role]
    honeypots = expect["capsule"].get("honeypots", [])
    # the policy files a compliant reader may fetch: robots2.txt's chain too
    policy_files = {*POLICY_FILES, SECURITY_TXT, *expect.get("robots2", {}).get("chain", [])}
    paths = [h.path for h in hits]
    assert paths, "nothing was fetched"
    assert paths[0] == "/robots.txt", "robots.txt must come first"
    for hit in hits:
        assert not any(hit.path.startswith(h) for h in honeypots), f"honeypot {hit.path}"
    # robots2.txt and agents.txt count only where the table names them (capsules/README.md)
    named = set(table.get("fetched", [])) | set(table.get("must_fetch", []))
    got = set(paths) - {p for p in policy_files if p not in named}
    if "fetched" in table:
        assert got == set(table["fetched"]), sorted(got ^ set(table["fetched"]))
    else:
        assert set(table["must_fetch"]) <= got
        forbidden = tuple(table["must_not_fetch"])
        assert not any(p.startswith(forbidden) for p in got if forbidden)
        assert len(got) <= table["max_pages"]


def check_slow_downs_obeyed(hits: list[Hit]) -> int:
    """After each 44, the next request came no sooner than its meta asked; returns the
    number of 44s seen."""
    seen = 0
    for hit, nxt in itertools.pairwise(hits):
        if hit.status == 44:
            seen += 1
            wait = float(hit.meta) if hit.meta.strip().isdigit() else 0.0
            assert nxt.at - hit.at >= wait, (
                f"{nxt.path} {nxt.at - hit.at:.2f} s after 44 {hit.meta}"
            )
    return seen
