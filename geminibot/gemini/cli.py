"""``geminibot fetch URL``: a curl for Gemini.

Status and meta go to standard error, the body to standard output (text bodies re-encoded
from their charset to UTF-8 unless ``--raw``). ``--json`` prints one JSON object instead.
A changed certificate is logged as a warning on standard error (see
:mod:`geminibot.gemini.tofu`). Exit codes: 0 for a ``2x`` answer, 1 for any other answer or a failed fetch, 2 for a bad
URL or option.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import Any

import trio

from geminibot.cliutil import EXIT_NEGATIVE, EXIT_OK, CommandError, emit_json
from geminibot.gemini.client import GeminiClient, Response
from geminibot.gemini.status import Family
from geminibot.gemini.tofu import FileKnownHosts, KnownHosts, MemoryKnownHosts
from geminibot.net.connect import ConnectToError, Resolver, parse_connect_to, parse_resolve
from geminibot.net.errors import FetchError
from geminibot.net.limits import DEFAULT_MAX_BODY_SIZE, DEFAULT_TOTAL_TIMEOUT, Limits
from geminibot.urls import InvalidURL


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "fetch",
        help="fetch a gemini:// URL (a curl for Gemini)",
        description="Fetch a gemini:// URL: status and meta on stderr, body on stdout.",
    )
    parser.add_argument("url", metavar="URL", help="gemini:// URL (the scheme may be left out)")
    parser.add_argument("--json", action="store_true", help="print one JSON object, no body")
    parser.add_argument("--raw", action="store_true", help="write the body bytes untouched")
    parser.add_argument(
        "--max-size",
        type=int,
        default=DEFAULT_MAX_BODY_SIZE,
        metavar="N",
        help="largest body in bytes",
    )
    parser.add_argument(
        "--timeout",
        type=float,
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
    parser.add_argument(
        "--connect-to",
        action="append",
        default=[],
        metavar="HOST:PORT:ADDR:PORT2",
        help="connect to ADDR:PORT2 for HOST:PORT; repeatable",
    )
    parser.add_argument(
        "--known-hosts",
        metavar="FILE",
        help="certificate pins file, created if missing (default: pins kept in memory only)",
    )
    parser.add_argument(
        "--strict-tofu", action="store_true", help="refuse a certificate that differs from its pin"
    )
    parser.set_defaults(run=run_fetch)


def _resolver(args: argparse.Namespace) -> Resolver:
    """--connect-to rules first, then --resolve rules: the first that matches wins."""
    try:
        rules = [parse_connect_to(v) for v in args.connect_to]
        rules += [parse_resolve(v) for v in args.resolve]
    except ConnectToError as exc:
        raise CommandError(str(exc)) from None
    return Resolver(rules)


def run_fetch(args: argparse.Namespace) -> int:
    if args.max_size < 0 or args.timeout <= 0:
        raise CommandError("--max-size must be >= 0 and --timeout > 0")
    url = args.url if "://" in args.url else "gemini://" + args.url
    store: KnownHosts = MemoryKnownHosts()
    if args.known_hosts:
        try:
            store = FileKnownHosts(args.known_hosts)
        except OSError as exc:
            raise CommandError(f"--known-hosts {args.known_hosts}: {exc.strerror or exc}") from None
    client = GeminiClient(
        known_hosts=store,
        strict_tofu=args.strict_tofu,
        limits=Limits(total_timeout=args.timeout, max_body_size=args.max_size),
        connect_to=_resolver(args),
    )
    try:
        response = trio.run(partial(client.fetch, url, follow_redirects=not args.no_follow))
    except InvalidURL as exc:
        raise CommandError(f"{url}: {exc}") from None
    except FetchError as exc:
        if args.json:
            emit_json({"url": url, "error": type(exc).__name__, "message": str(exc)})
        else:
            print(f"geminibot: {url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_NEGATIVE
    if args.json:
        emit_json(_as_json(response))
    else:
        _print(response, raw=args.raw)
    return EXIT_OK if response.family is Family.SUCCESS else EXIT_NEGATIVE


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


def _print(response: Response, *, raw: bool) -> None:
    for hop in response.redirects:
        print(f"redirected from {hop}", file=sys.stderr)
    print(f"{response.status} {response.meta}".rstrip(), file=sys.stderr)
    if response.possibly_truncated:
        print("warning: no TLS close_notify, the body may be truncated", file=sys.stderr)
    mime = response.mime
    if raw or mime is None or not mime.essence.startswith("text/"):
        sys.stdout.buffer.write(response.body)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(response.text())
        sys.stdout.flush()
