"""``capsule-server range``: serve the capsules and write each client's scorecard.

A bot author points their bot at the range and reads the result. The range serves the
capsules like ``serve`` and keeps each client's access records in memory (every record
also goes to ``--log``, if given). A client is an IPv4 address or an IPv6 /64 network
(:func:`geminibot.net.addresses.address_key`, as the server's limits count clients). A
client that has made no request for ``--idle`` seconds counts as gone: its scorecard
(:mod:`capsule_server.report`, over its requests since it last went idle) is written to
the scorecards folder as ``CLIENT.txt``, ``CLIENT.gmi`` and ``CLIENT.json`` and its
records are dropped. ``SIGUSR1`` writes the scorecard of every client seen at once;
``SIGINT``/``SIGTERM`` write the pending ones and stop. Times are the range's own clock
(the log's times): the range is trusted.

Bounds, so that no client can make the range grow or stall:

- a client's first :data:`MAX_RECORDS_PER_CLIENT` requests are judged; later ones (a bot
  that ignores its ``44`` answers, say) are counted, not kept, and the scorecard's line
  on standard error says how many;
- at most :data:`MAX_RECORDS` records held in all (those waiting to be scored
  included): at the bound the client seen least recently is scored at once and its
  records dropped, and a request that arrives meanwhile is counted, not kept;
- a scorecard is built and written in a worker thread, one at a time, never on the event
  loop that serves the capsules;
- at most :data:`MAX_SCORECARDS` clients' scorecards in the folder from one run: past
  that, the oldest written is deleted with each new one.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
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
from geminibot.net.addresses import address_key

#: Seconds without a request after which a client counts as gone (default of --idle):
#: longer than any pause a polite bot makes on the capsules (their slowest pace is 10 s).
IDLE_SECONDS = 60.0
#: The idle check runs this many times per idle period.
CHECKS_PER_IDLE = 4
DEFAULT_SCORECARDS = Path("var/capsule-server/scorecards")
#: Requests of one client judged (a polite pass over the bundled capsules takes a few
#: hundred); a scorecard of this many takes some seconds to build.
MAX_RECORDS_PER_CLIENT = 5_000
#: Records held in all, those waiting to be scored included (about 300 bytes each).
MAX_RECORDS = 100_000
#: Clients' scorecards (three files each) one run keeps in the folder.
MAX_SCORECARDS = 1_000


_SUFFIX = {"text": "txt"}


class Scorecards:
    """The records of every client and the writing of their scorecards (no I/O but
    files). :meth:`add` runs on the event loop; :meth:`write` is for a worker thread
    (:func:`score`), one at a time."""

    def __init__(
        self,
        policies: dict[str, HostPolicy],
        folder: Path,
        agent: str,
        judge_as: str | None,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
        *,
        max_records_per_client: int = MAX_RECORDS_PER_CLIENT,
        max_records: int = MAX_RECORDS,
        max_scorecards: int = MAX_SCORECARDS,
    ) -> None:
        self.policies = policies
        self.folder = folder
        self.agent = agent
        self.judge_as = judge_as
        self.clock = clock
        self.say = say
        self.max_records_per_client = max_records_per_client
        self.max_records = max_records
        self.max_scorecards = max_scorecards
        #: Records by client, the client seen least recently first.
        self.records: OrderedDict[str, list[AccessRecord]] = OrderedDict()
        #: Records held: in :attr:`records`, or taken and not yet scored.
        self.held = 0
        self.last_seen: dict[str, float] = {}
        #: Requests not kept per client (over :attr:`max_records_per_client`).
        self.dropped: dict[str, int] = {}
        self.pending: set[str] = set()
        #: Clients scored early to make room, with their records: for :func:`score`.
        self.evicted: list[tuple[str, list[AccessRecord], int]] = []
        #: Set when a client is evicted: the scorer need not wait for its next round.
        self.wake = trio.Event()
        self._written: OrderedDict[str, None] = OrderedDict()  # file names, oldest first
        self._writing = threading.Lock()

    def add(self, record: AccessRecord) -> None:
        if record.host is None or record.path is None:
            return  # no request was read: nothing to judge
        client = address_key(record.client)
        kept = self.records.get(client)
        if kept is None:
            kept = self.records[client] = []
        self.records.move_to_end(client)
        self.last_seen[client] = self.clock()
        self.pending.add(client)
        if len(kept) >= self.max_records_per_client or not self._room(client):
            self.dropped[client] = self.dropped.get(client, 0) + 1
            return
        kept.append(record if record.client == client else replace(record, client=client))
        self.held += 1

    def _room(self, client: str) -> bool:
        """Whether one more record may be held; at the bound, the client seen least
        recently (not ``client``) is handed to the scorer, and False until it is scored."""
        if self.held < self.max_records:
            return True
        oldest = next(iter(self.records))
        if oldest != client:
            self.evicted.append((oldest, *self.take(oldest)))
            self.wake.set()
        return False

    def gone(self, idle: float) -> list[str]:
        """Clients with new requests and none for ``idle`` seconds."""
        now = self.clock()
        return sorted(c for c in self.pending if now - self.last_seen[c] >= idle)

    def take(self, client: str) -> tuple[list[AccessRecord], int]:
        """``client``'s records and the count not kept, forgotten here (still
        :attr:`held` until :func:`score` has written them)."""
        records = self.records.pop(client, [])
        self.last_seen.pop(client, None)
        self.pending.discard(client)
        return records, self.dropped.pop(client, 0)

    def copy(self, client: str) -> tuple[list[AccessRecord], int]:
        """``client``'s records so far (kept here) and the count not kept."""
        self.pending.discard(client)
        return list(self.records.get(client, ())), self.dropped.get(client, 0)

    def write(self, client: str, records: list[AccessRecord], dropped: int = 0) -> Path | None:
        """Write the scorecard of ``client``'s ``records`` in every format; the .gmi path
        (None: nothing to judge, or not written)."""
        with self._writing:
            reports = build_report(records, self.policies, self.agent, self.judge_as)
            if not reports:
                return None
            name = client.replace(":", "_").replace("/", "_")
            try:
                self._make_room(name)
                for fmt in FORMATS:
                    target = self.folder / f"{name}.{_SUFFIX.get(fmt, fmt)}"
                    partial = target.with_name(target.name + ".partial")
                    partial.write_text(render(reports[0], fmt) + "\n", encoding="utf-8")
                    os.replace(partial, target)
            except OSError as exc:  # a full disk or a folder gone: say so, keep serving
                self.say(f"capsule-server: {client}: cannot write its scorecard: {exc.strerror}")
                return None
            self._written[name] = None
            self._written.move_to_end(name)
        gmi = self.folder / f"{name}.gmi"
        verdict = "compliant" if reports[0].compliant else "not compliant"
        cut = f" (its first {len(records)} requests; {dropped} more not kept)" if dropped else ""
        self.say(f"capsule-server: {client}: {verdict}, scorecard in {gmi}{cut}")
        return gmi

    def _make_room(self, name: str) -> None:
        """Delete the oldest scorecard written if ``name`` would be one too many."""
        if name in self._written or len(self._written) < self.max_scorecards:
            return
        oldest, _ = self._written.popitem(last=False)
        for fmt in FORMATS:
            (self.folder / f"{oldest}.{_SUFFIX.get(fmt, fmt)}").unlink(missing_ok=True)


