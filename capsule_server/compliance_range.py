"""``capsule-server range``: serve the capsules and keep each client's scorecard.

A bot author points their bot at the range and reads the result. The range serves the
capsules like ``serve`` and keeps each client's requests for the whole run (every record
also goes to ``--log``, if given). A client is :data:`~capsule_server.judge.CLIENT_IS`
(:func:`geminibot.net.addresses.address_key`, as the server's limits count clients). Its
scorecard is :func:`~capsule_server.judge.build_report` over all its requests so far, the
routine ``capsule-server report`` runs on the log, so the two always agree. It is written
to the scorecards folder as ``CLIENT.txt``, ``CLIENT.gmi`` and ``CLIENT.json`` when the
client's session ends (:mod:`capsule_server.sessions`: every wait the range told it is
over and ``--idle`` seconds more passed with no request), and rewritten with everything so
far when a later session ends: one scorecard per client and run, never replaced by a
fragment. ``SIGUSR1`` writes at once every scorecard that lacks requests;
``SIGINT``/``SIGTERM`` write them and stop. Times are the range's own clock (the log's
times): the range is trusted.

Bounds, so that no client can make the range grow or stall:

- a client's first :data:`MAX_RECORDS_PER_CLIENT` requests are judged; later ones (a bot
  that ignores its ``44`` answers, say) are counted, not kept, and the scorecard's line
  on standard error says how many;
- at most :data:`MAX_RECORDS` records held in all (those waiting to be scored
  included): at the bound the client seen least recently is scored at once and its
  records dropped; its scorecard then stands as written (its later requests are
  counted, not judged, and said on stopping), and a request that arrives meanwhile is
  counted, not kept;
- a scorecard is built and written in a worker thread, one at a time, never on the event
  loop that serves the capsules;
- at most :data:`MAX_SCORECARDS` clients' scorecards in the folder from one run: past
  that, the oldest written is deleted with each new one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from capsule_server.files import Capsule, CapsuleConfigError, capsules_dir, load_capsules
from capsule_server.judge import (
    HostPolicy,
    build_report,
    identities,
    identity_names,
    load_policies,
)
from capsule_server.report import FORMATS, add_judging_options, render
from capsule_server.server import CapsuleServer
from capsule_server.sessions import Session, longest_wait
from geminibot.cliutil import (
    EXIT_OK,
    CommandError,
    port_number,
    positive_float,
    positive_int,
    wrapped,
)
from geminibot.gemini.accesslog import AccessRecord, JsonLinesLog
from geminibot.gemini.servecmd import cert_folder, close_log, make_server, open_log
from geminibot.gemini.server import RATE_BURST, RATE_PER_SECOND, ServerLimits
from geminibot.net.addresses import address_key

#: Seconds with no request, once every wait told is over, after which a client's session
#: ends and its scorecard is written (default of --idle).
IDLE_SECONDS = 60.0
DEFAULT_SCORECARDS = Path("var/capsule-server/scorecards")
#: Requests of one client judged (a polite pass over the bundled capsules takes a few
#: hundred); a scorecard of this many takes some seconds to build.
MAX_RECORDS_PER_CLIENT = 5_000
#: Records held in all, those waiting to be scored included (about 300 bytes each).
MAX_RECORDS = 100_000
#: Clients' scorecards (three files each) one run keeps in the folder.
MAX_SCORECARDS = 1_000


_SUFFIX = {"text": "txt"}

Scored = list[tuple[str, list[AccessRecord], int]]
"""Scorecards to write: (client, its requests kept, its requests not kept) each."""


@dataclass(slots=True)
class Client:
    """One client in this run: its requests kept (its first ones), how many more were
    not, its session, and whether its scorecard lacks requests."""

    session: Session
    records: list[AccessRecord] = field(default_factory=list)
    dropped: int = 0
    changed: bool = False


class Scorecards:
    """Every client's requests and the writing of their scorecards (no I/O but files).
    :meth:`add` runs on the event loop; :meth:`write` is for a worker thread
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
        self.idents = identities(agent)
        self.clock = clock
        self.say = say
        self.max_records_per_client = max_records_per_client
        self.max_records = max_records
        self.max_scorecards = max_scorecards
        #: Clients by key, the one seen least recently first.
        self.clients: OrderedDict[str, Client] = OrderedDict()
        #: Records held: kept by :attr:`clients`, or in :attr:`evicted` until written.
        self.held = 0
        #: Clients whose records were dropped to make room (their scorecards stand as
        #: written), with their requests since, oldest first; at most ``max_scorecards``.
        self.closed: OrderedDict[str, int] = OrderedDict()
        #: Clients scored early to make room, with their records: for :func:`score`.
        self.evicted: Scored = []
        #: Set when a client is evicted: the scorer need not wait for its next round.
        self.wake = trio.Event()
        #: Scorecards in the folder (file names, oldest first) and the requests each covers.
        self._written: OrderedDict[str, int] = OrderedDict()
        self._writing = threading.Lock()

    def add(self, record: AccessRecord) -> None:
        if record.host is None or record.path is None:
            return  # no request was read: nothing to judge
        client = address_key(record.client)
        if client in self.closed:
            self.closed[client] += 1
            self.closed.move_to_end(client)
            return
        now = self.clock()
        entry = self.clients.get(client)
        if entry is None:
            entry = self.clients[client] = Client(Session(now))
        self.clients.move_to_end(client)
        entry.session.saw(record, now, self.policies, self.idents)
        entry.changed = True
        if len(entry.records) >= self.max_records_per_client or not self._room(client):
            entry.dropped += 1
            return
        entry.records.append(record)
        self.held += 1

    def _room(self, client: str) -> bool:
        """Whether one more record may be held; at the bound, the client seen least
        recently with records (not ``client``) is handed to the scorer, and False until
        it is scored."""
        if self.held < self.max_records:
            return True
        oldest = next((c for c, e in self.clients.items() if c != client and e.records), None)
        if oldest is not None:
            entry = self.clients.pop(oldest)
            self.evicted.append((oldest, entry.records, entry.dropped))
            self.closed[oldest] = 0
            if len(self.closed) > self.max_scorecards:
                self.closed.popitem(last=False)
            self.wake.set()
        return False

    def gone(self, idle: float) -> list[str]:
        """Clients whose scorecard lacks requests and whose session is over."""
        now = self.clock()
        return sorted(c for c, e in self.clients.items() if e.changed and e.session.over(now, idle))

    def next_end(self, idle: float) -> float:
        """Seconds until a session may end: the earliest of the clients whose scorecard
        lacks requests, or a newcomer's (``idle``)."""
        now = self.clock()
        ends = [e.session.ends(idle) for e in self.clients.values() if e.changed]
        return max(0.0, min(ends, default=now + idle) - now)

    def pending(self) -> list[str]:
        """Clients whose scorecard lacks requests."""
        return sorted(c for c, e in self.clients.items() if e.changed)

    def due(self, clients: Iterable[str]) -> Scored:
        """What to write for these clients: their requests so far (from then on their
        scorecards count as up to date). A client none of whose requests was kept is
        said and forgotten: there is nothing to judge."""
        out: Scored = []
        for client in clients:
            entry = self.clients[client]
            entry.changed = False
            if entry.records:
                out.append((client, list(entry.records), entry.dropped))
                continue
            del self.clients[client]
            self.say(
                f"capsule-server: {client}: {_requests(entry.dropped)} not judged "
                f"(the range held {self.max_records} records)"
            )
        return out

    def write(self, client: str, records: list[AccessRecord], dropped: int = 0) -> Path | None:
        """Write the scorecard of ``client``'s ``records`` in every format; the .gmi path
        (None: nothing to judge, a scorecard of as many requests already written, or not
        written)."""
        name = client.replace(":", "_").replace("/", "_")
        covers = len(records) + dropped
        with self._writing:
            before = self._written.get(name)
            if before is not None and before >= covers:
                return None  # a later call wrote the same requests or more
            reports = build_report(records, self.policies, self.agent, self.judge_as)
            if not reports:
                return None
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
            self._written[name] = covers
            self._written.move_to_end(name)
        gmi = self.folder / f"{name}.gmi"
        verdict = "compliant" if reports[0].compliant else "not compliant"
        done = f"in {gmi}" if before is None else f"in {gmi} updated to {_requests(covers)}"
        cut = f" (its first {len(records)} requests; {dropped} more not kept)" if dropped else ""
        self.say(f"capsule-server: {client}: {verdict}, scorecard {done}{cut}")
        return gmi

    def _make_room(self, name: str) -> None:
        """Delete the oldest scorecard written if ``name`` would be one too many."""
        if name in self._written or len(self._written) < self.max_scorecards:
            return
        oldest, _ = self._written.popitem(last=False)
        for fmt in FORMATS:
            (self.folder / f"{oldest}.{_SUFFIX.get(fmt, fmt)}").unlink(missing_ok=True)

    def say_closed(self) -> None:
        """One line per client whose later requests were not judged (at the bound)."""
        for client, count in self.closed.items():
            if count:
                self.say(
                    f"capsule-server: {client}: {_requests(count)} after its scorecard "
                    f"not judged (the range held {self.max_records} records)"
                )


