"""Fixtures for tests that need the bundled capsules served in-process (importable from
``tests/`` like ``certs``): tests/capsule_server/ and tests/interop/ re-export them in their
conftest.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio

from capsule_server import report as report_command
from capsule_server.files import bundled_capsules
from capsule_server.judge import HostPolicy, load_policies
from capsule_server.server import CapsuleServer
from capsule_server.testing import running_server
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import ServerLimits

# Generous limits so that a test suite's bursts are not slowed down; tests of the limits
# themselves start their own server.
TEST_LIMITS = ServerLimits(rate_burst=100_000, rate_per_second=100_000.0, header_timeout=5.0)


@pytest.fixture(scope="session")
def capsules_dir() -> Path:
    found = bundled_capsules()
    assert found is not None
    return found


#: What the judge read of each set of capsule folders (:func:`policies_of`), by the
#: folders' (name, resolved path).
_POLICIES: dict[tuple[tuple[str, Path], ...], dict[str, HostPolicy]] = {}


def policies_of(root: Path) -> dict[str, HostPolicy]:
    """``load_policies(root)``, read once per process for the same capsule folders (``root``
    itself, or a folder of links to them): tests only read the policies, and the judge's
    reading of robots-large.test's 600 KB robots.txt is most of a load (about 0.3 s of
    CPU)."""
    key = tuple(sorted((entry.name, entry.resolve()) for entry in root.iterdir()))
    if key not in _POLICIES:
        _POLICIES[key] = load_policies(root)
    return _POLICIES[key]


def bundled_policies() -> dict[str, HostPolicy]:
    """:func:`policies_of` the bundled capsules."""
    found = bundled_capsules()
    assert found is not None
    return policies_of(found)


@pytest.fixture
def bundled_policies_read_once(monkeypatch: pytest.MonkeyPatch, capsules_dir: Path) -> None:
    """``capsule-server report`` judges by the bundled capsules' policies as read once per
    process (:func:`bundled_policies`; :func:`load_policies` itself, the first time): the
    judge only reads them, and reading robots-large.test's 600 KB robots.txt is most of a
    report's cost."""
    bundled = capsules_dir.resolve()

    def load(directory: Path) -> dict[str, HostPolicy]:
        return bundled_policies() if directory.resolve() == bundled else load_policies(directory)

    monkeypatch.setattr(report_command, "load_policies", load)


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("certs")


@pytest.fixture
def access_log() -> list[AccessRecord]:
    return []


@pytest.fixture
async def server(
    capsules_dir: Path, cert_dir: Path, access_log: list[AccessRecord]
) -> AsyncIterator[CapsuleServer]:
    async with running_server(capsules_dir, cert_dir, TEST_LIMITS, access_log.append) as srv:
        yield srv


@asynccontextmanager
async def cli_process(
    command: str, *args: str, deadline: float
) -> AsyncIterator[tuple[trio.Process, int]]:
    """Start ``capsule-server COMMAND --port 0 ARGS`` as a process and learn its port from
    its banner (within ``deadline`` seconds); it is killed on exit if still running."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "capsule_server.cli", command, "--port", "0", *args],
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    banner = b""
    with trio.fail_after(deadline):
        while not banner.endswith(b"\n"):
            chunk = await proc.stderr.receive_some(1)
            assert chunk, f"capsule-server {command} exited before it started"
            banner += chunk
    port = int(banner.decode().rsplit(":", 1)[1])
    try:
        yield proc, port
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def stderr_until_exit(proc: trio.Process, within: float) -> tuple[str, int]:
    """What a :func:`cli_process` still writes to stderr until it exits (within
    ``within`` seconds), and its exit status."""
    assert proc.stderr is not None
    rest = b""
    with trio.fail_after(within):
        while chunk := await proc.stderr.receive_some(4096):
            rest += chunk
        return rest.decode(), await proc.wait()


@asynccontextmanager
async def serving_on_trio_time(
    root: Path,
    cert_dir: Path,
    limits: ServerLimits | None,
    log: Callable[[AccessRecord], None],
    start: float,
    timespec: str = "auto",
) -> AsyncIterator[CapsuleServer]:
    """Serve ``root`` on trio's (mock) clock: each access record is stamped with trio's
    time as if it had begun at ``start`` (a POSIX time; the compliance report reads the
    log's times) before ``log`` gets it."""
    t0 = trio.current_time()

    def stamped(record: AccessRecord) -> None:
        moment = datetime.fromtimestamp(start + trio.current_time() - t0, UTC)
        record.time = moment.isoformat(timespec=timespec)
        log(record)

    async with running_server(root, cert_dir, limits, stamped, clock=trio.current_time) as srv:
        yield srv
