"""Three bots judged through the real server, its log and ``capsule-server report``.

geminibot's crawler (as indexer, archiver, researcher) is compliant everywhere; a naive
crawler that never reads a policy fails where expected; a rude bot that breaks each rule
once has each breach reported once, with its capsule, file and line. Time is trio's mock
clock, shared by the server (its rate limiter and the log's times) and the bots.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from capsule_fixtures import serving_on_trio_time
from crawlers import sqlite_crawler

from capsule_server.cli import main
from capsule_server.files import load_capsules
from capsule_server.server import CapsuleServer
from capsule_server.testing import raw_request
from geminibot.crawl.fetcher import gemini_fetch
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.accesslog import JsonLinesLog
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.gemtext import resolve_link
from geminibot.gemini.server import SMALL_FILE, ServerLimits
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.store.db import connect
from geminibot.store.traps import FrontierLimits

pytestmark = pytest.mark.usefixtures("bundled_policies_read_once")

FAST = ServerLimits(rate_burst=100_000, rate_per_second=100_000.0)
NIGHT = datetime(2026, 11, 23, 23, 0, tzinfo=UTC).timestamp()  # inside robots-v2's window
NOON = datetime(2026, 11, 23, 12, 0, tzinfo=UTC).timestamp()  # outside it
#: URLs per host the crawler may queue: a low bound keeps the test quick, and only the
#: endless maze reaches it (each other capsule is crawled in fewer than 20 requests).
MAZE_BOUND = 40
#: Pages per capsule the naive crawler requests.
NAIVE_PAGES = 12


@dataclass(frozen=True)
class Logged:
    """The bundled capsules served with an access log, and ``capsule-server report`` of
    that log."""

    capsules_dir: Path
    cert_dir: Path
    log: Path
    capsys: pytest.CaptureFixture[str]

    @asynccontextmanager
    async def serve(self, start: float) -> AsyncIterator[CapsuleServer]:
        """The server, its log's clock starting at ``start``."""
        with self.log.open("w", encoding="utf-8") as fh:
            log = JsonLinesLog(fh)
            async with serving_on_trio_time(
                self.capsules_dir, self.cert_dir, FAST, log, start, timespec="milliseconds"
            ) as srv:
                yield srv

    def report(self, *args: str) -> tuple[int, Any]:
        """``capsule-server report LOG --json ARGS``: its exit code and its JSON."""
        code = main(["report", str(self.log), "--json", *args])
        [line] = self.capsys.readouterr().out.splitlines()
        return code, json.loads(line)


