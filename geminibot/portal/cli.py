"""``geminibot portal``: serve Gemini capsules to web browsers over HTTP/1.1 (on trio)."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from typing import Any

import trio

from geminibot import defaults
from geminibot.cliutil import EXIT_OK, CommandError, port_number
from geminibot.gemini.tofu import FileKnownHosts, KnownHosts, MemoryKnownHosts
from geminibot.gemini.urls import parse_url
from geminibot.net.connect import add_connect_to_option, connect_rules
from geminibot.policy.site_policy import Bot
from geminibot.portal import limits as L
from geminibot.portal.app import PortalApp
from geminibot.portal.pages import COMMON_HEADERS
from geminibot.portal.server import PortalServer, connection_capacity, listen
from geminibot.portal.upstream import DEFAULT_AGENT, VIRTUAL_AGENT, Upstream, UpstreamGuard
from geminibot.store.database import open_database
from geminibot.urls import InvalidURL
from geminibot.why.reads import CheckReads

DEFAULT_HOST = defaults.LISTEN_HOST
DEFAULT_PORT = defaults.PORTAL_PORT
#: The limits (:class:`~geminibot.portal.limits.PortalLimits` fields, their defaults
#: and types its own) an option sets: option, field, metavar, help ({} is the default).
LIMIT_OPTIONS = (
    ("--rate", "rate_per_second", "N", "requests/s per web client ({:g})"),
    ("--rate-burst", "rate_burst", "N", "burst per web client ({})"),
    ("--max-upstream", "max_upstream", "N", "Gemini requests in flight at once ({})"),
    (
        "--max-upstream-per-client",
        "max_upstream_per_client",
        "N",
        "... for one web client ({}; behind a proxy, every client is the proxy)",
    ),
    ("--max-wait", "max_wait", "S", "longest wait for a capsule's turn before 503 ({:g} s)"),
    ("--max-body", "max_body_bytes", "BYTES", "largest Gemini body read ({})"),
    ("--send-timeout", "send_timeout", "S", "drop a client that reads nothing for S s ({:g})"),
    ("--body-timeout", "body_timeout", "S", "longest a form body may take to arrive ({:g} s)"),
    (
        "--descriptor-reserve",
        "descriptor_reserve",
        "N",
        "file descriptors kept from web clients for the portal's own work ({})",
    ),
)


def register(commands: Any) -> None:
    p = commands.add_parser(
        "portal",
        help="serve Gemini capsules to web browsers, obeying their webproxy rules",
        description=(
            "An HTTP portal to Geminispace that obeys each capsule's robots.txt (and "
            "robots2.txt, agents.txt) for the 'webproxy' virtual agent. Without --capsule it "
            "shows any gemini:// URL at /gemini/HOST/PATH (or /?url=...); with --capsule it "
            "shows that one capsule at the site root. See docs/portal.md."
        ),
    )
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on ({DEFAULT_HOST})")
    p.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT}; 0: any)"
    )
    p.add_argument("--capsule", metavar="gemini://HOST/", help="serve this one capsule at /")
    p.add_argument(
        "--test-range",
        action="store_true",
        help="local test capsules: reach loopback addresses only (refused otherwise) and "
        "no minimum delay between requests unless a policy sets one",
    )
    add_connect_to_option(p)
    p.add_argument("--known-hosts", metavar="FILE", help="keep certificate pins in FILE")
    p.add_argument(
        "--db",
        metavar="PATH|URL",
        help="a crawl database (SQLite file or postgresql://...): /check then says why a "
        "page is in its index or not",
    )
    p.add_argument("--agent", default=DEFAULT_AGENT, help=f"product token ({DEFAULT_AGENT})")
    p.add_argument(
        "--strict",
        action="store_true",
        help="strict mode: own token, webproxy and * groups must all allow a page",
    )
    defaults = L.PortalLimits()
    for option, field, metavar, what in LIMIT_OPTIONS:
        default = getattr(defaults, field)
        p.add_argument(
            option,
            dest=field,
            type=type(default),
            default=default,
            metavar=metavar,
            help=what.format(default),
        )
    p.add_argument(
        "--min-delay",
        type=float,
        default=None,
        metavar="S",
        help=f"seconds between requests to a capsule with no policy pace "
        f"({L.MIN_HOST_DELAY:g}; 0 with --test-range)",
    )
    p.set_defaults(run=run_portal)


def build(args: argparse.Namespace) -> tuple[PortalApp, UpstreamGuard]:
    rules = connect_rules(args.connect_to)
    capsule = None
    if args.capsule:
        if not args.capsule.lower().startswith("gemini://"):
            raise CommandError(f"--capsule {args.capsule!r}: expected a gemini:// URL")
        try:
            capsule = parse_url(args.capsule)
        except InvalidURL as exc:
            raise CommandError(f"--capsule {args.capsule!r}: {exc}") from None
    min_delay = args.min_delay
    if min_delay is None:
        min_delay = 0.0 if args.test_range else L.MIN_HOST_DELAY
    try:
        limits = L.PortalLimits(
            min_host_delay=min_delay,
            **{field: getattr(args, field) for _, field, _, _ in LIMIT_OPTIONS},
        )
        bot = Bot(args.agent, (VIRTUAL_AGENT,), strict=args.strict)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    known: KnownHosts
    try:
        known = FileKnownHosts(args.known_hosts) if args.known_hosts else MemoryKnownHosts()
    except OSError as exc:
        raise CommandError(f"{args.known_hosts}: cannot read: {exc.strerror}") from None
    guard = UpstreamGuard(rules, test_range=args.test_range)
    upstream = Upstream(limits, guard=guard, bot=bot, known_hosts=known)
    return PortalApp(upstream, capsule=capsule), guard


def run_portal(args: argparse.Namespace) -> int:
    app, guard = build(args)
    if args.db:
        with open_database(args.db):  # (a database that cannot be read is told at start)
            pass
        app.checks = CheckReads.of(args.db)
    trio.run(_serve_until_signal, app, guard, args.host, args.port, _announce(args))
    return EXIT_OK


def _announce(args: argparse.Namespace) -> Callable[[str], None]:
    what = (
        f"the capsule {args.capsule}" if args.capsule else "any gemini:// URL at /gemini/HOST/PATH"
    )

    def say(where: str) -> None:
        print(f"geminibot portal: {where}/ shows {what}; Ctrl-C stops", file=sys.stderr, flush=True)

    return say


async def _serve_until_signal(
    app: PortalApp, guard: UpstreamGuard, host: str, port: int, say: Callable[[str], None]
) -> None:
    limits = app.limits
    try:
        listeners = listen(host, port, limits.send_timeout)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    asgi: Any = app  # the server's ASGI types, which PortalApp satisfies
    capacity = connection_capacity(limits.descriptor_reserve)
    server = PortalServer(asgi, limits, headers=list(COMMON_HEADERS), capacity=capacity)
    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve, listeners, stop)
            for listener in listeners:
                address, bound = listener.socket.getsockname()[:2]
                guard.own.add((address, bound))
            address, bound = listeners[0].socket.getsockname()[:2]
            say(f"http://[{address}]:{bound}" if ":" in address else f"http://{address}:{bound}")
            async for signum in signals:
                name = signal.Signals(signum).name
                print(f"geminibot portal: {name}, stopping", file=sys.stderr, flush=True)
                stop.set()
                break
