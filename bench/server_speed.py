"""Requests per second of capsule-server and jetforce serving the same static page.

Both servers run as subprocesses on 127.0.0.1 with the same ECDSA P-256 certificate and
the same capsule folder; one load generator (trio TLS clients, one request per connection,
as Gemini does, spread over LOAD_PROCESSES processes) drives both in turn. For each
concurrency in CONCURRENCY the generator runs for SECONDS_PER_CELL seconds. Reported:
requests/second, server CPU milliseconds per request (from /proc, which is steadier than
rps on a shared machine), errors; then each server's peak resident memory while holding
IDLE_CONNECTIONS idle TLS connections.

Run: .venv/bin/python bench/server_speed.py   (about a minute; loopback only)
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import platform
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from capsule_server.certs import ensure_certificate  # noqa: E402
from capsule_server.testing import client_context  # noqa: E402

HOST = "va-groups.test"
PAGE = "/"
CONCURRENCY = (1, 16, 64)
SECONDS_PER_CELL = 3.0
LOAD_PROCESSES = 2
IDLE_CONNECTIONS = 1000
STARTUP_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited early with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


async def _worker(port: int, stop_at: float, counts: list[int]) -> None:
    ctx = client_context()
    request = f"gemini://{HOST}{PAGE}\r\n".encode()
    while trio.current_time() < stop_at:
        try:
            tcp = await trio.open_tcp_stream("127.0.0.1", port)
            tls = trio.SSLStream(tcp, ctx, server_hostname=HOST)
            await tls.send_all(request)
            data = b""
            while chunk := await tls.receive_some(65536):
                data += chunk
            await tls.aclose()
            counts[0 if data.startswith(b"20 ") else 1] += 1
        except (OSError, ssl.SSLError, trio.BrokenResourceError):
            counts[1] += 1


async def _load(port: int, workers: int, seconds: float) -> list[int]:
    counts = [0, 0]
    stop_at = trio.current_time() + seconds
    async with trio.open_nursery() as nursery:
        for _ in range(workers):
            nursery.start_soon(_worker, port, stop_at, counts)
    return counts


def _load_process(args: tuple[int, int, float]) -> list[int]:
    return trio.run(_load, *args)


def run_load(pool: multiprocessing.pool.Pool, port: int, concurrency: int) -> tuple[int, int]:
    procs = min(LOAD_PROCESSES, concurrency)
    shares = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
    results = pool.map(_load_process, [(port, n, SECONDS_PER_CELL) for n in shares])
    return sum(r[0] for r in results), sum(r[1] for r in results)


async def _hold_idle(port: int, n: int, measure: object) -> int:
    ctx = client_context()
    held = []
    opened = 0
    with trio.move_on_after(60):
        for _ in range(n):
            try:
                tls = trio.SSLStream(
                    await trio.open_tcp_stream("127.0.0.1", port), ctx, server_hostname=HOST
                )
                await tls.do_handshake()
                held.append(tls)
                opened += 1
            except (OSError, ssl.SSLError, trio.BrokenResourceError):
                break
    assert callable(measure)
    measure()
    for tls in held:
        with trio.move_on_after(1):
            with contextlib.suppress(OSError, ssl.SSLError, trio.BrokenResourceError):
                await tls.aclose()
    return opened


def main() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 8192)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    jetforce = shutil.which("jetforce", path=str(Path(sys.executable).parent))
    if jetforce is None:
        raise SystemExit("jetforce is not installed (pip install -e '.[test]')")
    tmp = Path(tempfile.mkdtemp(prefix="server-speed-"))
    capsules = tmp / "capsules"
    shutil.copytree(ROOT / "capsules" / HOST, capsules / HOST)
    certs = tmp / "certs"
    info = ensure_certificate(certs, HOST)
    servers = {
        "capsule-server": [
            sys.executable,
            "-m",
            "capsule_server.cli",
            "serve",
            str(capsules),
            "--certs",
            str(certs),
            "--log",
            os.devnull,
            "--rate",
            "1e9",
            "--rate-burst",
            "1000000000",
        ],
        "jetforce": [
            jetforce,
            "--host",
            "127.0.0.1",
            "--hostname",
            HOST,
            "--tls-certfile",
            str(info.cert_path),
            "--tls-keyfile",
            str(info.key_path),
            "--dir",
            str(capsules / HOST),
        ],
    }
    rows: list[tuple[str, int, float, float, int]] = []
    idle: dict[str, tuple[int, int, int]] = {}
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(LOAD_PROCESSES) as pool:
        for name, argv in servers.items():
            port = free_port()
            proc = subprocess.Popen(
                [*argv, "--port", str(port)],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_listening(port, proc)
                run_load(pool, port, 4)  # warm up
                for c in CONCURRENCY:
                    cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
                    ok, errors = run_load(pool, port, c)
                    cpu, wall = cpu_seconds(proc.pid) - cpu0, time.monotonic() - t0
                    rows.append((name, c, ok / wall, 1000 * cpu / max(ok, 1), errors))
                base = memory_kib(proc.pid, "VmRSS")
                peak = [0]

                def measure(pid: int = proc.pid, peak: list[int] = peak) -> None:
                    peak[0] = memory_kib(pid, "VmRSS")

                opened = trio.run(_hold_idle, port, IDLE_CONNECTIONS, measure)
                idle[name] = (opened, base, peak[0])
            finally:
                proc.terminate()
                proc.wait(10)
    shutil.rmtree(tmp, ignore_errors=True)

    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    print(f"machine: nproc={os.cpu_count()} cpu={cpu_model} python={platform.python_version()}")
    print(
        f"page: gemini://{HOST}{PAGE}, {SECONDS_PER_CELL:g} s per cell, "
        f"{LOAD_PROCESSES} load processes, one request per TLS connection\n"
    )
    print(f"{'server':<16}{'conc':>6}{'req/s':>10}{'cpu ms/req':>12}{'errors':>8}")
    for name, c, rps, ms, errors in rows:
        print(f"{name:<16}{c:>6}{rps:>10.0f}{ms:>12.2f}{errors:>8}")
    print()
    by = {(n, c): rps for n, c, rps, _, _ in rows}
    for c in CONCURRENCY:
        ratio = by[("capsule-server", c)] / max(by[("jetforce", c)], 1e-9)
        print(f"capsule-server / jetforce at concurrency {c}: {ratio:.2f}x")
    print(f"\n{'server':<16}{'idle conns':>11}{'RSS before MiB':>16}{'RSS with idle MiB':>19}")
    for name, (opened, base, peak_kib) in idle.items():
        print(f"{name:<16}{opened:>11}{base / 1024:>16.1f}{peak_kib / 1024:>19.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