@pytest.fixture
def logged(
    capsules_dir: Path, cert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Logged:
    return Logged(capsules_dir, cert_dir, tmp_path / "access.jsonl", capsys)


@pytest.mark.parametrize("role", ["indexer", "archiver", "researcher"])
async def test_geminibot_crawler_is_compliant(
    role: str, logged: Logged, tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    # The server and the crawler run in this trio run and neither waits on a thread (no
    # capsule file is large enough to be read in one): the clock may jump at once.
    files = [f for f in logged.capsules_dir.rglob("*") if f.is_file()]
    assert max(f.stat().st_size for f in files) < SMALL_FILE
    hosts = sorted(load_capsules(logged.capsules_dir))
    async with logged.serve(NIGHT) as srv:
        rule = ConnectRule("*", 1965, "127.0.0.1", srv.port or 0)
        resolver = Resolver([rule], loopback_only=True)
        t0 = trio.current_time()
        crawler = sqlite_crawler(
            connect(tmp_path / "crawl.db"),
            gemini_fetch(GeminiClient(connect_to=resolver)),
            CrawlOptions(
                role=role, test_range=True, limits=FrontierLimits(max_urls_per_host=MAZE_BOUND)
            ),
            wall_clock=lambda: NIGHT + trio.current_time() - t0,
        )
        crawler.seed([f"gemini://{host}/" for host in hosts])
        await crawler.run()
    code, got = logged.report("--as", role)
    assert code == 0, got
    assert got["compliant"] and role in got["consistent_with"], got["breaches"]
    assert got["verdict"].startswith("compliant as ")
    assert set(got["scorecard"].values()) == {"pass"}, got["scorecard"]


async def get(port: int, client: str, host: str, path: str) -> tuple[str, bytes]:
    """One request from ``client``; the header line and the body."""
    answer = await raw_request(
        port, f"gemini://{host}{path}\r\n".encode(), host, local_address=client
    )
    header, _, body = answer.partition(b"\r\n")
    return header.decode("utf-8", "replace"), body


async def test_naive_crawler_fails_where_expected(
    logged: Logged, loopback_clock: trio.testing.MockClock
) -> None:
    """Follows every link from each home page, never reads a policy, never waits."""
    hosts = sorted(load_capsules(logged.capsules_dir))
    async with logged.serve(NIGHT) as srv:
        for host in hosts:
            queue, seen = ["/"], {"/"}
            while queue and len(seen) <= NAIVE_PAGES:
                header, body = await get(srv.port or 0, "127.0.0.2", host, queue.pop(0))
                if not header.startswith("20 text/gemini"):
                    continue
                for line in body.decode("utf-8", "replace").splitlines():
                    if not line.startswith("=>") or len(line.split()) < 2:
                        continue
                    url = resolve_link(line.split()[1], f"gemini://{host}/")
                    prefix = f"gemini://{host}/"
                    if url.startswith(prefix) and (path := url[len(prefix) - 1 :]) not in seen:
                        seen.add(path)
                        queue.append(path)
    code, got = logged.report("--as", "indexer")
    assert code == 1 and not got["compliant"] and got["consistent_with"] == []
    assert got["verdict"].startswith("not compliant: ")
    # it never read robots.txt anywhere: every capsule fails, first of all for that
    assert all(s.startswith("fail: before robots.txt / ") for s in got["scorecard"].values())
    kinds: dict[str, set[str]] = {}
    for breach in got["breaches"]:
        kinds.setdefault(breach["host"], set()).add(breach["kind"])
    assert "honeypot" in kinds["honeypot.test"]
    assert "honeypot" in kinds["robots2-chain.test"]
    for host in ("va-groups.test", "va-conflict.test", "wildcards.test", "robots-41.test"):
        assert "forbidden" in kinds[host], host
    assert "forbidden" in kinds["robots2-ask.test"]  # crawl: ask counts as no
    assert "forbidden" in kinds["agents-bad.test"]  # agents.txt fails closed
    assert "too fast" in kinds["robots-v2.test"]  # Request-rate 6/1m
    assert kinds["robots-missing.test"] == {"before robots.txt"}


async def test_rude_bot_each_breach_reported_once(
    logged: Logged, loopback_clock: trio.testing.MockClock
) -> None:
    """Polite (robots.txt first, 30 s between requests) except for one breach of each rule."""
    async with logged.serve(NOON) as srv:
        port = srv.port or 0

        async def pause(seconds: float) -> None:
            """The bot's wait: the mock clock moved on at once, not after idle real time
            (nothing else runs between two of its requests)."""
            loopback_clock.jump(seconds)
            await trio.sleep(0)

        async def visit(host: str, *paths: str, pause_s: float = 30.0) -> None:
            for path in paths:
                await get(port, "127.0.0.3", host, path)
                await pause(pause_s)

        await visit("robots-v2.test", "/robots.txt", "/", "/public/a.gmi")  # at noon: 2 requests
        # outside Visit-time, one breach (its rule's text names each request's own minute)
        await pause(NIGHT - NOON)
        await visit("wildcards.test", "/", "/robots.txt")  # robots.txt not first
        await visit("honeypot.test", "/robots.txt", "/trap/a.gmi")
        await visit("va-groups.test", "/robots.txt", "/index-no/a.gmi")  # indexer's group
        await visit("robots-v2.test", "/", pause_s=2)
        await visit("robots-v2.test", "/public/a.gmi")  # 2 s after: Request-rate 6/1m
        await visit("agents-good.test", "/robots.txt", "/agents.txt", "/admin/a.gmi")
        await visit("agents-bad.test", "/robots.txt", "/agents.txt", "/")  # fail closed
        await visit("robots2-ask.test", "/robots.txt", "/robots2.txt")
        await visit("robots2-ask.test", "/", pause_s=1)  # crawl: ask is no ...
        await visit("robots2-ask.test", "/")  # ... and 1 s after: Crawl-delay 2
        await visit("robots-44.test", "/robots.txt", pause_s=1)  # 44 60 ...
        await visit("robots-44.test", "/robots.txt")  # ... not sat out
        await visit("maze.test", "/robots.txt", "/maze/" + "a/" * 16)  # 17 levels
        await visit("robots-redirect.test", "/robots.txt", "/old-robots.txt")
        await visit("robots-redirect.test", "/policy/robots.txt")
        await visit("robots-redirect.test", *(f"/hops/{hop}" for hop in range(1, 8)))
        await visit("large-file.test", "/robots.txt", "/files/big.bin", "/files/big.bin")
    code, got = logged.report("--as", "indexer")
    assert code == 1 and got["consistent_with"] == []
    breaches = [(b["kind"], b["host"], b["file"], b["line"], b["count"]) for b in got["breaches"]]
    assert breaches == [
        ("forbidden", "robots-v2.test", "robots.txt", 5, 2),  # Visit-time: 2200-0600
        ("before robots.txt", "wildcards.test", "", 0, 1),
        ("honeypot", "honeypot.test", "robots.txt", 11, 1),  # Disallow: /trap/
        ("forbidden", "va-groups.test", "robots.txt", 6, 1),  # Disallow: /index-no/
        ("too fast", "robots-v2.test", "robots.txt", 4, 1),  # Request-rate: 6/1m
        ("forbidden", "agents-good.test", "agents.txt", 8, 1),  # /admin DISALLOW
        ("forbidden", "agents-bad.test", "agents.txt", 5, 1),  # the bad hash line
        ("forbidden", "robots2-ask.test", "robots2.txt", 7, 2),  # crawl: ask
        ("too fast", "robots2-ask.test", "robots.txt", 2, 1),  # Crawl-delay: 2 (its own line)
        ("during 44 wait", "robots-44.test", "", 0, 1),
        ("maze depth", "maze.test", "", 0, 1),
        ("redirects", "robots-redirect.test", "", 0, 1),
        ("size", "large-file.test", "", 0, 1),
    ]
    assert got["verdict"].startswith(
        "not compliant: 14 forbidden requests, first at 2026-11-23 12:00:30 "
        "gemini://robots-v2.test/ (forbidden)"
    )
    card = got["scorecard"]
    assert card["robots-missing.test"] == "not visited"
    assert card["percent.test"] == "not visited"
    assert card["own-token.test"] == "not visited"
    assert card["va-conflict.test"] == "not visited"
    assert card["honeypot.test"].startswith("fail: honeypot /trap/a.gmi (robots.txt:11 ")
    # the text and gemtext scorecards say the same, ending with a one-line verdict
    assert main(["report", str(logged.log), "--as", "indexer"]) == 1
    text = logged.capsys.readouterr().out.splitlines()
    assert text[0] == "127.0.0.3: not compliant: 14 forbidden requests"
    assert text[-1] == "  verdict: not compliant"
    assert max(len(line) for line in text) <= 80
    assert main(["report", str(logged.log), "--as", "indexer", "--format", "gmi"]) == 1
    gmi = logged.capsys.readouterr().out.splitlines()
    assert gmi[0] == "# Scorecard for 127.0.0.3" and gmi[-1] == "Verdict: not compliant"
    assert "* robots-missing.test: not visited" in gmi