def _requests(n: int) -> str:
    return f"{n} request{'s' if n != 1 else ''}"


async def score(cards: Scorecards, which: Scored, *, taken: bool = False) -> None:
    """Write these scorecards in a worker thread (one at a time: :meth:`Scorecards.write`
    holds a lock), the event loop free meanwhile; records ``taken`` from ``cards``
    (evicted) stop counting as held once written."""
    for client, records, dropped in which:
        try:
            await trio.to_thread.run_sync(cards.write, client, records, dropped)
        finally:
            if taken:
                cards.held -= len(records)


async def score_gone(cards: Scorecards, idle: float) -> None:
    """Score the clients evicted to make room and those whose session is over."""
    evicted, cards.evicted = cards.evicted, []
    cards.wake = trio.Event()
    await score(cards, evicted, taken=True)
    await score(cards, cards.due(cards.gone(idle)))


def run_range(args: argparse.Namespace) -> int:
    capsules, policies = _load_range(args)
    certs = cert_folder(args.certs)
    folder = _scorecards_folder(Path(args.scorecards))
    cards = Scorecards(policies, folder, args.agent, args.judge_as)
    notes = idle_warning(args.idle, capsules, cards)
    log_stream = open_log(args.log) if args.log else None
    writer = JsonLinesLog(log_stream) if log_stream is not None else None

    def on_record(record: AccessRecord) -> None:
        if writer is not None:
            writer(record)
        cards.add(record)

    limits = ServerLimits(rate_burst=args.rate_burst, rate_per_second=args.rate)
    try:
        server = make_server(certs, lambda: CapsuleServer(capsules, certs, limits, on_record))
        trio.run(_serve, server, cards, args.host, args.port, args.idle, notes)
    finally:
        if log_stream is not None:
            close_log(log_stream)
    return EXIT_OK


