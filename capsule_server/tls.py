"""A server-side TLS connection driven by trio's readiness waits over OpenSSL's socket BIO.

trio's ``SSLStream`` runs TLS over memory BIOs, moving every record through Python; for a
protocol of one short request per connection (Gemini) that costs more CPU than the
handshake itself. Here OpenSSL reads and writes the non-blocking socket directly, and trio
only waits for readiness (``wait_readable``/``wait_writable``), so timeouts stay cancel
scopes around the awaits, as everywhere else.

A client whose SNI name is not ASCII: CPython cannot hand the name to the SNI callback, so
it aborts the handshake (an ``internal_error`` alert) and reports the failed decoding to
``sys.unraisablehook``, which prints a traceback on standard error by default: one per
connection, an easy way to flood the server's terminal. While a handshake runs here, a
hook (installed on the first handshake, passing everything else on) catches exactly that
report, and :meth:`TLSConnection.do_handshake` raises :class:`InvalidServerName` instead.
"""

from __future__ import annotations

import socket
import ssl
import sys
from contextlib import suppress
from typing import Any

import trio

SEND_CHUNK = 16 * 1024
"""Bytes per SSL write (one TLS record)."""


class InvalidServerName(Exception):
    """The client's SNI name is not ASCII (RFC 6066 asks for A-labels); the handshake was
    aborted. ``name`` is the raw name with non-ASCII bytes escaped."""

    def __init__(self, raw: bytes) -> None:
        self.name = raw[:100].decode("ascii", "backslashreplace")
        super().__init__(f"SNI name is not ASCII: {self.name}")


class _ServerNameHook:
    """``sys.unraisablehook`` wrapper: keeps CPython's report of an undecodable SNI name
    (raised inside ``do_handshake``, object = the raw name) for the handshake in progress."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous
        self.active = False
        self.caught: bytes | None = None

    def __call__(self, args: Any) -> None:
        if self.active and args.exc_type is UnicodeDecodeError and isinstance(args.object, bytes):
            self.caught = args.object
            return
        self.previous(args)


def _server_name_hook() -> _ServerNameHook:
    hook = sys.unraisablehook
    if not isinstance(hook, _ServerNameHook):  # first use, or someone replaced it since
        hook = _ServerNameHook(hook)
        sys.unraisablehook = hook
    return hook


class TLSConnection:
    """One connection (server side unless ``server_hostname`` is given, as the benchmark's
    load generator does). Errors surface as ``ssl.SSLError`` or ``OSError``.

    ``bytes_sent`` counts the plaintext bytes OpenSSL has taken (written to the socket);
    ``ragged_eof`` is set when the peer closed TCP without a TLS close_notify."""

    def __init__(
        self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str | None = None
    ) -> None:
        sock.setblocking(False)
        self.tls = context.wrap_socket(
            sock,
            server_side=server_hostname is None,
            server_hostname=server_hostname,
            do_handshake_on_connect=False,
            suppress_ragged_eofs=False,  # receive_some tells them apart (ragged_eof)
        )
        self.bytes_sent = 0
        self.ragged_eof = False

    @property
    def context(self) -> ssl.SSLContext:
        """The context in use (after the handshake: the one the SNI callback chose)."""
        return self.tls.context

    async def do_handshake(self) -> None:
        """Raises ``ssl.SSLError``, ``OSError`` or :class:`InvalidServerName`."""
        hook = _server_name_hook()
        while True:
            hook.active, hook.caught = True, None
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                wait = trio.lowlevel.wait_readable
            except ssl.SSLWantWriteError:
                wait = trio.lowlevel.wait_writable
            except ssl.SSLError:
                if hook.caught is not None:
                    raise InvalidServerName(hook.caught) from None
                raise
            else:
                return
            finally:
                hook.active = False
            await wait(self.tls)

    async def receive_some(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes``; b"" at the end (close_notify, or EOF: see ``ragged_eof``)."""
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
                self.ragged_eof = True
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
            self.bytes_sent += sent
            view = view[sent:]
        await trio.lowlevel.checkpoint_if_cancelled()

    def close(self) -> None:
        """Send close_notify (without waiting for the peer's) and close the socket."""
        with suppress(ssl.SSLError, OSError, ValueError):
            self.tls.unwrap()
        with suppress(OSError):
            self.tls.close()
