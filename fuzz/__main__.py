"""``python -m fuzz``: run every fuzz target (or those named) for a bounded time.

Each target runs in its own process (``python -m fuzz.run``), at most ``--jobs`` at once;
the log of each is ``WORK/TARGET.log``. The summary gives executions, seconds and the
finding (if any) per target; the exit code is 1 if any target found something.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from fuzz.targets import TARGETS

_DONE = re.compile(r"Done (\d+) runs in (\d+) second")
_STATS_RUNS = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")
_SLOWEST = re.compile(r"stat::slowest_unit_time_sec:\s*(\d+)")
_RSS = re.compile(r"stat::peak_rss_mb:\s*(\d+)")


@dataclass
class Result:
    target: str
    executions: int
    seconds: float
    slowest_input: int
    """Seconds the slowest input took (libFuzzer rounds down)."""
    peak_rss_mb: int
    finding: str | None


def run_one(target: str, seconds: int, work: Path, timeout: int) -> Result:
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"{target}.log"
    command = [
        sys.executable, "-m", "fuzz.run", target,
        "--seconds", str(seconds), "--timeout", str(timeout), "--work", str(work),
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("w") as out:
        # libFuzzer stops itself at --seconds; the margin covers start-up and a slow input.
        try:
            code = subprocess.run(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=seconds + 120 + timeout,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            code = -1
    elapsed = time.monotonic() - started
    text = log.read_text(errors="replace")
    runs = _STATS_RUNS.search(text) or _DONE.search(text)
    executions = int(runs.group(1)) if runs else 0
    finding = None
    if code != 0:
        artifact = _ARTIFACT.search(text)
        finding = artifact.group(1) if artifact else f"exit {code}, see {log}"
    slowest, rss = _SLOWEST.search(text), _RSS.search(text)
    return Result(
        target,
        executions,
        round(elapsed, 1),
        int(slowest.group(1)) if slowest else 0,
        int(rss.group(1)) if rss else 0,
        finding,
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("targets", nargs="*", metavar="TARGET", help="default: all")
    parser.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    parser.add_argument("--jobs", type=int, default=2, help="targets at once (default 2)")
    parser.add_argument("--timeout", type=int, default=10, help="seconds per input (default 10)")
    parser.add_argument("--work", type=Path, default=Path(".fuzz"), help="default .fuzz/")
    args = parser.parse_args()
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown or args.seconds <= 0 or args.jobs <= 0 or args.timeout <= 0:
        parser.error(
            f"unknown target {unknown[0]!r}; known: {', '.join(TARGETS)}"
            if unknown
            else "--seconds, --jobs and --timeout must be positive"
        )
    targets = args.targets or list(TARGETS)
    print(
        f"fuzzing {len(targets)} targets for {args.seconds} s each, {args.jobs} at once",
        file=sys.stderr,
    )
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(
            pool.map(lambda t: run_one(t, args.seconds, args.work, args.timeout), targets)
        )
    print(f"{'target':<17} {'executions':>10} {'seconds':>7} {'slowest':>7} {'MiB':>5}  finding")
    for r in results:
        print(
            f"{r.target:<17} {r.executions:>10} {r.seconds:>7} {r.slowest_input:>7}"
            f" {r.peak_rss_mb:>5}  {r.finding or 'none'}"
        )
    (args.work / "summary.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 1 if any(r.finding for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
