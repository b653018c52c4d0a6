"""Servers in child processes on 127.0.0.1, for tests and benchmarks (importable as
``loopback`` once ``tests/`` is on ``sys.path``): a free port, and a wait until the child
listens on it."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (for a child to bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, within: float) -> None:
    """Return once ``proc`` (``what``, for the message) accepts connections on
    127.0.0.1:``port``; RuntimeError if it exits first or is not listening ``within``
    seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {within:g} s")
