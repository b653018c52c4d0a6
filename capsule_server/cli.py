"""The ``capsule-server`` command: serve, certs, report, range."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from capsule_server import compliance_range, report
from capsule_server.certs import FALLBACK_HOST, ensure_certificate, list_certificates
from capsule_server.files import CapsuleConfigError, bundled_capsules, load_capsules
from capsule_server.log import JsonLinesLog
from capsule_server.server import RATE_BURST, RATE_PER_SECOND, CapsuleServer, Limits
from geminibot.cliutil import EXIT_OK, CommandError, Parser, emit_json, run_command

DEFAULT_CERT_DIR = Path("var/capsule-server/certs")
"""Certificates are kept here, relative to the working directory, unless --certs says."""


def capsules_dir(given: str | None) -> Path:
    """DIR as given, else the bundled capsules."""
    if given:
        return Path(given)
    found = bundled_capsules()
    if found is None:
        raise CommandError("no bundled capsules found; give a DIR")
    return found


def _serve(args: argparse.Namespace) -> int:
    directory = capsules_dir(args.dir)
    if not directory.is_dir():
        raise CommandError(f"{directory}: not a folder")
    try:
        capsules = load_capsules(directory)
    except CapsuleConfigError as exc:
        raise CommandError(str(exc)) from None
    if not capsules:
        raise CommandError(f"{directory}: no capsule folders (named like host.test)")
    limits = Limits(rate_burst=args.rate_burst, rate_per_second=args.rate)
    log_stream = open(args.log, "a", encoding="utf-8") if args.log else sys.stdout  # noqa: SIM115
    try:
        server = CapsuleServer(capsules, Path(args.certs), limits, JsonLinesLog(log_stream))
        trio.run(_serve_until_signal, server, args.host, args.port)
    finally:
        if args.log:
            log_stream.close()
    return EXIT_OK


async def _serve_until_signal(server: CapsuleServer, host: str, port: int) -> None:
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    server.port = listeners[0].socket.getsockname()[1]
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, listeners)
            hosts = ", ".join(sorted(server.capsules))
            print(
                f"capsule-server: serving {hosts} on {host}:{server.port}",
                file=sys.stderr,
                flush=True,
            )
            async for signum in signals:
                print(
                    f"capsule-server: {signal.Signals(signum).name}, shutting down",
                    file=sys.stderr,
                    flush=True,
                )
                server.shutdown()
                break


def _certs(args: argparse.Namespace) -> int:
    cert_dir = Path(args.certs)
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
    directory = capsules_dir(args.dir)
    for host in [*sorted(load_capsules(directory)), FALLBACK_HOST]:
        ensure_certificate(Path(args.certs), host)
    return _certs(args)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="capsule-server",
        description="Serve test capsules over Gemini and report which bots broke their policy.",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve a folder of capsules (one per host name)")
    serve.add_argument("dir", nargs="?", metavar="DIR", help="capsules folder (default: bundled)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=1965, help="port (0 picks a free one)")
    serve.add_argument("--certs", default=str(DEFAULT_CERT_DIR), help="certificate folder")
    serve.add_argument("--log", metavar="FILE", help="append the JSON access log here")
    serve.add_argument(
        "--rate", type=float, default=RATE_PER_SECOND, help="requests/s per client address"
    )
    serve.add_argument(
        "--rate-burst", type=int, default=RATE_BURST, help="burst allowed per client address"
    )
    serve.set_defaults(run=_serve)

    certs = commands.add_parser("certs", help="list the certificates with SHA-256 fingerprints")
    certs.add_argument("--certs", default=str(DEFAULT_CERT_DIR), help="certificate folder")
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
