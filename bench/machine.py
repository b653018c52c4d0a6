"""The machine a benchmark ran on, for the line each one prints beside its figures.

Imported by the benchmarks (``python bench/NAME.py`` puts ``bench/`` on the path); run on
its own it prints that line.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


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
    print(f"nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
