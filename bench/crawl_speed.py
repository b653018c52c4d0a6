"""Crawl speed: pages per second over a generated capsule set served on loopback.

Side by side in one run:

- ``geminibot crawl`` (a subprocess, as a user runs it) with ``--test-range`` over
  ``--hosts`` host names of ``--pages`` pages in total, served by ``capsule-server serve``;
- a naive sequential crawler built on ignition (the peer): breadth first, robots.txt
  first per host (protego decides), one request at a time, no delay, stopped after
  ``--naive-seconds`` (its rate is what is compared; it would take minutes to finish).

Then the peak memory (max RSS) of the geminibot crawl process at ``--pages`` and at
``--big-pages`` pages (same number of hosts), to show it grows well below linearly.
Both crawlers fetch the same pages; every generated page links to three others on its host
and one on the next host, and to one disallowed page.

    .venv/bin/python bench/crawl_speed.py [--hosts 24] [--pages 2000] [--big-pages 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections import deque
from pathlib import Path
from urllib.parse import urlsplit

import cryptography.hazmat.primitives.serialization  # noqa: F401 - ignition needs it first
from protego import Protego

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "crawl"))

from machine import cpu_model, fresh_peak_file, measured_argv, peak_rss_kib
from served_capsules import capsule_server, generate

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import ignition
warnings.filterwarnings("ignore", message="Properties that return a na")

#: Bound on each subprocess (seconds).
RUN_TIMEOUT = 900.0
LINK = re.compile(r"^=>\s*(\S+)", re.MULTILINE)


def crawl_geminibot(
    seeds: list[str], port: int, db: Path, concurrency: int, max_host_urls: int
) -> tuple[dict[str, object], int]:
    """Run ``geminibot crawl``; returns (its JSON summary, peak RSS in KiB)."""
    peak_file = fresh_peak_file(db)
    argv = [*measured_argv("geminibot", peak_file), "crawl", *seeds, "--db", str(db)]
    argv += ["--test-range", "--allow-host", "*.test", "--json"]
    argv += ["--connect-to", f"*.test:1965:127.0.0.1:{port}"]
    argv += ["--concurrency", str(concurrency), "--max-host-urls", str(max_host_urls)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, _ = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"geminibot crawl failed ({proc.returncode})")
    return json.loads(out), peak_rss_kib(peak_file)


def crawl_naive(seeds: list[str], port: int, max_seconds: float, tmp: Path) -> tuple[int, float]:
    """Breadth-first, sequential, robots.txt first per host; returns (pages, seconds)."""
    ignition.set_default_hosts_file(str(tmp / "known_hosts"))
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: object, p: object, *args: object, **kw: object) -> object:
        if isinstance(host, str) and host.endswith(".test"):
            return real_getaddrinfo("127.0.0.1", port, *args, **kw)  # type: ignore[arg-type]
        return real_getaddrinfo(host, p, *args, **kw)  # type: ignore[arg-type]

    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    try:
        queue = deque(seeds)
        seen = set(seeds)
        robots: dict[str, Protego] = {}
        pages = 0
        start = time.perf_counter()
        while queue and time.perf_counter() - start < max_seconds:
            url = queue.popleft()
            host = urlsplit(url).hostname or ""
            if host not in robots:
                r = ignition.request(f"gemini://{host}/robots.txt")
                body = r.data() if r.is_a(ignition.SuccessResponse) else ""
                robots[host] = Protego.parse(body)
            if not robots[host].can_fetch(url, "geminibot"):
                continue
            response = ignition.request(url)
            pages += 1
            if response.is_a(ignition.SuccessResponse):
                for link in LINK.findall(response.data()):
                    target = ignition.url(link, url)
                    wanted = target.endswith((".gmi", "/")) and ".test" in target
                    if wanted and target not in seen:
                        seen.add(target)
                        queue.append(target)
        return pages, time.perf_counter() - start
    finally:
        socket.getaddrinfo = real_getaddrinfo  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=24)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--big-pages", type=int, default=20000, help="0 skips the memory run")
    parser.add_argument("--concurrency", type=int, default=24)
    parser.add_argument("--naive-seconds", type=float, default=20.0)
    args = parser.parse_args()
    print(f"machine: nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        rows = []
        for total in (args.pages, args.big_pages):
            if total <= 0:
                continue
            root = tmp / f"capsules-{total}"
            seeds = generate(root, args.hosts, total)
            with capsule_server(root, tmp / "certs") as port:
                per_host = total // args.hosts + 10
                summary, rss = crawl_geminibot(
                    seeds, port, tmp / f"crawl-{total}.db", args.concurrency, per_host
                )
                naive = None
                if total == args.pages:
                    naive = crawl_naive(seeds, port, args.naive_seconds, tmp)
            rows.append((total, summary, rss, naive))
    print()
    print(
        "| pages generated | hosts | geminibot pages | seconds | pages/s | peak RSS MiB "
        "| ignition naive pages/s | speed-up |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for total, s, rss, naive in rows:
        rate = float(s["pages_per_second"])  # type: ignore[arg-type]
        if naive is not None:
            n_rate = naive[0] / naive[1]
            naive_cell = f"{n_rate:.1f} ({naive[0]} in {naive[1]:.1f} s)"
            speedup = f"{rate / n_rate:.1f}x"
        else:
            naive_cell = speedup = "-"
        print(
            f"| {total} | {args.hosts} | {s['pages']} | {s['seconds']} | {rate:.1f} "
            f"| {rss / 1024:.1f} | {naive_cell} | {speedup} |"
        )


if __name__ == "__main__":
    main()