_SUFFIX = {"text": "txt"}


Scored = list[tuple[str, list[AccessRecord], int]]
"""Clients to score: (client, records, requests not kept) each."""


async def score(cards: Scorecards, which: Scored, *, taken: bool = True) -> None:
    """Write these scorecards in a worker thread (one at a time: :meth:`Scorecards.write`
    holds a lock), the event loop free meanwhile; records ``taken`` from ``cards``
    (:meth:`Scorecards.take`) stop counting as held once written."""
    for client, records, dropped in which:
        try:
            await trio.to_thread.run_sync(cards.write, client, records, dropped)
        finally:
            if taken:
                cards.held -= len(records)


async def score_gone(cards: Scorecards, idle: float) -> None:
    """Score the clients evicted to make room and those gone for ``idle`` seconds."""
    evicted, cards.evicted = cards.evicted, []
    cards.wake = trio.Event()
    await score(cards, evicted + [(c, *cards.take(c)) for c in cards.gone(idle)])


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
                    every = [(c, *cards.copy(c)) for c in sorted(cards.records)]
                    await score(cards, every, taken=False)
                    continue
                cards.say(f"capsule-server: {signal.Signals(signum).name}, shutting down")
                stopped.set()
                cards.wake.set()
                evicted, cards.evicted = cards.evicted, []
                await score(cards, evicted + [(c, *cards.take(c)) for c in sorted(cards.pending)])
                server.shutdown()
                break


async def _watch_idle(cards: Scorecards, idle: float, stopped: trio.Event) -> None:
    while True:
        with trio.move_on_after(idle / CHECKS_PER_IDLE):
            await cards.wake.wait()
        if stopped.is_set():
            return
        await score_gone(cards, idle)


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
