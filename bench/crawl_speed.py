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

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import ignition
warnings.filterwarnings("ignore", message="Properties that return a na")

#: Bound on each subprocess (seconds).
RUN_TIMEOUT = 900.0
ROBOTS = b"User-agent: *\nDisallow: /private/\n"
LINK = re.compile(r"^=>\s*(\S+)", re.MULTILINE)


def generate(root: Path, hosts: int, pages: int) -> list[str]:
    """``hosts`` capsules sharing ``pages`` pages (home pages included); returns the seeds."""
    per_host = max(2, -(-pages // hosts))
    words = [
        "gemini",
        "capsule",
        "crawler",
        "index",
        "search",
        "polite",
        "robots",
        "agent",
        "archive",
        "text",
    ]
    for h in range(hosts):
        host = root / f"host{h:02d}.test"
        host.mkdir(parents=True)
        (host / "robots.txt").write_bytes(ROBOTS)
        (host / "private").mkdir()
        (host / "private" / "x.gmi").write_text("# not for bots\n")
        links = "\n".join(f"=> /p{i}.gmi page {i}" for i in range(min(per_host - 1, 5)))
        (host / "index.gmi").write_text(f"# host {h}\n{links}\n=> /private/x.gmi private\n")
        for i in range(per_host - 1):
            text = " ".join(words[(i + k) % len(words)] for k in range(60))
            nxt = f"gemini://host{(h + 1) % hosts:02d}.test/p{i}.gmi"
            body = (
                f"# Page {i} of host {h}\n\n{text}\n\n"
                + "".join(f"=> /p{(i * 3 + k) % (per_host - 1)}.gmi more\n" for k in (1, 2, 3))
                + f"=> {nxt} elsewhere\n=> /private/x.gmi private\n"
            )
            (host / f"p{i}.gmi").write_text(body)
    return [f"gemini://host{h:02d}.test/" for h in range(hosts)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve(root: Path, certs: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    server = Path(sys.executable).with_name("capsule-server")
    proc = subprocess.Popen(
        [
            str(server),
            "serve",
            str(root),
            "--port",
            str(port),
            "--certs",
            str(certs),
            "--rate",
            "1000000",
            "--rate-burst",
            "1000000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("capsule-server did not start")


def crawl_geminibot(
    seeds: list[str], port: int, db: Path, concurrency: int, max_host_urls: int
) -> tuple[dict[str, object], int]:
    """Run ``geminibot crawl``; returns (its JSON summary, peak RSS in KiB)."""
    argv = [sys.executable, "-m", "geminibot", "crawl", *seeds, "--db", str(db)]
    argv += ["--test-range", "--allow-host", "*.test", "--json"]
    argv += ["--connect-to", f"*.test:1965:127.0.0.1:{port}"]
    argv += ["--concurrency", str(concurrency), "--max-host-urls", str(max_host_urls)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"geminibot crawl failed ({proc.returncode})")
    return json.loads(out), usage.ru_maxrss


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


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


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
            server, port = serve(root, tmp / "certs")
            try:
                per_host = total // args.hosts + 10
                summary, rss = crawl_geminibot(
                    seeds, port, tmp / f"crawl-{total}.db", args.concurrency, per_host
                )
                naive = None
                if total == args.pages:
                    naive = crawl_naive(seeds, port, args.naive_seconds, tmp)
            finally:
                server.terminate()
                server.wait(10)
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
