"""The search capsule under a ``/check`` flood and a descriptor attack, on loopback: is a
normal search still answered in under a second?

In one run, for the search capsule of this tree (and, with ``--old SRC``, the one of
another source tree, run the same way, side by side): a crawl database of ``--pages``
generated pages (tantivy index) and ``--big-hosts`` capsules whose robots.txt is
``--robots-kib`` KiB of lines that lint badly; ``geminibot serve-search`` on it, a real
process with its default limits, its descriptor limit set to 1,024. Then each attack,
each against a server process of its own:

- ``check``: ``CHECK_WORKERS`` clients (127.0.0.10 on), each asking ``/check`` about the
  big capsules and URLs on them in turn, as fast as they are answered;
- ``idle``: 40 addresses (127.0.1.x) holding 32 TCP connections each that never send a
  byte (1,280 in all, more than the 1,024 descriptors), reopened when closed;
- ``silent``: one client (127.0.0.9) making TLS handshakes and closing without a
  request, as fast as it can (what the access log grows by is measured).

A person (127.0.0.1) searches four times a second with a new TLS connection each time:
``BASELINE`` seconds before the attack, during it (``--seconds``), and ``RECOVERY``
seconds after it. The server's resident memory (with its worker processes') is sampled
four times a second. Every loop stops by itself; every connection is to loopback.

    .venv/bin/python bench/searchcap_check_attack.py [--seconds 30] [--old /path/to/tree]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from loopback import free_port, wait_listening
from machine import cpu_model
from search_speed import QUERIES, build

from capsule_server.testing import open_tls, raw_request
from geminibot.gemini.client import make_ssl_context
from geminibot.index.tantivy_index import rebuild
from geminibot.store.db import connect

BIN = Path(sys.executable).parent
STARTUP_BOUND = 120.0
#: Seconds one request of the person may take before it counts as failed (a bound).
PERSON_BOUND = 30.0
#: Seconds one attacker's request may take (a bound).
ATTACK_BOUND = 60.0
#: The person's searches a second.
PERSON_RATE = 4.0
BASELINE = 5.0
RECOVERY = 10.0
#: The server's descriptor limit (systemd's default).
SERVER_NOFILE = 1024
CHECK_WORKERS = 4
IDLE_ADDRESSES = 40
IDLE_PER_ADDRESS = 32
HOST = "localhost"
ATTACKS = ("check", "idle", "silent")


def hostile_robots(size: int, seed: int) -> bytes:
    """``size`` bytes of robots.txt whose every line is a rule, a group or a lint finding."""
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    i = 0
    while total < size:
        kind = i % 5
        line = (
            f"User-agent: bot{i}",
            f"Disallow: /p{i}/*{rng.randrange(10**6)}$",
            f"Allow: /q{i}",
            f"Frobnicate: {i}",
            f"Disallow /nocolon{i}",
        )[kind]
        lines.append(line)
        total += len(line) + 1
        i += 1
    return ("\n".join(lines) + "\n").encode()


def make_db(path: Path, pages: int, big_hosts: int, robots_kib: int) -> None:
    build(path, pages)
    conn = connect(path)
    rebuild(conn)
    for n in range(big_hosts):
        host = f"big{n}.test"
        conn.execute("INSERT INTO hosts (host, first_seen) VALUES (?, 0)", (host,))
        conn.execute(
            "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason, status,"
            " body) VALUES (?, 'robots.txt', 1.8e9, 1.9e9, 'success', '', 20, ?)",
            (host, hostile_robots(robots_kib * 1024, n)),
        )
    conn.commit()
    conn.close()


@dataclass
class Run:
    name: str
    attack: str
    person: list[tuple[float, float, str]] = field(default_factory=list)  # (at, s, status)
    rss: list[float] = field(default_factory=list)
    descriptors: int = 0
    attack_end: float = 0.0
    attackers: dict[str, int] = field(default_factory=dict)
    log_bytes: int = 0
    seconds: float = 0.0
    stderr: str = ""

    def phase(self, start: float, end: float) -> list[float]:
        return [s for at, s, _ in self.person if start <= at < end]

    def count(self, key: str) -> None:
        self.attackers[key] = self.attackers.get(key, 0) + 1


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20, method="inclusive")[-1] if len(times) > 1 else times[0]


@contextmanager
def serve_search(src: Path | None, db: Path, tmp: Path, log: Path) -> Iterator[tuple[int, int]]:
    """``geminibot serve-search`` of ``src`` (None: this tree) on ``db``; (port, pid)."""
    port = free_port()
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    argv = [str(BIN / "geminibot"), "serve-search", "--db", str(db), "--port", str(port)]
    argv += ["--certs", str(tmp / "certs"), "--log", str(log)]
    ours = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (SERVER_NOFILE, ours[1]))  # the child's
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp / "stderr.txt", "ab"),  # noqa: SIM115 (the child holds it)
            env=env,
        )
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, ours)
    try:
        wait_listening(port, proc, "geminibot serve-search", STARTUP_BOUND)
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


async def gemini(port: int, url: str, address: str, ctx: ssl.SSLContext) -> str:
    """The status line of ``url`` (the body is read and dropped); "failed" on no answer."""
    with trio.move_on_after(ATTACK_BOUND):
        answer = await raw_request(
            port, f"gemini://{HOST}{url}\r\n".encode(), HOST, context=ctx, local_address=address
        )
        return answer.split(b" ", 1)[0].decode("ascii", "replace")[:3] or "failed"
    return "timeout"


async def person(port: int, stop: float, run: Run, ctx: ssl.SSLContext) -> None:
    n = 0
    while time.monotonic() < stop:
        query = QUERIES[n % len(QUERIES)]
        n += 1
        started = time.monotonic()
        status = "timeout"
        with trio.move_on_after(PERSON_BOUND):
            answer = await raw_request(
                port,
                f"gemini://{HOST}/search?{quote(query)}\r\n".encode(),
                HOST,
                context=ctx,
                local_address="127.0.0.1",
            )
            status = answer[:2].decode("ascii", "replace") or "failed"
        run.person.append((started, time.monotonic() - started, status))
        await trio.sleep(max(0.0, started + 1 / PERSON_RATE - time.monotonic()))


async def attack_check(port: int, stop: float, run: Run, ctx: ssl.SSLContext, hosts: int) -> None:
    async def worker(i: int) -> None:
        n = i
        while time.monotonic() < stop:
            n += 1
            host = f"big{n % hosts}.test"
            target = host if n % 2 else f"gemini://{host}/p{n}/x{n}"
            status = await gemini(port, f"/check?{quote(target)}", f"127.0.0.{10 + i}", ctx)
            run.count(f"check {status}")

    async with trio.open_nursery() as nursery:
        for i in range(CHECK_WORKERS):
            nursery.start_soon(worker, i)


async def attack_idle(port: int, stop: float, run: Run) -> None:
    async def holder(address: str) -> None:
        while time.monotonic() < stop:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port, local_address=address)
            except OSError:
                run.count("idle connect failed")
                await trio.sleep(0.5)
                continue
            run.count("idle connected")
            with trio.move_on_at(trio.current_time() + stop - time.monotonic()):
                with suppress(trio.BrokenResourceError, OSError):
                    await stream.receive_some(1)  # until the server closes it
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        for a in range(IDLE_ADDRESSES):
            for _ in range(IDLE_PER_ADDRESS):
                nursery.start_soon(holder, f"127.0.1.{a + 1}")


async def attack_silent(port: int, stop: float, run: Run, ctx: ssl.SSLContext) -> None:
    while time.monotonic() < stop:
        try:
            with trio.fail_after(ATTACK_BOUND):
                tls = await open_tls(port, HOST, context=ctx, local_address="127.0.0.9")
            run.count("handshakes")
            with suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
                await tls.aclose()
        except (trio.BrokenResourceError, ssl.SSLError, OSError, trio.TooSlowError):
            run.count("handshake refused")
            await trio.sleep(0)


def resident_mib(pid: int) -> float:
    """Resident MiB of ``pid`` and its child processes (the /check workers)."""
    total = 0.0
    pids = [pid]
    with suppress(OSError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    for p in pids:
        with suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
    return total


async def memory(pid: int, stop: float, run: Run) -> None:
    while time.monotonic() < stop:
        run.rss.append(resident_mib(pid))
        with suppress(OSError):
            run.descriptors = max(run.descriptors, len(os.listdir(f"/proc/{pid}/fd")))
        await trio.sleep(0.25)


async def one_run(
    name: str, src: Path | None, attack: str, db: Path, args: argparse.Namespace
) -> Run:
    run = Run(name, attack, seconds=args.seconds)
    ctx = make_ssl_context()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "access.jsonl"
        with serve_search(src, db, Path(tmp), log) as (port, pid):
            for query in QUERIES:  # warm: the index's files, the worker threads
                await gemini(port, f"/search?{quote(query)}", "127.0.0.1", ctx)
            start = time.monotonic()
            attack_at = start + BASELINE
            run.attack_end = attack_at + args.seconds
            stop = run.attack_end + RECOVERY
            log_before = 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(person, port, stop, run, ctx)
                nursery.start_soon(memory, pid, stop, run)
                await trio.sleep(BASELINE)
                log_before = log.stat().st_size
                if attack == "check":
                    await attack_check(port, run.attack_end, run, ctx, args.big_hosts)
                elif attack == "idle":
                    await attack_idle(port, run.attack_end, run)
                else:
                    await attack_silent(port, run.attack_end, run, ctx)
                run.log_bytes = log.stat().st_size - log_before
        run.stderr = (Path(tmp) / "stderr.txt").read_text(errors="replace")
        run.person = [(at - attack_at, s, status) for at, s, status in run.person]
        run.attack_end -= attack_at
    return run


def report(runs: list[Run], args: argparse.Namespace) -> None:
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"index: {args.pages} pages; {args.big_hosts} capsules with a {args.robots_kib} KiB "
        f"robots.txt; server descriptors {SERVER_NOFILE}; each attack {args.seconds:g} s"
    )
    for attack in ATTACKS:
        these = [r for r in runs if r.attack == attack]
        if not these:
            continue
        print(f"\nattack: {attack}")
        rows: list[tuple[str, list[str]]] = []
        for label, start, end in (
            ("before", -BASELINE, 0.0),
            ("during", 0.0, these[0].attack_end),
            ("after (10 s)", these[0].attack_end, these[0].attack_end + RECOVERY),
        ):
            rows.append((f"search p50 s, {label}", [fmt_p(r.phase(start, end), 50) for r in these]))
            rows.append((f"search p95 s, {label}", [fmt_p(r.phase(start, end), 95) for r in these]))
        rows.append(("search statuses", [statuses(r) for r in these]))
        rows.append(("RSS peak MiB (+workers)", [f"{max(r.rss):.0f}" for r in these]))
        rows.append(("descriptors peak", [str(r.descriptors) for r in these]))
        rows.append(
            ("log KiB/min (attack)", [f"{r.log_bytes / 1024 / r.seconds * 60:.0f}" for r in these])
        )
        rows.append(("stderr lines", [str(len(r.stderr.splitlines())) for r in these]))
        rows.append(("stderr tracebacks", [str(r.stderr.count("Traceback")) for r in these]))
        print(f"{'':26}" + "".join(f"{r.name:>22}" for r in these))
        for label, cells in rows:
            print(f"{label:26}" + "".join(f"{c:>22}" for c in cells))
        for r in these:
            print(f"  attackers got ({r.name}): {fmt(r.attackers)}")


def fmt_p(times: list[float], q: int) -> str:
    if not times:
        return "-"
    return f"{statistics.median(times):.3f}" if q == 50 else f"{p95(times):.3f}"


def statuses(run: Run) -> str:
    counts: dict[str, int] = {}
    for _, _, status in run.person:
        counts[status] = counts.get(status, 0) + 1
    return fmt(counts)


def fmt(counts: dict[str, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each attack")
    parser.add_argument("--pages", type=int, default=5000, help="pages in the index")
    parser.add_argument("--big-hosts", type=int, default=8, help="capsules with a big robots.txt")
    parser.add_argument("--robots-kib", type=int, default=490, help="size of each robots.txt")
    parser.add_argument("--attack", choices=ATTACKS, action="append", help="only these")
    parser.add_argument("--old", type=Path, help="another source tree's capsule, beside")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the attackers' sockets
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "crawl.db"
        make_db(db, args.pages, args.big_hosts, args.robots_kib)
        trees: list[tuple[str, Path | None]] = [("this tree", None)]
        if args.old is not None:
            trees.append((f"old ({args.old.name})", args.old))
        for attack in args.attack or ATTACKS:
            for name, src in trees:
                runs.append(trio.run(one_run, name, src, attack, db, args))
    report(runs, args)


if __name__ == "__main__":
    main()
