"""Headless Chromium for the tests that check pages in a real browser (Debian's
``chromium``, installed by ``make system-packages``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

#: Seconds one Chromium run may take before the test gives up (a bound, not a measure).
BROWSER_BOUND = 120.0
PNG = b"\x89PNG\r\n\x1a\n"


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("headless Chromium is missing: run 'make browser' (Debian package chromium)")


async def run_chromium(profile: Path, *args: str) -> bytes:
    argv = [
        chromium(),
        "--headless",
        "--no-sandbox",  # root in CI containers
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    with trio.fail_after(BROWSER_BOUND):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True)
    return bytes(done.stdout)
