"""The portal's speed on loopback, side by side with a plain Gemini fetch of the same pages.

capsule-server serves the bundled capsules and ``geminibot portal --test-range`` stands in
front of it (both real processes: the portal's HTTP/1.1 server on trio, TLS on
loopback). In one run:

- a cached page: requests/s through the portal (the page and the policy are in memory),
  sequential and with 8 clients at once, beside the plain Gemini client fetching the
  same page (sequential and 8 at once);
- an uncached page: time to first byte through the portal for pages it has never seen
  (distinct pages of maze.test; the host's policy is cached), beside the plain client's
  time for the same kind of page;
- a cold host: time to first byte of a host's first page (robots.txt, robots2.txt and
  agents.txt are read first).

Every loop is bounded by ``--requests`` and ``--seconds`` and stops by itself; every
answer is checked (HTTP 200 / Gemini 20).

    .venv/bin/python bench/portal_speed.py [--requests N] [--seconds T]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "crawl"))

from loopback import free_port, wait_listening
from machine import cpu_model
from served_capsules import capsule_server

from capsule_server.files import bundled_capsules
from geminibot.gemini.client import GeminiClient

BIN = Path(sys.executable).parent
PAGE = "va-groups.test/README.gmi"
COLD_HOSTS = [
    "wildcards.test",
    "own-token.test",
    "va-conflict.test",
    "honeypot.test",
    "percent.test",
]
STARTUP_BOUND = 60.0


@contextmanager
def process(argv: list[str], port: int) -> Iterator[None]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, argv[0], STARTUP_BOUND)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


async def timed(n: int, seconds: float, width: int, one: Callable[[int], Awaitable[None]]) -> float:
    """Run ``one(i)`` up to ``n`` times with ``width`` at once; requests per second."""
    done = 0
    start = time.perf_counter()
    stop_at = start + seconds

    async def worker(w: int) -> None:
        nonlocal done
        while done < n and time.perf_counter() < stop_at:
            done += 1
            await one(done)

    async with trio.open_nursery() as nursery:
        for w in range(width):
            nursery.start_soon(worker, w)
    return done / (time.perf_counter() - start)


async def run(gemini_port: int, portal: str, n: int, seconds: float) -> list[tuple[str, str, str]]:
    client = GeminiClient(connect_to=lambda host, port: ("127.0.0.1", gemini_port))
    rows: list[tuple[str, str, str]] = []
    async with httpx.AsyncClient(base_url=portal, timeout=30.0) as web:

        async def portal_page(_: int) -> None:
            r = await web.get(f"/gemini/{PAGE}")
            assert r.status_code == 200, r.status_code

        async def gemini_page(_: int) -> None:
            r = await client.fetch(f"gemini://{PAGE}")
            assert r.status == 20, r.status

        await portal_page(0)  # warm: policy and page cached
        for width in (1, 8):
            p = await timed(n, seconds, width, portal_page)
            g = await timed(n, seconds, width, gemini_page)
            rows.append((f"cached page, {width} at once: requests/s", f"{p:,.0f}", f"{g:,.0f}"))

        async def ttfb_portal(i: int) -> float:
            start = time.perf_counter()
            async with web.stream("GET", f"/gemini/maze.test/maze/u{i:06d}/") as r:
                first = time.perf_counter() - start
                assert r.status_code == 200, r.status_code
                await r.aread()
            return first

        async def ttfb_gemini(i: int) -> float:
            start = time.perf_counter()
            r = await client.fetch(f"gemini://maze.test/maze/g{i:06d}/")
            assert r.status == 20
            return time.perf_counter() - start

        await ttfb_portal(0)  # the maze host's policy is now cached
        count = min(n, 200)
        p_times = [await ttfb_portal(i + 1) for i in range(count)]
        g_times = [await ttfb_gemini(i + 1) for i in range(count)]
        rows.append(
            (
                "uncached page: median time to first byte, ms",
                f"{statistics.median(p_times) * 1000:.1f}",
                f"{statistics.median(g_times) * 1000:.1f}",
            )
        )
        rows.append(
            (
                "uncached page: 95th percentile, ms",
                f"{statistics.quantiles(p_times, n=20)[-1] * 1000:.1f}",
                f"{statistics.quantiles(g_times, n=20)[-1] * 1000:.1f}",
            )
        )
        cold = []
        for host in COLD_HOSTS:
            start = time.perf_counter()
            async with web.stream("GET", f"/gemini/{host}/") as r:
                cold.append(time.perf_counter() - start)
                await r.aread()
        rows.append(
            (
                "cold host (3 policy files, then the page): median ms",
                f"{statistics.median(cold) * 1000:.1f}",
                "-",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="per cell (2000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per cell (10)")
    args = parser.parse_args()
    http_port = free_port()
    capsules = bundled_capsules()
    assert capsules is not None
    with (
        tempfile.TemporaryDirectory() as tmp,
        capsule_server(capsules, Path(tmp) / "certs", Path(os.devnull), rate=1e6) as gemini_port,
    ):
        portal = [
            str(BIN / "geminibot"),
            "portal",
            "--port",
            str(http_port),
            "--test-range",
            "--connect-to",
            f"*.test:1965:127.0.0.1:{gemini_port}",
            "--rate",
            "1000000",
            "--rate-burst",
            "1000000",
        ]
        with process(portal, http_port):
            rows = trio.run(
                run, gemini_port, f"http://127.0.0.1:{http_port}", args.requests, args.seconds
            )
    print(f"Machine: nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
    print("| measure | portal (HTTP) | plain Gemini fetch |")
    print("|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