def idle_warning(idle: float, capsules: dict[str, Capsule], cards: Scorecards) -> list[str]:
    """The lines of a warning if ``idle`` is shorter than the longest wait a capsule asks
    for (none otherwise)."""
    now = dt.datetime.now(dt.UTC)
    longest, what = longest_wait(capsules, cards.policies, cards.idents, now)
    if idle >= longest:
        return []
    return wrapped(
        f"capsule-server: warning: --idle {idle:g} is shorter than the longest wait a "
        f"capsule asks for, {longest:g} s ({what}): a bot that waits longer than it was "
        f"told gets its scorecard written, then rewritten; --idle {longest:g} or more "
        "avoids that",
        "",
        "  ",
    )


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
    server: CapsuleServer,
    cards: Scorecards,
    host: str,
    port: int,
    idle: float,
    notes: Iterable[str] = (),
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
            for line in notes:
                cards.say(line)
            stopped = trio.Event()
            nursery.start_soon(watch_idle, cards, idle, stopped)
            async for signum in signals:
                if signum == signal.SIGUSR1:
                    await score(cards, cards.due(cards.pending()))
                    continue
                cards.say(f"capsule-server: {signal.Signals(signum).name}, shutting down")
                stopped.set()
                cards.wake.set()
                evicted, cards.evicted = cards.evicted, []
                await score(cards, evicted, taken=True)
                await score(cards, cards.due(cards.pending()))
                cards.say_closed()
                server.shutdown()
                break


async def watch_idle(cards: Scorecards, idle: float, stopped: trio.Event) -> None:
    """Write the scorecards of clients as their sessions end (and at once those evicted),
    until ``stopped``."""
    while True:
        with trio.move_on_after(cards.next_end(idle)):
            await cards.wake.wait()
        if stopped.is_set():
            return
        await score_gone(cards, idle)


def register(commands: Any, default_certs: Path) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "range",
        help="serve the capsules and keep each client's scorecard (one per address)",
        description="Serve the capsules (like 'serve') and keep one scorecard per client "
        "(an IPv4 address or an IPv6 /64) for the whole run: CLIENT.txt, .gmi and .json, "
        "written when its session ends (every wait the range told it over, then --idle "
        "seconds with no request) and rewritten with everything so far after each later "
        "session; at once on SIGUSR1. SIGINT/SIGTERM write them and stop.",
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
        help="seconds with no request, once every wait told is over, that end a client's "
        "session and write its scorecard (default: %(default)g)",
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
