"""The portal under attack, on loopback: does a small page still come in under a second?

In one run, for the portal of this tree (and, with ``--old SRC``, the portal of another
source tree, run the same way, side by side):

- a hostile Gemini server (tests/portal/public_fixtures.py) on 127.0.0.2 and capsule-server
  with the bundled capsules on 127.0.0.1; ``geminibot portal --test-range`` in front of
  both, a real process with its default limits;
- the attacks, each from addresses of its own (127.0.0.x, as separate web clients):
  three workers asking for 200,000-link pages (6.5 MB each, a new URL every time, so
  there are always three in progress); 25 clients that ask for an 8 MB line of quotes
  (48 MB once escaped, if nothing cuts it) and never read the answer; one client asking
  for 8 capsules at a time whose robots.txt trickles a byte every 10 s;
- a person (127.0.0.1) asking once a second for a small page it has never seen
  (maze.test) and for a normal capsule's page (va-groups.test);
- the portal's resident memory, sampled 4 times a second, and its peak.

Every loop stops after ``--seconds``; every connection is to loopback.

With ``--suite protocol`` (:mod:`portal_protocol_attacks`) it runs instead the attacks on
the portal's HTTP: HTTP/2 rapid reset, zero flow-control windows, streams that never end,
a SETTINGS/PING flood, request bodies that never end and idle connections, each against a
fresh portal process whose descriptor limit is 1,024.

    .venv/bin/python bench/portal_attack.py [--seconds 60] [--old /path/to/old/tree]
    .venv/bin/python bench/portal_attack.py --suite protocol [--seconds 15] [--old ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "crawl"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "portal"))

from loopback import free_port, wait_listening
from machine import cpu_model
from public_fixtures import hostile_capsule, rss_mib
from served_capsules import capsule_server

from capsule_server.files import bundled_capsules

BIN = Path(sys.executable).parent
STARTUP_BOUND = 60.0
#: Seconds one request of the person may take before it counts as failed (a bound).
PERSON_BOUND = 30.0
NOT_READING = 25
BIG_PAGES = 3
TRICKLING = 8
#: Where each kind of hostile capsule is served (a server address each: the portal shares
#: its upstream slots per server address).
ADDRESSES = {"big": "127.0.0.2", "quotes": "127.0.0.3", "trickle": "127.0.0.5"}


@dataclass
class Result:
    name: str
    small: list[float] = field(default_factory=list)  # seconds, each person's request
    statuses: dict[int, int] = field(default_factory=dict)  # person's statuses
    normal: list[int] = field(default_factory=list)  # va-groups.test statuses
    rss: list[float] = field(default_factory=list)
    peak: float = 0.0
    attack: dict[str, int] = field(default_factory=dict)  # answers the attackers got


@contextmanager
def portal(src: Path | None, gemini_port: int, evil: dict[str, int]) -> Iterator[tuple[int, int]]:
    """The portal process of ``src`` (None: this tree); yields (port, pid)."""
    port = free_port()
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    argv = [str(BIN / "geminibot"), "portal", "--port", str(port), "--test-range"]
    argv += ["--connect-to", f"*.test:1965:127.0.0.1:{gemini_port}"]
    for domain, port_of in evil.items():
        argv += ["--connect-to", f"*.{domain}:1965:{ADDRESSES[domain]}:{port_of}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_listening(port, proc, "geminibot portal", STARTUP_BOUND)
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def client(base: str, address: str) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=base, transport=transport, timeout=PERSON_BOUND)


async def attack_big_pages(base: str, stop: float, result: Result) -> None:
    async def worker(i: int) -> None:
        n = 0
        async with client(base, f"127.0.0.{10 + i}") as web:
            while time.monotonic() < stop:
                n += 1
                try:
                    r = await web.get(f"/gemini/big{i}.big/links?{n}")
                    key = f"links {r.status_code}"
                except httpx.HTTPError:
                    key = "links failed"
                result.attack[key] = result.attack.get(key, 0) + 1

    async with trio.open_nursery() as nursery:
        for i in range(BIG_PAGES):
            nursery.start_soon(worker, i)


async def attack_not_reading(port: int, stop: float) -> None:
    """Clients that send a request and never read; closed when the run ends."""
    socks = []
    for i in range(NOT_READING):
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await sock.bind((f"127.0.1.{i + 1}", 0))
        await sock.connect(("127.0.0.1", port))
        await sock.send(b"GET /gemini/q.quotes/quotes HTTP/1.1\r\nHost: p\r\n\r\n")
        socks.append(sock)
    await trio.sleep(max(0.0, stop - time.monotonic()))
    for sock in socks:
        sock.close()


async def attack_trickle(base: str, stop: float, result: Result) -> None:
    round_ = 0
    async with client(base, "127.0.0.4") as web:
        while time.monotonic() < stop:
            round_ += 1

            async def one(i: int, r: int = round_) -> None:
                try:
                    answer = await web.get(f"/gemini/trickle{r}x{i}.trickle/")
                    key = f"trickle {answer.status_code}"
                except httpx.HTTPError:
                    key = "trickle failed"
                result.attack[key] = result.attack.get(key, 0) + 1

            with trio.move_on_at(trio.current_time() + stop - time.monotonic()):
                async with trio.open_nursery() as nursery:
                    for i in range(TRICKLING):
                        nursery.start_soon(one, i)


async def person(base: str, stop: float, result: Result) -> None:
    n = 0
    async with client(base, "127.0.0.1") as web:
        while time.monotonic() < stop:
            n += 1
            started = time.monotonic()
            try:
                r = await web.get(f"/gemini/maze.test/maze/a{n:06d}/")
                status = r.status_code
            except httpx.HTTPError:
                status = 0
            result.small.append(time.monotonic() - started)
            result.statuses[status] = result.statuses.get(status, 0) + 1
            try:
                normal = (await web.get("/gemini/va-groups.test/README.gmi")).status_code
            except httpx.HTTPError:
                normal = 0
            result.normal.append(normal)
            await trio.sleep(max(0.0, started + 1.0 - time.monotonic()))


async def memory(pid: int, stop: float, result: Result) -> None:
    while time.monotonic() < stop:
        try:
            result.rss.append(rss_mib(pid)[0])
            result.peak = max(result.peak, rss_mib(pid)[1])
        except (OSError, KeyError):
            return
        await trio.sleep(0.25)


async def one_run(name: str, src: Path | None, gemini_port: int, seconds: float) -> Result:
    result = Result(name)
    async with (
        hostile_capsule(ADDRESSES["big"]) as big,
        hostile_capsule(ADDRESSES["quotes"]) as quotes,
        hostile_capsule(ADDRESSES["trickle"]) as trickle,
    ):
        evil = {"big": big.port, "quotes": quotes.port, "trickle": trickle.port}
        with portal(src, gemini_port, evil) as (port, pid):
            base = f"http://127.0.0.1:{port}"
            async with client(base, "127.0.0.1") as web:  # warm: the capsules' policies
                await web.get("/gemini/maze.test/")
                await web.get("/gemini/va-groups.test/README.gmi")
            stop = time.monotonic() + seconds
            async with trio.open_nursery() as nursery:
                nursery.start_soon(attack_big_pages, base, stop, result)
                nursery.start_soon(attack_not_reading, port, stop)
                nursery.start_soon(attack_trickle, base, stop, result)
                nursery.start_soon(memory, pid, stop, result)
                await trio.sleep(2.0)  # the attacks are under way
                nursery.start_soon(person, base, stop, result)
    return result


def report(results: list[Result], seconds: float) -> None:
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"attack: {BIG_PAGES} big-page workers, {NOT_READING} clients not reading,")
    print(f"{TRICKLING} trickling robots.txt at a time; {seconds:g} s each run")
    names = [r.name for r in results]
    rows = [
        ("small page: requests", [f"{len(r.small)}" for r in results]),
        ("small page: median s", [f"{statistics.median(r.small):.3f}" for r in results]),
        ("small page: slowest s", [f"{max(r.small):.3f}" for r in results]),
        ("small page: under 1 s", [f"{sum(t < 1 for t in r.small)}" for r in results]),
        ("small page: statuses", [fmt(r.statuses) for r in results]),
        ("normal capsule: 200s", [f"{r.normal.count(200)}/{len(r.normal)}" for r in results]),
        ("portal RSS: median MiB", [f"{statistics.median(r.rss):.0f}" for r in results]),
        ("portal RSS: peak MiB", [f"{r.peak:.0f}" for r in results]),
    ]
    print(f"{'':24}" + "".join(f"{n:>22}" for n in names))
    for label, cells in rows:
        print(f"{label:24}" + "".join(f"{c:>22}" for c in cells))
    for r in results:
        print(f"attackers got ({r.name}): {fmt(r.attack)}")


def fmt(counts: dict[object, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items(), key=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--old", type=Path, help="another source tree's portal, beside")
    parser.add_argument(
        "--suite",
        choices=("render", "protocol"),
        default="render",
        help="render: the page attacks, all at once (default); protocol: the HTTP attacks, "
        "one after another",
    )
    parser.add_argument(
        "--attack",
        action="append",
        metavar="NAME",
        help="with --suite protocol: only this attack (again for more; 'rapid reset', ...)",
    )
    args = parser.parse_args()
    capsules = bundled_capsules()
    assert capsules is not None
    if args.suite == "protocol":
        from portal_protocol_attacks import run_protocol_suite

        run_protocol_suite(args.seconds, args.old, capsules, args.attack)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp, capsule_server(capsules, Path(tmp)) as gport:
        runs: list[tuple[str, Path | None]] = [("this tree", None)]
        if args.old is not None:
            runs.append((f"old ({args.old.name})", args.old))
        for name, src in runs:
            results.append(trio.run(one_run, name, src, gport, args.seconds))
    report(results, args.seconds)


if __name__ == "__main__":
    main()
