"""Servers on 127.0.0.1 for tests and benchmarks (importable as ``loopback`` once
``tests/`` is on ``sys.path``): a free port and a wait until a child process listens on
it; a trio server of a few lines, and the request line it reads."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import trio


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


@asynccontextmanager
async def tcp_server(
    handler: Callable[[trio.SocketStream], Awaitable[None]], host: str = "127.0.0.1"
) -> AsyncIterator[int]:
    """Run ``handler`` for each connection to a free port of ``host`` until the block
    ends; yields the port."""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host=host))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


async def read_request(stream: trio.abc.Stream, limit: int) -> bytes:
    """What the client sends until a CRLF, ``limit`` bytes or the end of its stream."""
    data = b""
    while b"\r\n" not in data and len(data) < limit:
        chunk = await stream.receive_some(limit)
        if not chunk:
            break
        data += chunk
    return data
