"""The scheduler's CPU per request, by how many hosts share an address: ``--hosts`` hosts
with work on ``--addresses`` addresses, ``--workers`` of them out at a time, each given
back after one request (its pace started and finished, as the downloader does) and the
next one taken, on a clock that moves 1 ms a request. No network, no store: only
:class:`~geminibot.crawl.scheduler.Scheduler` and its politeness.

    nice -n 19 .venv/bin/python bench/scheduler_speed.py [--hosts 4400]
        [--addresses 10,100,1000] [--requests 100000] [--tree PATH ...]

``--tree``: also run the scheduler of another checkout (a ``git worktree`` of an older
commit), side by side in one run; each tree runs in its own process. Reports the CPU
microseconds (``time.process_time``) per request taken and given back.
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from machine import cpu_model  # noqa: E402


class StepClock:
    """The crawl's clock, moved by hand."""

    def __init__(self) -> None:
        self.t = 1.7e9

    def start(self) -> None:
        pass

    def now(self) -> float:
        return self.t

    async def sleep_until(self, when: float) -> None:
        self.t = max(self.t, when)


def per_request(hosts: int, addresses: int, workers: int, requests: int) -> float:
    """CPU microseconds per request taken and given back (this process's scheduler)."""
    from geminibot.crawl import scheduler as module
    from geminibot.crawl.scheduler import Scheduler

    tree = os.environ.get("PYTHONPATH", "")
    if not Path(module.__file__).resolve().is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"the scheduler came from {module.__file__}, not from {tree}")

    clock = StepClock()
    scheduler = Scheduler(clock, test_range=True)
    names = [f"h{i}.test" for i in range(hosts)]
    for i, host in enumerate(names):
        scheduler.set_address(host, f"10.0.{i % addresses // 250}.{i % addresses % 250}")
    scheduler.add_work({host: 1_000_000 - i for i, host in enumerate(names)})
    out: collections.deque[str] = collections.deque()
    taken = 0
    started = time.process_time()
    while taken < requests:
        while len(out) < workers:
            host = scheduler._take_due()
            if host is None:
                break
            out.append(host)
            taken += 1
        host = out.popleft()
        scheduler.start(host)
        clock.t += 0.001
        scheduler.finish(host, 0.001, 20, "text/gemini", slow_down=False)
        scheduler.claimed(host)
        scheduler.give_back(host, clock.now())
    return (time.process_time() - started) / taken * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4400)
    parser.add_argument("--addresses", default="10,100,1000", help="comma-separated")
    parser.add_argument("--workers", type=int, default=128)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--tree", type=Path, action="append", default=[], help="another checkout")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one figure
    args = parser.parse_args()
    try:
        counts = [int(n) for n in args.addresses.split(",")]
    except ValueError:
        parser.error(f"--addresses: comma-separated whole numbers, not {args.addresses!r}")
    if min([*counts, args.hosts, args.workers, args.requests]) < 1:
        parser.error("--hosts, --addresses, --workers and --requests must be at least 1")
    for tree in args.tree:
        if not (tree / "geminibot" / "crawl" / "scheduler.py").is_file():
            parser.error(f"--tree {tree}: not a checkout of geminibot (no geminibot/crawl)")
    if args.one is not None:
        print(per_request(args.hosts, args.one, args.workers, args.requests))
        return
    trees = [BENCH.parent, *(tree.resolve() for tree in args.tree)]
    print(f"nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
    print(f"{args.hosts} hosts, {args.workers} out at a time, {args.requests} requests")
    print("CPU µs per request, by addresses (hosts per address):")
    print("tree".ljust(32) + "".join(f"{n} ({args.hosts // n})".rjust(16) for n in counts))
    for tree in trees:
        row = []
        for n in counts:
            argv = [sys.executable, str(Path(__file__).resolve()), "--one", str(n)]
            argv += ["--hosts", str(args.hosts), "--workers", str(args.workers)]
            argv += ["--requests", str(args.requests)]
            env = os.environ | {"PYTHONPATH": str(tree)}
            done = subprocess.run(argv, check=False, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{tree}: {(done.stderr.strip().splitlines() or ['failed'])[-1]}")
            row.append(float(done.stdout))
        print(str(tree)[-32:].ljust(32) + "".join(f"{us:16.1f}" for us in row))


if __name__ == "__main__":
    main()
