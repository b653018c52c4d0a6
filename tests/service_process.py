"""``geminibot serve`` in a child process for tests: its JSON log collected, its config
written for generated capsules on a loopback server."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crawl.served_capsules import capsule_server_thread, generate
from loopback import free_port

#: The search capsule's host name in these tests (resolved to 127.0.0.1 by the test; a
#: Gemini client pins one certificate per name: ``ignition_hosts`` in tests/conftest.py
#: gives each test's ignition a memory of its own).
NAME = "search.test"
#: Bounds (real seconds) on the service's start, its crawl, and its stop.
DEADLINE = 300.0
#: Seconds between two searches through the capsule while the service crawls and indexes:
#: each is a Gemini client's TLS handshake, whose context (ignition makes one a request)
#: loads the system's CA store, about 50 ms of CPU.
SEARCH_EVERY = 0.5


class Service:
    """``geminibot serve`` in a child process; its JSON log lines collected by a thread."""

    def __init__(self, argv: list[str], cwd: Path | None = None, entry_point: bool = False) -> None:
        """``entry_point``: started as an operator does, by the installed ``geminibot``
        script (beside this interpreter), not ``python -m``, which puts ``cwd`` first on
        ``sys.path``."""
        command = (
            [str(Path(sys.executable).parent / "geminibot")]
            if entry_point
            else [sys.executable, "-m", "geminibot"]
        )
        self.proc = subprocess.Popen(
            [*command, "serve", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        self.records: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.records.append(json.loads(line))  # every line is one JSON object

    def wait_for(self, found: Any, what: str, every: float = 0.1) -> Any:
        """``found()``'s first true answer, asked every ``every`` seconds (at most
        DEADLINE); it fails if the service ends first."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            result = found()
            if result:
                return result
            assert self.proc.poll() is None, f"the service ended: {self.proc.stderr.read()}"  # type: ignore[union-attr]
            time.sleep(every)
        raise AssertionError(f"never: {what}")

    def logged(self, component: str, message: str) -> list[dict[str, Any]]:
        return [
            r
            for r in list(self.records)
            if r["component"] == component and str(r.get("message", "")).startswith(message)
        ]


def config(
    tmp_path: Path,
    seeds: list[str],
    port: int,
    db: str | None = None,
    name: str = NAME,
    background_nice: int = 0,
) -> tuple[Path, int, int]:
    """A settings file for the service over ``seeds`` served on ``port``: its path, the
    search capsule's port and the metrics' port. Its background work runs at the test's
    own niceness unless ``background_nice`` says otherwise: at the default 10, beside a
    busy suite's workers at 0, the crawl and the index waited for the CPU far longer than
    they used it."""
    search, metrics = free_port(), free_port()
    text = f"""
[service]
db = "{db or tmp_path / "engine.db"}"
restart_delay = 0.2
stop_timeout = 20.0
background_nice = {background_nice}

[crawl]
seeds = {json.dumps(seeds)}
test_range = true
min_delay = 0.0
connect_to = ["*.test:1965:127.0.0.1:{port}"]

[search]
port = {search}
hostname = "{name}"
certs = "{tmp_path / "certs"}"

[metrics]
port = {metrics}
"""
    path = tmp_path / "engine.toml"
    path.write_text(text)
    return path, search, metrics


def resolve_to_loopback(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """``name`` resolves to 127.0.0.1 in this process (a Gemini client then asks for it by
    name, as it would on a public address)."""
    real = socket.getaddrinfo

    def fake(host: Any, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if host == name else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


@contextlib.contextmanager
def served_capsules(tmp_path: Path) -> Iterator[tuple[list[str], int]]:
    """Two small generated capsules on the capsule server, on a thread of this process
    (the service is the process under test, not the server): (their seeds, its port)."""
    seeds = generate(tmp_path / "capsules", 2, 12)
    with capsule_server_thread(tmp_path / "capsules", tmp_path / "capsule-certs") as port:
        yield seeds, port
