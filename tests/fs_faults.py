"""Real file-system faults for command-line tests: a read-only folder and a small disk.

Both are the kernel's own: a read-only bind mount (EROFS, which even root cannot write
through) and a size-limited tmpfs (ENOSPC, SQLite's "database or disk is full"). Mounting
needs root (CAP_SYS_ADMIN); without it, a read-only folder falls back to a folder without
write permission (EACCES) and the small disk is unavailable (the tests that need it skip).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", *args], capture_output=True, check=False, timeout=30)
    return done.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False, timeout=30)


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """``folder`` (and what it holds) cannot be written while the context lasts."""
    if _mount("--bind", str(folder), str(folder)):
        try:
            if not _mount("-o", "remount,bind,ro", str(folder)):
                pytest.skip("cannot remount a bind mount read-only here")
            yield folder
        finally:
            _umount(folder)
        return
    if os.geteuid() == 0:
        pytest.skip("root without mount: no way to make a folder read-only")
    mode = folder.stat().st_mode
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(mode)


@contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``512k``) mounted on ``folder``; skips the test without root."""
    folder.mkdir(parents=True, exist_ok=True)
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)):
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield folder
    finally:
        _umount(folder)


def grow(folder: Path, size: str) -> None:
    """Give the tmpfs on ``folder`` more room (the disk was freed)."""
    assert _mount("-o", f"remount,size={size}", str(folder))
