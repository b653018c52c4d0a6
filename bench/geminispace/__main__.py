"""Serve a synthetic Geminispace on loopback, or describe one.

    .venv/bin/python bench/geminispace serve --hosts 4400 --urls 600000 [--port N] [--day D]
    .venv/bin/python bench/geminispace describe --hosts 12 --urls 400

``serve`` prints the port and the ``geminibot crawl`` options that reach the space, then
answers until Ctrl-C (or ``--seconds``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as ``python bench/geminispace``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "geminispace"

import trio

from geminispace.server import SpaceServer
from geminispace.space import DOMAIN, Space

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
        "queries": len(space.queries()),
    }


async def serve(space: Space, port: int, day: int, seconds: float) -> None:
    server = SpaceServer(space, day=day)
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    server.port = listeners[0].socket.getsockname()[1]
    print(f"serving {space.hosts} hosts (*.{DOMAIN}), day {day}, on 127.0.0.1:{server.port}")
    print(f"crawl with: --connect-to '*.{DOMAIN}:1965:127.0.0.1:{server.port}' --test-range")
    sys.stdout.flush()
    with trio.move_on_after(seconds):
        await server.serve(listeners[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("serve", "describe"))
    parser.add_argument("--hosts", type=int, default=4400)
    parser.add_argument("--urls", type=int, default=600_000)
    parser.add_argument("--seed", type=int, default=1965)
    parser.add_argument("--day", type=int, default=0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=MAX_SECONDS, help="stop after this")
    args = parser.parse_args()
    try:
        space = Space(args.hosts, args.urls, args.seed)
    except ValueError as exc:
        parser.error(str(exc))
    if args.command == "describe":
        print(json.dumps(describe(space), indent=2))
        return
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be in (0, {MAX_SECONDS:.0f}]")
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(serve, space, args.port, args.day, args.seconds)


if __name__ == "__main__":
    main()
