"""``make demo``: the main job on the bundled data, shortened for the suite."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from capsule_server.demo import MAX_DEMO_SECONDS, demo_seconds

#: Long enough for most capsules to be crawled and some URLs refused; the full demo
#: runs 12 s because robots-44.test is still being waited out.
SHORT_RUN = "4"


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "capsule_server.demo", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_demo_runs() -> None:
    proc = run_demo("--seconds", SHORT_RUN)
    assert proc.returncode == 0, proc.stderr
    assert "refused by policy" in proc.stdout and "== geminibot search" in proc.stdout


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "ten", str(MAX_DEMO_SECONDS + 0.5)])
def test_demo_seconds_refused(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        demo_seconds(value)


def test_demo_seconds_edges_accepted() -> None:
    assert demo_seconds(str(MAX_DEMO_SECONDS)) == MAX_DEMO_SECONDS
    assert demo_seconds("0.001") == 0.001


def test_demo_bad_seconds_is_a_usage_error() -> None:
    proc = run_demo("--seconds", "0")
    assert proc.returncode == 2
    assert "--seconds" in proc.stderr.splitlines()[-1]
    assert "Traceback" not in proc.stderr
