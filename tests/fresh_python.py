"""Run a snippet in a fresh Python interpreter, with a generous time limit.

For code that a regression could make run for hours (a backtracking matcher given a
hostile pattern): in a subprocess, the test fails at the limit instead of hanging the
suite. ``tests/conftest.py`` puts this folder on ``sys.path``, so any test can
``from fresh_python import run_python``.
"""

from __future__ import annotations

import subprocess
import sys

#: Seconds a snippet may take: far more than any slow machine needs, far less than a hang.
LIMIT_SECONDS = 120


def run_python(program: str, *args: str) -> str:
    """The standard output of ``python -c PROGRAM ARGS...``; the test fails if it fails."""
    proc = subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
