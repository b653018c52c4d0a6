"""Servers on 127.0.0.1 for tests and benchmarks (importable as ``loopback`` once
``tests/`` is on ``sys.path``): a free port, a wait until a child process listens on it
and one until its connections are closed; a trio server of a few lines, and the request
line it reads."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import trio


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (for a child to bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, within: float) -> None:
    """Return once ``proc`` (``what``, for the message) itself listens on ``port`` (a
    listening socket of its own in the kernel's tables: a connection that succeeds proves
    less, as another process may hold the port, or a connect to a free port of the
    ephemeral range may meet itself); RuntimeError if it exits first or is not listening
    ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        if listens(proc.pid, port):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {within:g} s")


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port``."""
    tcp = _socket_table("tcp", "tcp6")
    listening = {i for i, (p, state) in tcp.items() if state == "0A" and p == port}
    try:
        return bool(listening & _socket_inodes(str(pid)))
    except OSError:
        return False  # gone meanwhile


def _socket_table(*names: str) -> dict[int, tuple[int, str]]:
    """inode -> (local port, state) of the sockets in ``/proc/net/NAME`` tables."""
    out = {}
    for name in names:
        try:
            with open(f"/proc/net/{name}", encoding="ascii") as fh:
                lines = fh.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if name == "unix":
                out[int(fields[6])] = (0, "unix")
            else:
                out[int(fields[9])] = (int(fields[1].rsplit(":", 1)[1], 16), fields[3])
    return out


def _socket_inodes(pid: str) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def open_connections(port: int) -> int:
    """Connections the process listening on ``port`` of this machine still holds open:
    its sockets other than its listening and Unix ones (a connection the client reset
    is counted until the server closes it, although the kernel's tables no longer list
    it). 0 if nothing listens on ``port``."""
    tcp = _socket_table("tcp", "tcp6")
    listening = {i for i, (p, state) in tcp.items() if state == "0A"}
    ours = {i for i in listening if tcp[i][0] == port}
    if not ours:
        return 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            held = _socket_inodes(proc.name)
        except OSError:
            continue  # gone, or not ours to read
        if held & ours:
            unix = set(_socket_table("unix"))
            return len(held - listening - unix)
    return 0


def wait_connections_closed(port: int, within: float) -> None:
    """Return once the process listening on ``port`` has closed every connection made to
    it (a killed client's included: the server has read its end, and logged it);
    RuntimeError if some are still open after ``within`` seconds."""
    deadline = time.monotonic() + within
    while open_connections(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port}: connections still open after {within:g} s")
        time.sleep(0.01)


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
