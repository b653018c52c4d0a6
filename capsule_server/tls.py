"""A server-side TLS connection driven by trio's readiness waits over OpenSSL's socket BIO.

trio's ``SSLStream`` runs TLS over memory BIOs, moving every record through Python; for a
protocol of one short request per connection (Gemini) that costs more CPU than the
handshake itself. Here OpenSSL reads and writes the non-blocking socket directly, and trio
only waits for readiness (``wait_readable``/``wait_writable``), so timeouts stay cancel
scopes around the awaits, as everywhere else.
"""

from __future__ import annotations

import socket
import ssl
from contextlib import suppress

import trio

SEND_CHUNK = 16 * 1024
"""Bytes per SSL write (one TLS record)."""


class TLSConnection:
    """One connection (server side unless ``server_hostname`` is given, as the benchmark's
    load generator does). Errors surface as ``ssl.SSLError`` or ``OSError``."""

    def __init__(
        self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str | None = None
    ) -> None:
        sock.setblocking(False)
        self.tls = context.wrap_socket(
            sock,
            server_side=server_hostname is None,
            server_hostname=server_hostname,
            do_handshake_on_connect=False,
        )

    @property
    def context(self) -> ssl.SSLContext:
        """The context in use (after the handshake: the one the SNI callback chose)."""
        return self.tls.context

    async def do_handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                return
            except ssl.SSLWantReadError:
                await trio.lowlevel.wait_readable(self.tls)
            except ssl.SSLWantWriteError:
                await trio.lowlevel.wait_writable(self.tls)

    async def receive_some(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes``; b"" at a clean end (close_notify or EOF)."""
        while True:
            try:
                return self.tls.recv(max_bytes)
            except ssl.SSLWantReadError:
                await trio.lowlevel.wait_readable(self.tls)
            except ssl.SSLWantWriteError:
                await trio.lowlevel.wait_writable(self.tls)
            except ssl.SSLZeroReturnError:
                return b""
            except ssl.SSLEOFError:
                return b""

    async def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            chunk = view[:SEND_CHUNK]
            try:
                sent = self.tls.send(chunk)
            except ssl.SSLWantWriteError:
                await trio.lowlevel.wait_writable(self.tls)
                continue
            except ssl.SSLWantReadError:
                await trio.lowlevel.wait_readable(self.tls)
                continue
            view = view[sent:]
        await trio.lowlevel.checkpoint_if_cancelled()

    def close(self) -> None:
        """Send close_notify (without waiting for the peer's) and close the socket."""
        with suppress(ssl.SSLError, OSError, ValueError):
            self.tls.unwrap()
        with suppress(OSError):
            self.tls.close()
