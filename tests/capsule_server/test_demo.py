"""``make demo``: the main job on the bundled data, shortened for the suite."""

from __future__ import annotations

import argparse
import subprocess

import pytest
from commands import run_module

from capsule_server.demo import (
    CAPSULE_QUERY,
    MAX_DEMO_SECONDS,
    demo_seconds,
    main,
    serve_seconds,
)

#: Long enough for most capsules to be crawled and some URLs refused; the full demo
#: runs 12 s because robots-44.test is still being waited out.
SHORT_RUN = "4"


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return run_module("capsule_server.demo", *args, timeout=120)


def test_demo_runs() -> None:
    proc = run_demo("--seconds", SHORT_RUN)
    assert proc.returncode == 0, proc.stderr
    assert "refused by policy" in proc.stdout and "== geminibot search" in proc.stdout
    # the index served as a Gemini search capsule and queried by a client
    assert f"{CAPSULE_QUERY}  ->  20 text/gemini; charset=utf-8\n  # Search: robots" in proc.stdout
    long = [line for line in proc.stdout.splitlines() if len(line) > 80]
    assert not long  # the capsule's answer wrapped as a Gemini client shows it


@pytest.mark.parametrize("value", ["-1", "nan", "ten", str(MAX_DEMO_SECONDS + 0.5)])
def test_demo_serve_seconds_refused(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        serve_seconds(value)
    assert serve_seconds("0") == 0 and serve_seconds(str(MAX_DEMO_SECONDS)) == MAX_DEMO_SECONDS


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "ten", str(MAX_DEMO_SECONDS + 0.5)])
def test_demo_seconds_refused(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        demo_seconds(value)


def test_demo_seconds_edges_accepted() -> None:
    assert demo_seconds(str(MAX_DEMO_SECONDS)) == MAX_DEMO_SECONDS
    assert demo_seconds("0.001") == 0.001


def test_demo_bad_seconds_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """In this process: the demo's ``main`` as ``python -m`` runs it (test_demo_runs starts
    that process); argparse's exit 2 is the only way out, so no traceback either."""
    with pytest.raises(SystemExit) as usage:
        main(["--seconds", "0"])
    assert usage.value.code == 2
    err = capsys.readouterr().err
    assert "--seconds" in err.splitlines()[-1]
    assert "Traceback" not in err
