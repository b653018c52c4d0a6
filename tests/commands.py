"""The project's commands run as a person runs them, in a child process (importable as
``commands``: ``tests/conftest.py`` puts this folder on ``sys.path``; the benchmarks put it
there themselves)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_module(
    module: str, *args: str, timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS...`` with its output captured as text; it is killed (and
    the test fails) after ``timeout`` seconds."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


def start_serve_search(
    db: Path, certs: Path, *options: str
) -> tuple[subprocess.Popen[str], int, str]:
    """``geminibot serve-search --db DB --port 0 --certs CERTS OPTIONS...`` in a child
    process, once it listens: the process (standard error a pipe, read past its first line),
    the port it chose and that first line (``serve-search: serving NAMES on ADDRESS:PORT``).
    A server that does not start is killed: RuntimeError with what it said."""
    argv = [sys.executable, "-m", "geminibot", "serve-search", "--db", str(db), "--port", "0"]
    proc = subprocess.Popen(
        [*argv, "--certs", str(certs), *options], stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    banner = proc.stderr.readline()
    if " serving " not in banner:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"serve-search did not start: {banner}")
    return proc, int(banner.rsplit(":", 1)[1]), banner
