"""Many capsules on one server: the crawl's pace per address, learned from the answers.

Serves every capsule of a corpus folder (the real capsules: ``capsules/`` of
/work/shared/real-capsules, its README) on one ``capsule-server`` with its default
limits (10 requests/s per client, burst 60), crawls them all with ``geminibot crawl``
for a fixed time, and reads the server's access log: requests in all, the most in any
10 s window, the 44s (and those after the first minute), the pages the crawl fetched.

    .venv/bin/python bench/shared_server_pace.py /work/shared/real-capsules/capsules
    .venv/bin/python bench/shared_server_pace.py CAPSULES --test-range --seconds 600

Everything stays on loopback; the crawl stops by itself at ``--seconds``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left
from datetime import datetime
from pathlib import Path

from real_search import serve

BIN = Path(sys.executable).parent
#: The window the server's rate is judged over (seconds), and the first minute after
#: which no 44 should come.
WINDOW = 10.0
WARM_UP = 60.0


def crawl(
    hosts: list[str], port: int, work: Path, seconds: int, test_range: bool
) -> dict[str, object]:
    """The crawl of every host for ``seconds``: its JSON summary."""
    domain = hosts[0].split(".", 1)[1]
    argv = [str(BIN / "geminibot"), "crawl", *(f"gemini://{h}/" for h in hosts)]
    argv += ["--db", str(work / "crawl.db"), "--connect-to", f"*.{domain}:1965:127.0.0.1:{port}"]
    argv += ["--max-time", f"{seconds}s", "--json"]
    # --test-range reaches loopback by itself; default politeness is told to
    argv += ["--test-range"] if test_range else ["--allow-address", "127.0.0.0/8"]
    done = subprocess.run(argv, check=False, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"crawl printed no summary: {done.stderr[-2000:]}")
    summary: dict[str, object] = json.loads(lines[-1])
    return summary


def read_log(path: Path) -> list[tuple[float, int | None]]:
    """(seconds, status) of each request the server answered, in time order."""
    rows = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("host") is None:
            continue
        when = datetime.fromisoformat(record["time"]).timestamp()
        rows.append((when, record.get("status")))
    rows.sort(key=lambda row: row[0])
    return rows


def figures(rows: list[tuple[float, int | None]]) -> dict[str, object]:
    """Requests, the most in any WINDOW s (a window starting at each request), the 44s."""
    times = [t for t, _ in rows]
    start = times[0] if times else 0.0
    busiest = max((bisect_left(times, t + WINDOW) - i for i, t in enumerate(times)), default=0)
    slow = [t - start for t, status in rows if status == 44]
    return {
        "requests": len(rows),
        "span_s": round(times[-1] - start, 1) if times else 0.0,
        f"most_in_{WINDOW:g}s": busiest,
        "answered_44": len(slow),
        "share_44": round(len(slow) / len(rows), 4) if rows else 0.0,
        f"44_after_{WARM_UP:g}s": sum(1 for t in slow if t > WARM_UP),
        "last_44_at_s": round(max(slow), 1) if slow else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capsules", type=Path, help="folder of host-named capsule folders")
    parser.add_argument("--seconds", type=int, default=150, help="crawl time (default 150)")
    parser.add_argument("--test-range", action="store_true", help="crawl with --test-range")
    args = parser.parse_args()
    hosts = sorted(p.name for p in args.capsules.iterdir() if p.is_dir())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server, port = serve(args.capsules, work, rate=None)  # its default limits
        try:
            began = time.monotonic()
            summary = crawl(hosts, port, work, args.seconds, args.test_range)
            wall = time.monotonic() - began
        finally:
            server.terminate()
            server.wait(timeout=30)
        result = figures(read_log(work / "access.log"))
    result.update(
        capsules=len(hosts),
        test_range=args.test_range,
        crawl_wall_s=round(wall, 1),
        crawl_requests=summary.get("requests"),
        crawl_slow_downs=summary.get("slow_downs"),
        pages=summary.get("pages"),
        skipped_hosts=len(summary.get("hosts_skipped") or {}),  # type: ignore[arg-type]
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
