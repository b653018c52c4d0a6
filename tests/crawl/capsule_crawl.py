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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from capsule_server.files import load_capsules
from capsule_server.log import AccessRecord
from capsule_server.server import CapsuleServer, Limits
from geminibot.crawl.crawler import Crawler, CrawlOptions, Progress
from geminibot.crawl.fetcher import Resolver, gemini_fetch
from geminibot.gemini.client import GeminiClient
from geminibot.index import connect

CAPSULES = Path(__file__).resolve().parents[2] / "capsules"
POLICY_FILES = ("/robots.txt", "/robots2.txt", "/agents.txt")


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


@asynccontextmanager
async def serving(
    hosts: list[str], root: Path, cert_dir: Path, limits: Limits | None = None
) -> AsyncIterator[tuple[CapsuleServer, dict[str, list[Hit]]]]:
    """Serve only ``hosts`` (copied by symlink into ``root``); yields (server, hits by host)."""
    root.mkdir(parents=True, exist_ok=True)
    for host in hosts:
        (root / host).symlink_to(CAPSULES / host, target_is_directory=True)
    hits: dict[str, list[Hit]] = {}

    def log(r: AccessRecord) -> None:
        if r.host is not None and r.path is not None:
            hit = Hit(trio.current_time(), r.path, r.status, r.meta or "", r.limited)
            hits.setdefault(r.host, []).append(hit)

    server = CapsuleServer(load_capsules(root), cert_dir, limits, log, clock=trio.current_time)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    server.port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, listeners)
        try:
            yield server, hits
        finally:
            server.shutdown()


async def crawl_host(
    port: int,
    host: str,
    db: Path,
    options: CrawlOptions,
    wall_clock: Callable[[], float] | None = None,
) -> tuple[Progress, sqlite3.Connection]:
    resolver = Resolver([("*", 1965, "127.0.0.1", port)], loopback_only=True)
    fetch = gemini_fetch(GeminiClient(connect_to=resolver))
    conn = connect(db)
    kwargs = {} if wall_clock is None else {"wall_clock": wall_clock}
    crawler = Crawler(conn, fetch, options, **kwargs)  # type: ignore[arg-type]
    crawler.seed([f"gemini://{host}/"])
    return await crawler.run(), conn


def check_fetched(hits: list[Hit], table: dict[str, Any], honeypots: list[str]) -> None:
    """The crawl's requests against one ``[crawl.ROLE]`` table (see capsules/README.md)."""
    paths = [h.path for h in hits]
    assert paths, "nothing was fetched"
    assert paths[0] == "/robots.txt", "robots.txt must come first"
    for hit in hits:
        assert not any(hit.path.startswith(h) for h in honeypots), f"honeypot {hit.path}"
    # robots2.txt and agents.txt count only where the table names them (capsules/README.md)
    named = set(table.get("fetched", [])) | set(table.get("must_fetch", []))
    got = set(paths) - {p for p in POLICY_FILES if p not in named}
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
