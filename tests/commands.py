"""The project's commands run as a person runs them, in a child process (importable as
``commands``: ``tests/conftest.py`` puts this folder on ``sys.path``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_module(
    module: str, *args: str, timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS...`` with its output captured as text; it is killed (and
    the test fails) after ``timeout`` seconds."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )
