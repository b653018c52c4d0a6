"""The ``capsule-server`` command: serve, certs, report, range.

Every usage or input error is one line on standard error and exit 2 (argparse's own
errors included: see :class:`geminibot.cliutil.Parser`); every ``--help`` shows the defaults.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from capsule_server import compliance_range, report
from capsule_server.files import Capsule, CapsuleConfigError, capsules_dir, load_capsules
from capsule_server.server import CapsuleServer
from geminibot import __version__
from geminibot.cliutil import (
    EXIT_OK,
    CommandError,
    Parser,
    emit_json,
    positive_float,
    positive_int,
    run_command,
)
from geminibot.gemini.certs import FALLBACK_HOST, ensure_certificate, list_certificates
from geminibot.gemini.servecmd import (
    add_listen_options,
    add_serve_options,
    cert_folder,
    host_name,
    serve,
)
from geminibot.gemini.server import HEADER_TIMEOUT, MAX_PER_ADDRESS

DEFAULT_CERT_DIR = Path("var/capsule-server/certs")
"""Certificates are kept here, relative to the working directory, unless --certs says."""


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


def _serve(args: argparse.Namespace) -> int:
    capsules = _load(args)
    cert_dir = cert_folder(args.certs)
    return serve(
        args,
        cert_dir,
        lambda limits, log: CapsuleServer(capsules, cert_dir, limits, log),
        "capsule-server",
        max_per_address=args.max_per_address,
        header_timeout=args.header_timeout,
    )


def _certs(args: argparse.Namespace) -> int:
    cert_dir = cert_folder(args.certs)
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
    cert_dir = cert_folder(args.certs)
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
    add_listen_options(serve)
    add_serve_options(serve, DEFAULT_CERT_DIR)
    serve.add_argument(
        "--max-per-address",
        type=positive_int,
        metavar="N",
        default=MAX_PER_ADDRESS,
        help="connections open at once per client address (an IPv6 client's /64)",
    )
    serve.add_argument(
        "--header-timeout",
        type=positive_float,
        metavar="SECONDS",
        default=HEADER_TIMEOUT,
        help="from accept to a complete request line (TLS included), then the connection is closed",
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
