"""TLS connections, client and server, driven by trio's readiness waits over OpenSSL's
socket BIO; TCP connections opened the same way.

trio's ``SSLStream`` runs TLS over memory BIOs, moving every record through Python; for a
protocol of one short request per connection (Gemini) that costs more CPU than the
handshake itself. Here OpenSSL reads and writes the non-blocking socket directly, and trio
only waits for readiness (``wait_readable``/``wait_writable``), so timeouts stay cancel
scopes around the awaits, as everywhere else. The server (:mod:`geminibot.gemini.server`),
the client (:mod:`geminibot.gemini.client`) and the benchmarks' load generators share it.

:func:`open_tcp` connects a non-blocking socket the same way (``connect`` and a wait for
writability): no name resolution and no Happy Eyeballs nursery per connection, which
``trio.open_tcp_stream`` spends even on an address literal; the client resolves names
through its DNS cache and tries the addresses itself.

A client whose SNI name is not ASCII: CPython cannot hand the name to the SNI callback, so
it aborts the handshake (an ``internal_error`` alert) and reports the failed decoding to
``sys.unraisablehook``, which prints a traceback on standard error by default: one per
connection, an easy way to flood the server's terminal. While a server handshake runs
here, a hook (installed on the first one, passing everything else on) catches exactly
that report, and :meth:`TLSConnection.do_handshake` raises :class:`InvalidServerName`
instead.
"""

from __future__ import annotations

import errno
import os
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
    """One TLS connection over a connected socket: server side, or client side when
    ``server_hostname`` is given (the SNI name; Python sends none for an IP address), then
    offering ``session`` for resumption if given. Errors surface as ``ssl.SSLError`` or
    ``OSError``.

    ``bytes_sent`` counts the plaintext bytes OpenSSL has taken (written to the socket);
    ``ragged_eof`` is set when the peer closed TCP without a TLS close_notify."""

    def __init__(
        self,
        sock: socket.socket,
        context: ssl.SSLContext,
        server_hostname: str | None = None,
        session: ssl.SSLSession | None = None,
    ) -> None:
        sock.setblocking(False)
        self.tls = context.wrap_socket(
            sock,
            server_side=server_hostname is None,
            server_hostname=server_hostname,
            do_handshake_on_connect=False,
            suppress_ragged_eofs=False,  # receive_some tells them apart (ragged_eof)
            session=session,
        )
        self.bytes_sent = 0
        self.ragged_eof = False

    @property
    def context(self) -> ssl.SSLContext:
        """The context in use (after the handshake: the one the SNI callback chose)."""
        return self.tls.context

    @property
    def session(self) -> ssl.SSLSession | None:
        """The TLS session, for a later connection to offer (client side). Each read costs
        memory that is never freed (see ``GeminiClient._after_handshake``): read it sparingly."""
        return self.tls.session

    @property
    def session_reused(self) -> bool:
        """The handshake resumed the session offered."""
        return bool(self.tls.session_reused)

    def cipher_name(self) -> str:
        """The cipher suite in use, as OpenSSL names it ("" before the handshake)."""
        cipher = self.tls.cipher()
        return "" if cipher is None else cipher[0]

    def peer_certificate(self) -> bytes | None:
        """The peer's certificate (DER), None if it sent none."""
        return self.tls.getpeercert(binary_form=True)

    async def do_handshake(self) -> None:
        """Raises ``ssl.SSLError``, ``OSError`` or (server side) :class:`InvalidServerName`."""
        hook = _server_name_hook() if self.tls.server_side else None
        while True:
            if hook is not None:
                hook.active, hook.caught = True, None
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                wait = trio.lowlevel.wait_readable
            except ssl.SSLWantWriteError:
                wait = trio.lowlevel.wait_writable
            except ssl.SSLError:
                if hook is not None and hook.caught is not None:
                    raise InvalidServerName(hook.caught) from None
                raise
            else:
                return
            finally:
                if hook is not None:
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


async def open_tcp(address: str, port: int) -> socket.socket:
    """A TCP connection to the IP address ``address`` (IPv6 if it has a colon): a
    non-blocking socket with ``TCP_NODELAY`` (a request is one small write that must not
    wait for the ACK of the handshake's last one). Raises ``OSError``; cancelled, it closes
    the socket."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        error = sock.connect_ex((address, port))
        if error == errno.EINPROGRESS:
            await trio.lowlevel.wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        else:
            await trio.lowlevel.checkpoint()
        if error:
            raise OSError(error, os.strerror(error))
    except BaseException:
        sock.close()
        raise
    return sock
