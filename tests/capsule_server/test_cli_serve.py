"""``capsule-server serve`` as a real process: finds the bundled capsules, logs, and shuts
down gracefully on SIGINT and SIGTERM. Also the bounded 1,000-connection load test."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from capsule_server.cli import main
from capsule_server.testing import open_tls, raw_request
from geminibot.gemini.client import make_ssl_context

LOAD_CONNECTIONS = 1000
LOAD_DEADLINE = 90.0
"""The whole load test must finish within this many seconds (a bound, not a speed test)."""


@asynccontextmanager
async def serve_process(*args: str) -> AsyncIterator[tuple[trio.Process, int]]:
    """Start ``capsule-server serve --port 0 ARGS`` and learn its port from its banner."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "capsule_server.cli", "serve", "--port", "0", *args],
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    banner = b""
    with trio.fail_after(30):
        while not banner.endswith(b"\n"):
            chunk = await proc.stderr.receive_some(1)
            assert chunk, "server exited before it started"
            banner += chunk
    port = int(banner.decode().rsplit(":", 1)[1])
    try:
        yield proc, port
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def rss_peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_serve_logs_and_stops_on_signal(tmp_path: Path, signum: signal.Signals) -> None:
    log = tmp_path / "access.jsonl"
    async with serve_process("--certs", str(tmp_path / "certs"), "--log", str(log)) as (
        proc,
        port,
    ):
        response = await raw_request(port, b"gemini://maze.test/\r\n", "maze.test")
        assert response.startswith(b"20 text/gemini")
        proc.send_signal(signum)
        with trio.fail_after(15):
            assert await proc.wait() == 0
    [record] = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["host"] == "maze.test" and record["status"] == 20
    assert sorted((tmp_path / "certs").glob("*.crt"))  # made on first start


def test_serve_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(tmp_path / "missing")]) == 2
    assert main(["serve", str(tmp_path)]) == 2  # no capsule folders
    assert "no capsule folders" in capsys.readouterr().err
    bad = tmp_path / "bad.test"
    bad.mkdir()
    (bad / "serve.toml").write_text("[maze]\nprefix = 'x'\n")
    assert main(["serve", str(tmp_path)]) == 2


async def test_thousand_concurrent_connections(tmp_path: Path) -> None:
    """1,000 TLS connections open at once, then all send their request together: every
    one is answered (20 with the right body) or refused with 44; the server lives on."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 3 * LOAD_CONNECTIONS  # our sockets, and the server's (it inherits the limit)
    if soft < need:
        if hard < need:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    try:
        await _load(tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def _load(tmp_path: Path) -> None:
    expected_body = (Path(__file__).parents[2] / "capsules/va-groups.test/index.gmi").read_bytes()
    args = ("--certs", str(tmp_path / "certs"), "--log", str(tmp_path / "log"))
    async with serve_process(*args, "--rate-burst", "100000", "--rate", "100000") as (proc, port):
        ctx = make_ssl_context()
        go = trio.Event()
        results: list[bytes | str] = []
        connected = 0
        all_connected = trio.Event()

        async def one() -> None:
            nonlocal connected
            try:
                tls = await open_tls(port, "va-groups.test", context=ctx)
                connected += 1
                if connected == LOAD_CONNECTIONS:
                    all_connected.set()
                await go.wait()
                await tls.send_all(b"gemini://va-groups.test/\r\n")
                data = b""
                while chunk := await tls.receive_some(65536):
                    data += chunk
                await tls.aclose()
                results.append(data)
            except (OSError, trio.BrokenResourceError) as exc:
                results.append(f"error: {exc!r}")
                all_connected.set()

        with trio.fail_after(LOAD_DEADLINE):
            async with trio.open_nursery() as nursery:
                for _ in range(LOAD_CONNECTIONS):
                    nursery.start_soon(one)
                await all_connected.wait()
                go.set()
        answered = sum(
            1 for r in results if r == b"20 text/gemini; charset=utf-8\r\n" + expected_body
        )
        refused = sum(1 for r in results if isinstance(r, bytes) and r.startswith(b"44 "))
        peak = rss_peak_kib(proc.pid)
        print(
            f"\nload: {answered} answered, {refused} refused with 44, peak RSS {peak / 1024:.1f} MiB"
        )
        assert connected == LOAD_CONNECTIONS
        assert answered + refused == LOAD_CONNECTIONS, [
            r for r in results if not isinstance(r, bytes)
        ][:3]
        assert answered > 0
        assert proc.returncode is None  # no crash
        again = await raw_request(port, b"gemini://va-groups.test/\r\n", "va-groups.test")
        assert again.startswith(b"20 ")
        assert peak < 512 * 1024  # a sanity bound on memory, not a speed claim
