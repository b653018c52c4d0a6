"""The machine a benchmark ran on, for the line each one prints beside its figures.

Imported by the benchmarks (``python bench/NAME.py`` puts ``bench/`` on the path); run on
its own it prints that line.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

#: The benchmarks' folder: a measured module runs from it, so it can import its siblings.
BENCH = Path(__file__).resolve().parent
#: Seconds a measured child run may take before the benchmark stops it.
LIMIT = 1_800

#: ``python -c`` code that runs ``python -m MODULE ARGS...`` (``sys.argv``: MODULE,
#: PEAK_FILE, AHEAD, ARGS...) with ``time.time`` AHEAD seconds ahead (set before the
#: module is imported, so its default wall clock is the advanced one) and, at exit, writes
#: the process's own peak RSS (``VmHWM``, KiB) to PEAK_FILE. The ``ru_maxrss`` that
#: ``wait4`` reports for a child is no measure of the child: Linux counts the pages the
#: parent had when it forked (or vfork-ed) the child, so a benchmark holding 2 GiB of
#: figures saw every crawl it started "peak" at 2 GiB. ``VmHWM`` belongs to the memory
#: the child has after ``exec``.
MEASURED = (
    "import atexit, runpy, sys, time\n"
    "module, peak, ahead = sys.argv[1], sys.argv[2], float(sys.argv[3])\n"
    "del sys.argv[1:4]\n"
    "real = time.time\n"
    "time.time = lambda: real() + ahead\n"
    "def report():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            open(peak, 'w').write(line.split()[1])\n"
    "atexit.register(report)\n"
    "sys.argv[0] = module\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def measured_argv(module: str, peak_file: Path, ahead: float = 0.0) -> list[str]:
    """The start of an argv that runs ``python -m module`` as :data:`MEASURED` says
    (append the module's arguments); read the peak with :func:`peak_rss_kib`."""
    return [sys.executable, "-c", MEASURED, module, str(peak_file), repr(ahead)]


def fresh_peak_file(db: Path) -> Path:
    """Where a :func:`measured_argv` crawl of ``db`` writes its peak, beside it but not
    matched by ``db.name*`` (the database's own files); removed if an earlier run left
    one, so a run that writes none reads 0, not another run's peak."""
    peak_file = db.with_name(f"peak-{db.stem}.kib")
    peak_file.unlink(missing_ok=True)
    return peak_file


def peak_rss_kib(peak_file: Path) -> int:
    """The peak RSS a :func:`measured_argv` process wrote at exit (KiB); 0 if it wrote
    none (killed, or ``os._exit``)."""
    try:
        return int(peak_file.read_text())
    except (OSError, ValueError):
        return 0


def measured(module: str, args: list[str], work: Path, name: str) -> tuple[dict[str, float], str]:
    """Run ``python -m module args`` from ``bench/``: wall and CPU seconds, peak MiB; and
    its standard output."""
    peak = fresh_peak_file(work / f"{name}.db")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [*measured_argv(module, peak), *args],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args)}: exit {proc.returncode}\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": wall, "cpu": cpu, "peak_mib": peak_rss_kib(peak) / 1024}, proc.stdout


def migrated(db: Path, url: str) -> float:
    """Seconds ``geminibot db migrate`` takes to move the SQLite store ``db`` to ``url``."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "geminibot", "db", "migrate", "--from", str(db), "--to", url],
        check=True,
        capture_output=True,
        timeout=LIMIT,
    )
    return time.perf_counter() - started


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()  # no options: --help shows what it measures
    print(f"nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
