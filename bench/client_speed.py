"""Requests per second from one client process against jetforce on loopback.

Side by side in one run: geminibot's trio client at concurrency 1, 16 and 64; ignition
sequential; ignition in a thread pool as wide as the concurrency. Every cell stops after
``--requests`` requests or ``--seconds`` seconds, whichever comes first; every response is
checked (status 20 and the expected body), and failures are counted, not timed. For
geminibot's cells the client's own CPU per request is reported too (``process_time`` of
this process, user + system: jetforce runs in another), the figure that does not depend on
how fast jetforce answers or on what else the machine runs, and how much its resident
memory grew per request (a leak per connection shows there).

    .venv/bin/python bench/client_speed.py [--requests N] [--seconds T]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import cryptography.hazmat.primitives.serialization  # noqa: F401 - ignition needs it first
from jetforce_peer import running_jetforce
from machine import cpu_model

from geminibot.gemini.client import GeminiClient
from geminibot.net.errors import FetchError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import ignition
warnings.filterwarnings("ignore", message="Properties that return a na")

CONCURRENCY = (1, 16, 64)
HOST = "localhost"
BODY = b"# Benchmark page\n" + b"=> /next A link line\n" * 40


@dataclass
class Cell:
    done: int = 0
    failed: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    """CPU seconds of this process over the cell (geminibot's cells only)."""
    grown: int = 0
    """KiB this process's RSS grew over the cell (geminibot's cells only)."""

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0


def rss_kib() -> int:
    """This process's resident set now (Linux), KiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def bench_geminibot(url: str, concurrency: int, max_requests: int, max_seconds: float) -> Cell:
    cell = Cell()
    started = 0

    async def worker(client: GeminiClient) -> None:
        nonlocal started
        while started < max_requests:
            started += 1
            try:
                response = await client.fetch(url)
            except FetchError:
                cell.failed += 1
                continue
            if response.status == 20 and response.body == BODY:
                cell.done += 1
            else:
                cell.failed += 1

    async def main() -> None:
        client = GeminiClient()
        await client.fetch(url)  # warm-up, pins the certificate
        begin, cpu, rss = time.perf_counter(), time.process_time(), rss_kib()
        with trio.move_on_after(max_seconds):
            async with trio.open_nursery() as nursery:
                for _ in range(concurrency):
                    nursery.start_soon(worker, client)
        cell.seconds = time.perf_counter() - begin
        cell.cpu = time.process_time() - cpu
        cell.grown = rss_kib() - rss

    trio.run(main)
    return cell


def bench_ignition(url: str, width: int, max_requests: int, max_seconds: float) -> Cell:
    cell = Cell()
    lock = threading.Lock()
    started = 0
    deadline = time.perf_counter() + max_seconds

    def loop() -> None:
        nonlocal started
        while True:
            with lock:
                if started >= max_requests or time.perf_counter() >= deadline:
                    return
                started += 1
            try:
                response = ignition.request(url)
                ok = response.status == "20" and response.raw_body == BODY
            except Exception:
                ok = False
            with lock:
                if ok:
                    cell.done += 1
                else:
                    cell.failed += 1

    ignition.request(url)  # warm-up
    begin = time.perf_counter()
    deadline = begin + max_seconds
    if width == 1:
        loop()
    else:
        with ThreadPoolExecutor(width) as pool:
            for _ in range(width):
                pool.submit(loop)
    cell.seconds = time.perf_counter() - begin
    return cell


def machine() -> str:
    return f"nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="most requests per cell")
    parser.add_argument("--seconds", type=float, default=5.0, help="most seconds per cell")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "capsule"
        root.mkdir()
        (root / "page.gmi").write_bytes(BODY)
        ignition.set_default_hosts_file(str(Path(tmp) / "ignition_known_hosts"))
        ignition.set_default_timeout(30)
        with running_jetforce(root, HOST) as port:
            url = f"gemini://{HOST}:{port}/page.gmi"
            print(f"# client_speed: {machine()}")
            print(f"# jetforce 1.0.0 on 127.0.0.1:{port}, body {len(BODY)} bytes")
            print(f"# each cell: at most {args.requests} requests or {args.seconds} s")

            def run(bench: Callable[[str, int, int, float], Cell], width: int) -> Cell:
                return bench(url, width, args.requests, args.seconds)

            sequential = run(bench_ignition, 1)
            print()
            print(
                "| concurrency | geminibot req/s | ignition sequential req/s "
                "| ignition thread pool req/s | geminibot / pool | geminibot CPU ms/req "
                "| geminibot RSS growth KiB/req | failures |"
            )
            print("|---:|---:|---:|---:|---:|---:|---:|---:|")
            for width in CONCURRENCY:
                ours = run(bench_geminibot, width)
                pool = run(bench_ignition, width)
                ratio = ours.rate / pool.rate if pool.rate else float("inf")
                print(
                    f"| {width} | {ours.rate:.0f} ({ours.done} in {ours.seconds:.1f} s) "
                    f"| {sequential.rate:.1f} | {pool.rate:.1f} ({pool.done} in {pool.seconds:.1f} s) "
                    f"| {ratio:.1f}x | {1000 * ours.cpu / max(ours.done, 1):.2f} "
                    f"| {ours.grown / max(ours.done, 1):.2f} | {ours.failed + pool.failed} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
