"""Serve a synthetic Geminispace on loopback, or describe one.

    .venv/bin/python bench/geminispace serve --hosts 4400 --urls 600000 [--port N] [--day D]
        [--addresses K] [--start YYYY-MM-DD]
    .venv/bin/python bench/geminispace describe --hosts 12 --urls 400

``serve`` prints the port and the ``geminibot crawl`` options that reach the space, then
answers until Ctrl-C (or ``--seconds``). ``SIGUSR1`` moves it to the next day (it prints
``day D``): same port, same certificate, so a crawler that pinned it can revisit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import sys
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as ``python bench/geminispace``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "geminispace"

import trio

from geminispace.gemlog import START
from geminispace.server import MAX_ADDRESSES, SpaceServer, address_rules, loopback_address
from geminispace.space import CHANGE_RATE, DOMAIN, Space

#: Longest --seconds accepted (a day).
MAX_SECONDS = 86_400.0


def describe(space: Space) -> dict[str, object]:
    return {
        "hosts": space.hosts,
        "urls": space.urls,
        "seed": space.seed,
        "largest_host_urls": max(space.pages_of(i) for i in range(space.hosts)),
        "behaviours": dict(Counter(space.behaviour(i) for i in range(space.hosts))),
        "policies": dict(Counter(space.robots_kind(i) for i in range(space.hosts))),
        "planted_pages": len(space.plants),
        "gemlogs": sum(space.gemlogs.has(i) for i in range(space.hosts)),
        "gemlog_pages_day_0": sum(len(space.gemlogs.paths(i, 0)) for i in range(space.hosts)),
        "queries": len(space.queries()),
    }


async def serve(space: Space, port: int, day: int, seconds: float, addresses: int = 0) -> None:
    server = SpaceServer(space, day=day)
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    server.port = listeners[0].socket.getsockname()[1]
    for k in range(1, addresses + 1):
        listeners += await trio.open_tcp_listeners(server.port, host=loopback_address(k))
    # SIGUSR1 handled before the first line is printed: a caller may send it once it is.
    with trio.open_signal_receiver(signal.SIGUSR1) as signals:
        print(f"serving {space.hosts} hosts (*.{DOMAIN}), day {day}, on 127.0.0.1:{server.port}")
        rules = " ".join(f"--connect-to '{r}'" for r in address_rules(server.port, addresses))
        print(f"crawl with: {rules} --test-range")
        sys.stdout.flush()
        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:
                for listener in listeners:
                    nursery.start_soon(server.serve, listener)
                async for _ in signals:  # each SIGUSR1: the next day
                    server.day += 1
                    print(f"day {server.day}")
                    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("serve", "describe"))
    parser.add_argument("--hosts", type=int, default=4400)
    parser.add_argument("--urls", type=int, default=600_000)
    parser.add_argument("--seed", type=int, default=1965)
    parser.add_argument("--day", type=int, default=0)
    parser.add_argument(
        "--change-rate", type=float, default=CHANGE_RATE, help="share of /p/ pages changed a day"
    )
    parser.add_argument(
        "--remove-rate", type=float, default=0.0, help="share of /p/ pages gone (51) from day 1"
    )
    parser.add_argument(
        "--start",
        type=dt.date.fromisoformat,
        default=START,
        help=f"the date of day 0, YYYY-MM-DD (gemlog posts of day D are dated D days on;"
        f" default {START})",
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=MAX_SECONDS, help="stop after this")
    parser.add_argument(
        "--addresses", type=int, default=0, help="also serve on 127.0.1.1 ... 127.0.1.K"
    )
    args = parser.parse_args()
    try:
        space = Space(
            args.hosts,
            args.urls,
            args.seed,
            change_rate=args.change_rate,
            remove_rate=args.remove_rate,
            start=args.start,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.command == "describe":
        print(json.dumps(describe(space), indent=2))
        return
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be in (0, {MAX_SECONDS:.0f}]")
    if not 0 <= args.addresses <= MAX_ADDRESSES:
        parser.error(f"--addresses must be 0 to {MAX_ADDRESSES}")
    try:
        trio.run(serve, space, args.port, args.day, args.seconds, args.addresses)
    except* KeyboardInterrupt:  # Ctrl-C (SIGINT): trio raises it inside a nursery's group
        pass


if __name__ == "__main__":
    main()
