"""``capsule-server range``: serve the capsules and write each client's scorecard.

A bot author points their bot at the range and reads the result. The range serves the
capsules like ``serve`` and keeps every access record in memory (and in ``--log``, if
given). A client that has made no request for ``--idle`` seconds counts as gone: its
scorecard (:mod:`capsule_server.report`, over all its requests so far) is written to the
scorecards folder as ``CLIENT.txt``, ``CLIENT.gmi`` and ``CLIENT.json``. ``SIGUSR1`` writes
the scorecard of every client seen at once; ``SIGINT``/``SIGTERM`` write the pending ones
and stop. Times are the range's own clock (the log's times): the range is trusted.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from capsule_server.files import Capsule, CapsuleConfigError, capsules_dir, load_capsules
from capsule_server.judge import HostPolicy, build_report, identity_names, load_policies
from capsule_server.report import FORMATS, add_judging_options, render
from capsule_server.server import CapsuleServer
from geminibot.cliutil import EXIT_OK, CommandError, port_number, positive_float, positive_int
from geminibot.gemini.accesslog import AccessRecord, JsonLinesLog
from geminibot.gemini.servecmd import cert_folder, close_log, make_server, open_log
from geminibot.gemini.server import RATE_BURST, RATE_PER_SECOND, ServerLimits

#: Seconds without a request after which a client counts as gone (default of --idle):
#: longer than any pause a polite bot makes on the capsules (their slowest pace is 10 s).
IDLE_SECONDS = 60.0
#: The idle check runs this many times per idle period.
CHECKS_PER_IDLE = 4
DEFAULT_SCORECARDS = Path("var/capsule-server/scorecards")


class Scorecards:
    """The records of every client and the writing of their scorecards (no I/O but files)."""

    def __init__(
        self,
        policies: dict[str, HostPolicy],
        folder: Path,
        agent: str,
        judge_as: str | None,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        self.policies = policies
        self.folder = folder
        self.agent = agent
        self.judge_as = judge_as
        self.clock = clock
        self.say = say
        self.records: dict[str, list[AccessRecord]] = {}
        self.last_seen: dict[str, float] = {}
        self.pending: set[str] = set()

    def add(self, record: AccessRecord) -> None:
        if record.host is None or record.path is None:
            return  # no request was read: nothing to judge
        self.records.setdefault(record.client, []).append(record)
        self.last_seen[record.client] = self.clock()
        self.pending.add(record.client)

    def gone(self, idle: float) -> list[str]:
        """Clients with new requests and none for ``idle`` seconds."""
        now = self.clock()
        return sorted(c for c in self.pending if now - self.last_seen[c] >= idle)

    def write(self, client: str) -> Path | None:
        """Write ``client``'s scorecard in every format; the .gmi path (None: not written)."""
        self.pending.discard(client)
        [report] = build_report(self.records[client], self.policies, self.agent, self.judge_as)
        name = client.replace(":", "_").replace("/", "_")
        gmi = self.folder / f"{name}.gmi"
        try:
            for fmt in FORMATS:
                suffix = {"text": "txt"}.get(fmt, fmt)
                target = self.folder / f"{name}.{suffix}"
                partial = target.with_suffix(f".{suffix}.partial")
                partial.write_text(render(report, fmt) + "\n", encoding="utf-8")
                os.replace(partial, target)
        except OSError as exc:  # a full disk or a folder gone: say so, keep serving
            self.say(f"capsule-server: {client}: cannot write its scorecard: {exc.strerror}")
            return None
        verdict = "compliant" if report.compliant else "not compliant"
        self.say(f"capsule-server: {client}: {verdict}, scorecard in {gmi}")
        return gmi

    def write_all(self, clients: list[str] | None = None) -> None:
        for client in sorted(self.records) if clients is None else clients:
            self.write(client)


def run_range(args: argparse.Namespace) -> int:
    capsules, policies = _load_range(args)
    certs = cert_folder(args.certs)
    folder = _scorecards_folder(Path(args.scorecards))
    cards = Scorecards(policies, folder, args.agent, args.judge_as)
    log_stream = open_log(args.log) if args.log else None
    writer = JsonLinesLog(log_stream) if log_stream is not None else None

    def on_record(record: AccessRecord) -> None:
        if writer is not None:
            writer(record)
        cards.add(record)

    limits = ServerLimits(rate_burst=args.rate_burst, rate_per_second=args.rate)
    try:
        server = make_server(certs, lambda: CapsuleServer(capsules, certs, limits, on_record))
        trio.run(_serve, server, cards, args.host, args.port, args.idle)
    finally:
        if log_stream is not None:
            close_log(log_stream)
    return EXIT_OK


