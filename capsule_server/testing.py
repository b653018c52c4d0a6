"""Start a capsule server in-process on 127.0.0.1 and an ephemeral port (for tests, benches)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import trio

from capsule_server.files import load_capsules
from capsule_server.server import CapsuleServer
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.client import make_ssl_context
from geminibot.gemini.server import ServerLimits, open_listeners


@asynccontextmanager
async def running_server(
    directory: Path,
    cert_dir: Path,
    limits: ServerLimits | None = None,
    log: Callable[[AccessRecord], None] | None = None,
    clock: Callable[[], float] | None = None,
    hosts: Sequence[str] = ("127.0.0.1",),
) -> AsyncIterator[CapsuleServer]:
    """Serve ``directory`` on ``hosts`` (127.0.0.1) and a free port, the same on every
    address; ``server.port`` is the port. Shuts down on exit.

    ``clock`` replaces the server's monotonic clock (e.g. ``trio.current_time``, so a test
    under trio's mock clock sees the rate limiter on the same time as its client)."""
    if clock is None:
        server = CapsuleServer(load_capsules(directory), cert_dir, limits, log)
    else:
        server = CapsuleServer(load_capsules(directory), cert_dir, limits, log, clock=clock)
    listeners = await open_listeners(hosts, 0)
    server.port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, listeners)
        try:
            yield server
        finally:
            server.shutdown()


async def open_tls(
    port: int,
    sni: str,
    *,
    handshake: bool = True,
    host: str = "127.0.0.1",
    context: ssl.SSLContext | None = None,
    local_address: str | None = None,
) -> trio.SSLStream[trio.SocketStream]:
    """A TLS connection to the server with SNI ``sni`` (certificates not checked), from
    ``local_address`` if given (such as 127.0.0.2: another client)."""
    tls = trio.SSLStream(
        await trio.open_tcp_stream(host, port, local_address=local_address),
        context or make_ssl_context(),
        server_hostname=sni,
    )
    if handshake:
        await tls.do_handshake()
    return tls


async def open_stalled(
    port: int, *, host: str = "127.0.0.1", local_address: str | None = None
) -> trio.SocketStream:
    """A TCP connection that has sent the first byte of a TLS hello and nothing more: an
    idle client the server has accepted (it hands over no connection before the client
    has spoken: Linux's ``TCP_DEFER_ACCEPT``)."""
    stream = await trio.open_tcp_stream(host, port, local_address=local_address)
    await stream.send_all(b"\x16")
    return stream


RAW_RESPONSE_LIMIT = 64 * 1024 * 1024
"""raw_request stops reading after this many bytes."""


async def raw_request(
    port: int,
    data: bytes,
    sni: str | None,
    *,
    tls: bool = True,
    host: str = "127.0.0.1",
    context: ssl.SSLContext | None = None,
    local_address: str | None = None,
) -> bytes:
    """Send ``data`` as is (over TLS with SNI ``sni`` unless ``tls`` is False) and return
    everything the server sends until it closes. A reset or TLS error ends the read.
    ``local_address`` (such as 127.0.0.2) makes the request come from another client."""
    stream: trio.abc.Stream = await trio.open_tcp_stream(host, port, local_address=local_address)
    if tls:
        stream = trio.SSLStream(stream, context or make_ssl_context(), server_hostname=sni)
    out = bytearray()
    try:
        if data:
            await stream.send_all(data)
        while len(out) < RAW_RESPONSE_LIMIT:
            chunk = await stream.receive_some(65536)
            if not chunk:
                break
            out += chunk
    except (trio.BrokenResourceError, ssl.SSLError, OSError):
        pass
    finally:
        with suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
            await stream.aclose()
    return bytes(out)


def client_hello(server_name: bytes) -> bytes:
    """The first flight of a TLS client whose SNI name is ``server_name``, raw bytes and
    all: Python's ssl refuses to send a non-ASCII name, so the hello it makes for a
    placeholder of the same length is patched (the server reads the name before anything
    could notice). Send it over plain TCP."""
    placeholder = b"x" * (len(server_name) - 5) + b".test"
    outgoing = ssl.MemoryBIO()
    tls = make_ssl_context().wrap_bio(
        ssl.MemoryBIO(), outgoing, server_hostname=placeholder.decode()
    )
    with suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    if hello.count(placeholder) != 1:
        raise ValueError("the placeholder name is not in the hello exactly once")
    return hello.replace(placeholder, server_name)


def has_ipv6_loopback() -> bool:
    """True if this machine can listen on ::1 (tests of IPv6 listeners skip otherwise)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True
