"""The ``capsule-server`` command: serve, certs, report, range.

Every usage or input error is one line on standard error and exit 2 (argparse's own
errors included: see :class:`geminibot.cliutil.Parser`); every ``--help`` shows the defaults.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import TextIO

import trio

from capsule_server import compliance_range, report
from capsule_server.certs import FALLBACK_HOST, ensure_certificate, list_certificates
from capsule_server.files import Capsule, CapsuleConfigError, bundled_capsules, load_capsules
from capsule_server.log import JsonLinesLog
from capsule_server.server import (
    MAX_PER_ADDRESS,
    RATE_BURST,
    RATE_PER_SECOND,
    CapsuleServer,
    Limits,
    open_listeners,
)
from geminibot import __version__
from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    Parser,
    emit_json,
    run_command,
)
from geminibot.gemini.urls import DEFAULT_PORT, parse_url
from geminibot.urls import InvalidURL

DEFAULT_CERT_DIR = Path("var/capsule-server/certs")
"""Certificates are kept here, relative to the working directory, unless --certs says."""

DEFAULT_HOST = "127.0.0.1"
"""The address ``serve`` listens on unless ``--host`` says."""


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0-65535)")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a number above 0")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return value


def capsules_dir(given: str | None) -> Path:
    """DIR as given (it must be a folder), else the bundled capsules."""
    if given:
        directory = Path(given)
        if not directory.is_dir():
            raise CommandError(f"{directory}: not a folder")
        return directory
    found = bundled_capsules()
    if found is None:
        raise CommandError("no bundled capsules found; give a DIR")
    return found


def host_name(text: str) -> str:
    """``--hostname``: a host name (IDN or not, with or without dots) or an IPv4 address,
    as a URL would carry it (lower case, punycode)."""
    if not text or any(c in text for c in "/:?#@[]%\\") or text.strip() != text:
        raise CommandError(f"--hostname {text!r}: give a bare host name, such as localhost")
    try:
        return parse_url(f"gemini://{text}/").host
    except InvalidURL as exc:
        raise CommandError(f"--hostname {text!r}: {exc}") from None


def _load(args: argparse.Namespace) -> dict[str, Capsule]:
    directory = capsules_dir(args.dir)
    try:
        if args.hostname is not None:
            if not args.dir:
                raise CommandError("--hostname needs DIR: the capsule folder to serve as that host")
            host = host_name(args.hostname)
            return {host: Capsule(host, directory)}
        capsules = load_capsules(directory)
    except CapsuleConfigError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"{exc.filename or directory}: cannot read: {exc.strerror}") from None
    if not capsules:
        raise CommandError(
            f"{directory}: no capsule folders (host.test, localhost); "
            "for one capsule: --hostname NAME"
        )
    return capsules


def _cert_dir(text: str) -> Path:
    cert_dir = Path(text)
    if cert_dir.exists() and not cert_dir.is_dir():
        raise CommandError(f"{cert_dir}: not a folder (--certs names the certificate folder)")
    return cert_dir


def _open_log(text: str) -> TextIO:
    path = Path(text)
    if path.is_dir():
        raise CommandError(f"{path}: is a folder; --log names a file to append to")
    if not path.parent.is_dir():
        raise CommandError(f"{path.parent}: no such folder (for --log {path})")
    try:
        return open(path, "a", encoding="utf-8")  # closed by _serve
    except OSError as exc:
        raise CommandError(f"{path}: cannot write: {exc.strerror}") from None


def _make_server(
    capsules: dict[str, Capsule], cert_dir: Path, limits: Limits, log: TextIO
) -> CapsuleServer:
    try:
        return CapsuleServer(capsules, cert_dir, limits, JsonLinesLog(log))
    except OSError as exc:
        raise CommandError(f"{cert_dir}: cannot make certificates: {exc.strerror}") from None


def _serve(args: argparse.Namespace) -> int:
    capsules = _load(args)
    cert_dir = _cert_dir(args.certs)
    limits = Limits(
        rate_burst=args.rate_burst,
        rate_per_second=args.rate,
        max_per_address=args.max_per_address,
    )
    log_stream = _open_log(args.log) if args.log else sys.stdout
    try:
        server = _make_server(capsules, cert_dir, limits, log_stream)
        trio.run(_serve_until_signal, server, args.host or [DEFAULT_HOST], args.port)
    finally:
        if args.log:
            with suppress(OSError):  # a failed write is reported below
                log_stream.close()
    if server.log_failure is not None:
        raise CommandError(
            f"{args.log or 'standard output'}: cannot write the access log "
            f"({server.log_failure}); stopped",
            EXIT_NEGATIVE,
        )
    return EXIT_OK


def _address(listener: trio.SocketListener) -> str:
    host, port = listener.socket.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _serve_until_signal(server: CapsuleServer, hosts: list[str], port: int) -> None:
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
                    f"capsule-server: {signal.Signals(signum).name}, shutting down",
                    file=sys.stderr,
                    flush=True,
                )
                server.shutdown()
                break

        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, listeners)
            names = ", ".join(sorted(server.capsules))
            addresses = ", ".join(_address(listener) for listener in listeners)
            print(
                f"capsule-server: serving {names} on {addresses}",
                file=sys.stderr,
                flush=True,
            )
            async with trio.open_nursery() as watcher:
                watcher.start_soon(stop_on_signal)
                await server.stopping.wait()  # a signal, or the log failed
                watcher.cancel_scope.cancel()


def _certs(args: argparse.Namespace) -> int:
    cert_dir = _cert_dir(args.certs)
    infos = list_certificates(cert_dir)
    if args.json:
        for info in infos:
            emit_json(info.as_dict())
    else:
        if not infos:
            print(f"no certificates in {cert_dir} (they are made on the first 'serve')")
        for info in infos:
            print(f"{info.host}  SHA256:{info.sha256}  until {info.not_after.date()}")
    return EXIT_OK


def _make_certs(args: argparse.Namespace) -> int:
    """Make (or keep) certificates for every capsule of DIR without serving."""
    args.hostname = None
    cert_dir = _cert_dir(args.certs)
    try:
        for host in [*sorted(_load(args)), FALLBACK_HOST]:
            ensure_certificate(cert_dir, host)
    except OSError as exc:
        raise CommandError(f"{cert_dir}: cannot make certificates: {exc.strerror}") from None
    return _certs(args)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="capsule-server",
        description="Serve test capsules over Gemini and report which bots broke their policy.",
    )
    parser.add_argument("--version", action="version", version=f"capsule-server {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="serve a folder of capsules (one per host name), or one capsule",
        description=(
            "Serve DIR: each sub-folder named like a host (host.test, localhost) is a "
            "capsule for that host; with --hostname NAME, DIR itself is the one capsule."
        ),
    )
    serve.add_argument("dir", nargs="?", metavar="DIR", help="capsules folder (default: bundled)")
    serve.add_argument(
        "--hostname",
        metavar="NAME",
        help="serve DIR itself as the capsule of host NAME, e.g. localhost "
        "(default: a capsule per host-named sub-folder)",
    )
    serve.add_argument(
        "--host",
        action="append",
        metavar="ADDRESS",
        help=f"address to listen on; repeat for more (default: {DEFAULT_HOST})",
    )
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT, help="port (0 picks a free one)")
    serve.add_argument(
        "--certs", metavar="DIR", default=str(DEFAULT_CERT_DIR), help="certificate folder"
    )
    serve.add_argument(
        "--log", metavar="FILE", help="append the JSON access log here (default: standard output)"
    )
    serve.add_argument(
        "--rate",
        type=_positive_float,
        metavar="N",
        default=RATE_PER_SECOND,
        help="requests/s per client address",
    )
    serve.add_argument(
        "--rate-burst",
        type=_positive_int,
        metavar="N",
        default=RATE_BURST,
        help="burst allowed per client address",
    )
    serve.add_argument(
        "--max-per-address",
        type=_positive_int,
        metavar="N",
        default=MAX_PER_ADDRESS,
        help="connections open at once per client address (an IPv6 client's /64)",
    )
    serve.set_defaults(run=_serve)

    certs = commands.add_parser("certs", help="list the certificates with SHA-256 fingerprints")
    certs.add_argument(
        "--certs", metavar="DIR", default=str(DEFAULT_CERT_DIR), help="certificate folder"
    )
    certs.add_argument("--json", action="store_true", help="one JSON object per certificate")
    certs.add_argument(
        "--make",
        dest="dir",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="first make missing certificates for the capsules of DIR (default: bundled)",
    )
    certs.set_defaults(run=_certs_command)

    report.register(commands)
    compliance_range.register(commands, DEFAULT_CERT_DIR)
    return parser


def _certs_command(args: argparse.Namespace) -> int:
    return _make_certs(args) if args.dir is not None else _certs(args)


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
