"""What the serving commands share (``capsule-server serve``, ``geminibot serve-search``):
their options, the checks of ``--hostname``, ``--certs`` and ``--log`` that give one
line and exit 2, and running a :class:`~geminibot.gemini.server.GeminiServer` until
SIGINT or SIGTERM (or until its access log cannot be written: exit 1)."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, TextIO, TypeVar

import trio

from geminibot import defaults
from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    port_number,
    positive_float,
    positive_int,
)
from geminibot.gemini.accesslog import JsonLinesLog
from geminibot.gemini.server import (
    RATE_BURST,
    RATE_PER_SECOND,
    GeminiServer,
    ServerLimits,
    open_listeners,
)
from geminibot.gemini.urls import DEFAULT_PORT, parse_url
from geminibot.urls import InvalidURL

DEFAULT_HOST = defaults.LISTEN_HOST
"""The address a serving command listens on unless ``--host`` says."""


class HelpWithDefaults(argparse.HelpFormatter):
    """Appends ``(default: X)`` to the help of every option with a default worth showing
    (not None, not False) whose help does not already name its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


def host_name(text: str) -> str:
    """``--hostname``: a host name (IDN or not, with or without dots) or an IPv4 address,
    as a URL would carry it (lower case, punycode)."""
    if not text or any(c in text for c in "/:?#@[]%\\") or text.strip() != text:
        raise CommandError(f"--hostname {text!r}: give a bare host name, such as localhost")
    try:
        return parse_url(f"gemini://{text}/").host
    except InvalidURL as exc:
        raise CommandError(f"--hostname {text!r}: {exc}") from None


def cert_folder(text: str) -> Path:
    """``--certs``: a folder (made when missing), not a file."""
    cert_dir = Path(text)
    if cert_dir.exists() and not cert_dir.is_dir():
        raise CommandError(f"{cert_dir}: not a folder (--certs names the certificate folder)")
    return cert_dir


def open_log(text: str) -> TextIO:
    """``--log``: the file the access log is appended to (the caller closes it)."""
    path = Path(text)
    if path.is_dir():
        raise CommandError(f"{path}: is a folder; --log names a file to append to")
    if not path.parent.is_dir():
        raise CommandError(f"{path.parent}: no such folder (for --log {path})")
    try:
        return open(path, "a", encoding="utf-8")  # the caller closes it
    except OSError as exc:
        raise CommandError(f"{path}: cannot write: {exc.strerror}") from None


Server = TypeVar("Server", bound=GeminiServer)


def make_server(cert_dir: Path, make: Callable[[], Server]) -> Server:
    """``make()``, with a certificate folder that cannot be written as one line, exit 2."""
    try:
        return make()
    except OSError as exc:
        raise CommandError(f"{cert_dir}: cannot make certificates: {exc.strerror}") from None


def run_server(
    server: GeminiServer,
    hosts: list[str],
    port: int,
    prog: str,
    log_name: str,
    ready: Callable[[int], str] | None = None,
) -> None:
    """Serve on ``hosts`` (addresses) and ``port`` until SIGINT or SIGTERM. ``ready``, given
    the port, says what to print once listening (after the default line). A log that could
    not be written stops the server: :class:`CommandError`, exit 1, naming ``log_name``."""
    trio.run(serve_until_signal, server, hosts, port, prog, ready)
    if server.log_failure is not None:
        raise CommandError(
            f"{log_name}: cannot write the access log ({server.log_failure}); stopped",
            EXIT_NEGATIVE,
        )


def _address(listener: trio.SocketListener) -> str:
    host, port = listener.socket.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def serve_until_signal(
    server: GeminiServer,
    hosts: list[str],
    port: int,
    prog: str,
    ready: Callable[[int], str] | None = None,
) -> None:
    try:
        listeners = await open_listeners(hosts, port)
    except OSError as exc:
        where = ", ".join(hosts)
        raise CommandError(f"cannot listen on {where} port {port}: {exc.strerror}") from None
    server.port = listeners[0].socket.getsockname()[1]
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

        async def stop_on_signal() -> None:
            async for signum in signals:
                print(
                    f"{prog}: {signal.Signals(signum).name}, shutting down",
                    file=sys.stderr,
                    flush=True,
                )
                server.shutdown()
                break

        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, listeners)
            names = ", ".join(sorted(server.sites))
            addresses = ", ".join(_address(listener) for listener in listeners)
            print(f"{prog}: serving {names} on {addresses}", file=sys.stderr, flush=True)
            if ready is not None:
                print(ready(server.port), file=sys.stderr, flush=True)
            async with trio.open_nursery() as watcher:
                watcher.start_soon(stop_on_signal)
                await server.stopping.wait()  # a signal, or the log failed
                watcher.cancel_scope.cancel()


def close_log(stream: TextIO) -> None:
    with suppress(OSError):  # a failed write is reported by run_server
        stream.close()


def serve(
    args: argparse.Namespace,
    cert_dir: Path,
    make: Callable[[ServerLimits, JsonLinesLog], GeminiServer],
    prog: str,
    ready: Callable[[int], str] | None = None,
    **limits: Any,
) -> int:
    """Run a serving command: ``make(limits, log)`` the server (limits from ``--rate`` and
    ``--rate-burst`` plus ``limits``, other :class:`ServerLimits` fields by name; the access log
    to ``--log`` or standard output), then serve on ``--host`` (default
    :data:`DEFAULT_HOST`) and ``--port`` as :func:`run_server` does, and close the log."""
    server_limits = ServerLimits(rate_burst=args.rate_burst, rate_per_second=args.rate, **limits)
    log_stream = open_log(args.log) if args.log else sys.stdout
    try:
        server = make_server(cert_dir, lambda: make(server_limits, JsonLinesLog(log_stream)))
        hosts = args.host or [DEFAULT_HOST]
        run_server(server, hosts, args.port, prog, args.log or "standard output", ready)
    finally:
        if args.log:
            close_log(log_stream)
    return EXIT_OK


def add_listen_options(serve: argparse.ArgumentParser) -> None:
    """Where a serving command listens (read by :func:`serve`): ``--host`` (repeatable,
    default :data:`DEFAULT_HOST`) and ``--port`` (default 1965; 0 picks a free one)."""
    serve.add_argument(
        "--host",
        action="append",
        metavar="ADDRESS",
        help=f"address to listen on; repeat for more (default: {DEFAULT_HOST})",
    )
    serve.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help="port (0 picks a free one)"
    )


def add_serve_options(serve: argparse.ArgumentParser, cert_dir: Path) -> None:
    """The options every Gemini server command shares: its certificate folder (default
    ``cert_dir``), its access log and the rate allowed per client address."""
    serve.add_argument("--certs", metavar="DIR", default=str(cert_dir), help="certificate folder")
    serve.add_argument(
        "--log", metavar="FILE", help="append the JSON access log here (default: standard output)"
    )
    serve.add_argument(
        "--rate",
        type=positive_float,
        metavar="N",
        default=RATE_PER_SECOND,
        help="requests/s per client address",
    )
    serve.add_argument(
        "--rate-burst",
        type=positive_int,
        metavar="N",
        default=RATE_BURST,
        help="burst allowed per client address",
    )