def _load_range(args: argparse.Namespace) -> tuple[dict[str, Capsule], dict[str, HostPolicy]]:
    """The capsules to serve and their policies; a bad folder or identity is one line."""
    directory = capsules_dir(args.dir)
    if args.judge_as is not None and args.judge_as not in identity_names(args.agent):
        known = ", ".join(identity_names(args.agent))
        raise CommandError(f"unknown identity {args.judge_as!r}; known: {known}")
    try:
        capsules = load_capsules(directory)
        policies = load_policies(directory)
    except CapsuleConfigError as exc:
        raise CommandError(str(exc)) from None
    if not capsules:
        raise CommandError(f"{directory}: no capsule folders (named like host.test)")
    return capsules, policies


def _scorecards_folder(folder: Path) -> Path:
    """``folder``, created if need be; one line if it cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(
            f"{folder}: cannot create the scorecards folder: {exc.strerror}"
        ) from None
    if not os.access(folder, os.W_OK):
        raise CommandError(f"{folder}: the scorecards folder is not writable")
    return folder


async def _serve(
    server: CapsuleServer, cards: Scorecards, host: str, port: int, idle: float
) -> None:
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    server.port = listeners[0].socket.getsockname()[1]
    wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
    with trio.open_signal_receiver(*wanted) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, listeners)
            hosts = len(server.capsules)
            cards.say(
                f"capsule-server: range of {hosts} capsules, scorecards in {cards.folder}, "
                f"serving on {host}:{server.port}"
            )
            stopped = trio.Event()
            nursery.start_soon(_watch_idle, cards, idle, stopped)
            async for signum in signals:
                if signum == signal.SIGUSR1:
                    cards.write_all()
                    continue
                cards.say(f"capsule-server: {signal.Signals(signum).name}, shutting down")
                cards.write_all(sorted(cards.pending))
                stopped.set()
                server.shutdown()
                break


async def _watch_idle(cards: Scorecards, idle: float, stopped: trio.Event) -> None:
    while not stopped.is_set():
        with trio.move_on_after(idle / CHECKS_PER_IDLE):
            await stopped.wait()
        cards.write_all(cards.gone(idle))


def register(commands: Any, default_certs: Path) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "range",
        help="serve the capsules and write each client's scorecard when it goes idle",
        description="Serve the capsules (like 'serve') and write each client's scorecard "
        "(CLIENT.txt, .gmi, .json) when it has made no request for --idle seconds, or for "
        "every client on SIGUSR1. SIGINT/SIGTERM write the pending ones and stop.",
    )
    parser.add_argument("dir", nargs="?", metavar="DIR", help="capsules folder (default: bundled)")
    parser.add_argument("--host", default="127.0.0.1", help="address (default: %(default)s)")
    parser.add_argument(
        "--port",
        type=port_number,
        default=1965,
        help="port, 0 picks a free one (default: %(default)s)",
    )
    parser.add_argument(
        "--certs", default=str(default_certs), help="certificate folder (default: %(default)s)"
    )
    parser.add_argument("--log", metavar="FILE", help="also append the JSON access log here")
    parser.add_argument(
        "--scorecards",
        metavar="DIR",
        default=str(DEFAULT_SCORECARDS),
        help="where scorecards are written (default: %(default)s)",
    )
    parser.add_argument(
        "--idle",
        type=positive_float,
        default=IDLE_SECONDS,
        metavar="SECONDS",
        help="a client silent this long is scored (default: %(default)g)",
    )
    parser.add_argument(
        "--rate",
        type=positive_float,
        default=RATE_PER_SECOND,
        help="requests/s per client address (default: %(default)g)",
    )
    parser.add_argument(
        "--rate-burst",
        type=positive_int,
        default=RATE_BURST,
        help="burst per client address (default: %(default)s)",
    )
    add_judging_options(parser)
    parser.set_defaults(run=run_range)
