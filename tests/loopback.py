"""Servers on 127.0.0.1 for tests and benchmarks (importable as ``loopback`` once
``tests/`` is on ``sys.path``): a free port, a wait until a child process listens on it
and one until its connections are closed; a trio server of a few lines, and the request
line it reads; a trio server kept on a thread of its own across tests."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import TypeVar

import trio

T = TypeVar("T")

#: Seconds a server on a thread may take to start or stop (a bound, not a measure).
THREAD_BOUND = 60.0


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


def wait_connections_closed(port: int, within: float, every: float = 0.01) -> None:
    """Return once the process listening on ``port`` has closed every connection made to
    it (a killed client's included: the server has read its end, and logged it);
    RuntimeError if some are still open after ``within`` seconds. It looks every ``every``
    seconds (each look reads the kernel's socket tables and every process's files: tens of
    milliseconds of CPU on a busy machine)."""
    deadline = time.monotonic() + within
    while open_connections(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port}: connections still open after {within:g} s")
        time.sleep(every)


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


@contextmanager
def served_on_a_thread(serve: Callable[[], AbstractAsyncContextManager[T]]) -> Iterator[T]:
    """Enter ``serve()`` (a server's async context manager) in a trio run of its own on a
    thread, yield what it yields until the block ends, then leave it there. For a server
    a whole module shares (pytest-trio runs each test in a trio run of its own, and its
    async fixtures are per test); the server's own errors are raised here."""
    started = threading.Event()
    found: list[tuple[T, trio.lowlevel.TrioToken, trio.CancelScope]] = []
    failed: list[BaseException] = []

    async def run() -> None:
        with trio.CancelScope() as scope:
            async with serve() as value:
                found.append((value, trio.lowlevel.current_trio_token(), scope))
                started.set()
                await trio.sleep_forever()

    def thread_main() -> None:
        try:
            trio.run(run)
        except BaseException as exc:  # handed to the test's thread
            failed.append(exc)
        finally:
            started.set()

    thread = threading.Thread(target=thread_main, name="served_on_a_thread", daemon=True)
    thread.start()
    started.wait(THREAD_BOUND)
    if not found:
        thread.join(THREAD_BOUND)
        raise RuntimeError("the server on a thread did not start") from (
            failed[0] if failed else None
        )
    value, token, scope = found[0]
    try:
        yield value
    finally:
        with suppress(trio.RunFinishedError):
            trio.from_thread.run_sync(scope.cancel, trio_token=token)
        thread.join(THREAD_BOUND)
    if failed:
        raise failed[0]


class Held:
    """A port of 127.0.0.1 whose connections are accepted and never answered: a client
    routed there has a request in flight for as long as the block lasts. ``first`` is set
    when the first connection is accepted."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.first = threading.Event()


@contextmanager
def held_connections() -> Iterator[Held]:
    """A :class:`Held` port, its connections accepted on a thread and kept open (unread)
    until the block ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    held = Held(listener.getsockname()[1])
    kept: list[socket.socket] = []

    def accept() -> None:
        with suppress(OSError):  # the listener closed: the block has ended
            while True:
                kept.append(listener.accept()[0])
                held.first.set()

    thread = threading.Thread(target=accept, name="held_connections", daemon=True)
    thread.start()
    try:
        yield held
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(THREAD_BOUND)
        for sock in kept:
            sock.close()
