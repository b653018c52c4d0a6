"""``geminibot fetch URL``: a curl for Gemini.

Status and meta go to standard error, the body to standard output (text bodies re-encoded
from their charset to UTF-8 unless ``--raw``; on a terminal, control characters in the text
are shown escaped) or to ``-o FILE`` (the bytes as received, written only for a ``2x``).
A body that is not text is not written to a terminal unless asked with ``-o -`` or
``--raw``, as curl does. ``--input TEXT`` answers a ``10``/``11`` prompt (the URL is asked
again with TEXT as its query); ``--cert FILE [--key FILE]`` is a client certificate for a
``6x`` answer, shown only to the URL's own host. ``--json`` prints one JSON object instead.
A changed certificate is logged as a warning on standard error (see
:mod:`geminibot.gemini.tofu`). Exit codes: 0 for a ``2x`` answer, 1 for any other answer,
a failed fetch or a refused write, 2 for a bad URL, option or file.
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import trio

from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    bounded_number,
    emit_json,
    positive_float,
    terminal_safe,
)
from geminibot.gemini.client import ClientCertificate, GeminiClient, Response
from geminibot.gemini.status import Family
from geminibot.gemini.tofu import (
    FileKnownHosts,
    KnownHosts,
    MemoryKnownHosts,
    NotKnownHostsFile,
)
from geminibot.gemini.urls import SCHEME, parse_url, request_line
from geminibot.net.connect import Resolver, add_connect_to_option, connect_rules
from geminibot.net.errors import FetchError
from geminibot.net.limits import DEFAULT_MAX_BODY_SIZE, DEFAULT_TOTAL_TIMEOUT, Limits
from geminibot.urls import URL, InvalidURL

STDOUT = "-"


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "fetch",
        help="fetch a gemini:// URL (a curl for Gemini)",
        description="Fetch a gemini:// URL: status and meta on stderr, body on stdout.",
    )
    parser.add_argument("url", metavar="URL", help="gemini:// URL (the scheme may be left out)")
    parser.add_argument("--json", action="store_true", help="print one JSON object, no body")
    parser.add_argument(
        "--raw",
        action="store_true",
        help="write the body bytes untouched (also a binary body to a terminal)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the body (bytes as received) to FILE, only for a 2x answer; "
        "'-' is standard output, even a terminal",
    )
    parser.add_argument(
        "--input",
        metavar="TEXT",
        help="answer a 10/11 prompt: ask the URL again with TEXT as its query",
    )
    parser.add_argument(
        "--cert",
        metavar="FILE",
        help="client certificate (PEM) for a 6x answer; shown only to the URL's host",
    )
    parser.add_argument(
        "--key", metavar="FILE", help="its private key (PEM; default: in the --cert file)"
    )
    parser.add_argument(
        "--max-size",
        type=bounded_number(int, 0),
        default=DEFAULT_MAX_BODY_SIZE,
        metavar="N",
        help="largest body in bytes",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TOTAL_TIMEOUT,
        metavar="S",
        help="seconds for the whole fetch, redirects included",
    )
    parser.add_argument("--no-follow", action="store_true", help="do not follow redirects")
    parser.add_argument(
        "--resolve",
        action="append",
        default=[],
        metavar="HOST:PORT:ADDR",
        help="connect to ADDR for HOST:PORT (SNI and pins still use HOST); repeatable",
    )
    add_connect_to_option(parser)
    parser.add_argument(
        "--known-hosts",
        metavar="FILE",
        help="certificate pins file, created if missing in an existing folder; a file that "
        "is not a known-hosts file is refused (default: pins kept in memory only)",
    )
    parser.add_argument(
        "--strict-tofu", action="store_true", help="refuse a certificate that differs from its pin"
    )
    parser.set_defaults(run=run_fetch)


def run_fetch(args: argparse.Namespace) -> int:
    url = args.url if "://" in args.url else "gemini://" + args.url
    try:
        target = parse_url(url)
    except InvalidURL as exc:
        raise CommandError(f"{url}: {exc}") from None
    if args.output not in (None, STDOUT):
        _check_output(args.output)
    client = GeminiClient(
        known_hosts=_known_hosts(args.known_hosts),
        strict_tofu=args.strict_tofu,
        limits=Limits(total_timeout=args.timeout, max_body_size=args.max_size),
        connect_to=Resolver(connect_rules(args.connect_to, args.resolve)),
        client_certificate=_certificate(args, target),
    )
    follow = not args.no_follow
    try:
        response = trio.run(partial(client.fetch, target, follow_redirects=follow))
        if response.family is Family.INPUT and args.input is not None:
            answered = _with_query(response.url, args.input)
            response = trio.run(partial(client.fetch, answered, follow_redirects=follow))
    except InvalidURL as exc:
        raise CommandError(f"{url}: {exc}") from None
    except FetchError as exc:
        if args.json:
            emit_json({"url": url, "error": type(exc).__name__, "message": str(exc)})
        else:
            # The error may quote the server's answer (a malformed header, say).
            print(terminal_safe(f"geminibot: {url}: {type(exc).__name__}: {exc}"), file=sys.stderr)
        return EXIT_NEGATIVE
    if args.json:
        emit_json(_as_json(response))
        if args.output not in (None, STDOUT) and response.family is Family.SUCCESS:
            _write_file(args.output, response.body)
        return EXIT_OK if response.family is Family.SUCCESS else EXIT_NEGATIVE
    return _print(response, raw=args.raw, output=args.output, answered=args.input is not None)


def _known_hosts(path: str | None) -> KnownHosts:
    """The --known-hosts file (kept in memory only without one); one line if unusable."""
    if not path:
        return MemoryKnownHosts()
    try:
        return FileKnownHosts(path)
    except NotKnownHostsFile as exc:
        raise CommandError(f"--known-hosts {path}: {exc}; left alone") from None
    except IsADirectoryError:
        raise CommandError(f"--known-hosts {path}: is a folder") from None
    except OSError as exc:
        raise CommandError(f"--known-hosts {path}: {exc.strerror or exc}") from None


def _check_output(name: str) -> None:
    """Refuse an -o path that cannot be written before anything is fetched."""
    path = Path(name)
    if path.is_dir():
        raise CommandError(f"-o {name}: is a folder")
    folder = path.parent
    if not folder.is_dir():
        raise CommandError(f"-o {name}: no such folder {str(folder)!r} (it is not created)")


def _write_file(name: str, body: bytes) -> None:
    """Write ``body`` to ``name`` through a temporary file: all of it, or nothing."""
    path = Path(name)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise CommandError(f"-o {name}: cannot write: {exc.strerror or exc}", 1) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _certificate(args: argparse.Namespace, target: URL) -> ClientCertificate | None:
    if args.cert is None:
        if args.key is not None:
            raise CommandError("--key needs --cert")
        return None
    certificate = ClientCertificate(args.cert, args.key, frozenset({target.host}))
    try:
        ssl.create_default_context().load_cert_chain(certificate.cert_file, certificate.key_file)
    except FileNotFoundError as exc:
        raise CommandError(f"--cert/--key: no such file {exc.filename or ''}".rstrip()) from None
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
        raise CommandError(f"--cert/--key: not a usable certificate and key ({reason})") from None
    return certificate


def _with_query(url: URL, text: str) -> URL:
    """``url`` asked again with ``text`` as its query (percent-encoded UTF-8)."""
    answered = parse_url(f"{SCHEME}://{url.authority}{url.path}?{quote(text, safe='')}")
    try:
        request_line(answered)
    except InvalidURL as exc:
        raise CommandError(f"--input is too long for this URL: {exc}") from None
    return answered


def _as_json(response: Response) -> dict[str, Any]:
    return {
        "url": str(response.url),
        "status": response.status,
        "meta": response.meta,
        "mime": response.mime.essence if response.mime else None,
        "charset": response.mime.charset if response.mime else None,
        "lang": response.mime.lang if response.mime else None,
        "body_length": len(response.body),
        "certificate": response.certificate,
        "trust": response.trust.value,
        "redirects_followed": len(response.redirects),
        "redirects": [str(u) for u in response.redirects],
        "redirect_url": response.redirect_url,
        "possibly_truncated": response.possibly_truncated,
    }


def _print(response: Response, *, raw: bool, output: str | None, answered: bool) -> int:
    for hop in response.redirects:
        print(terminal_safe(f"redirected from {hop}"), file=sys.stderr)
    print(terminal_safe(f"{response.status} {response.meta}".rstrip()), file=sys.stderr)
    if response.possibly_truncated:
        print("warning: no TLS close_notify, the body may be truncated", file=sys.stderr)
    if response.family is not Family.SUCCESS:
        if response.family is Family.INPUT and not answered:
            print("geminibot: the server asks for input: answer with --input TEXT", file=sys.stderr)
        elif response.family is Family.CLIENT_CERTIFICATE:
            print(
                "geminibot: the server asks for a client certificate: --cert FILE [--key FILE]",
                file=sys.stderr,
            )
        return EXIT_NEGATIVE
    if output not in (None, STDOUT):
        _write_file(output, response.body)
        return EXIT_OK
    mime = response.mime
    is_text = mime is not None and mime.essence.startswith("text/")
    terminal = sys.stdout.isatty()
    if terminal and not is_text and not raw and output is None and response.body:
        essence = mime.essence if mime is not None else "no type"
        print(
            f"geminibot: not writing a binary body ({essence}, {len(response.body)} bytes) "
            "to the terminal: use -o FILE, or -o - to write it anyway",
            file=sys.stderr,
        )
        return EXIT_NEGATIVE
    if raw or not is_text:
        sys.stdout.buffer.write(response.body)
        sys.stdout.buffer.flush()
    else:
        text = response.text()
        sys.stdout.write(terminal_safe(text, keep_lines=True) if terminal else text)
        sys.stdout.flush()
    return EXIT_OK
