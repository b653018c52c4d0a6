"""``geminibot portal`` as a person runs it: a real process serving HTTP/1.1."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from commands import run_main

#: Seconds the portal may take to start or stop (a bound, not a measure).
BOUND = 60.0
GEMINIBOT = str(Path(sys.executable).with_name("geminibot"))


def start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [GEMINIBOT, "portal", "--port", "0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + BOUND
    for line in proc.stderr:
        found = re.match(r"geminibot portal: (http://\S+)/ shows", line)
        if found:
            return proc, found.group(1)
        assert time.monotonic() < deadline, "the portal did not start"
    raise AssertionError(f"the portal exited: {proc.wait()}")


def test_serves_until_interrupted() -> None:
    proc, base = start("--test-range")
    try:
        robots = httpx.get(f"{base}/robots.txt", timeout=BOUND)
        home = httpx.get(f"{base}/", timeout=BOUND)
        port = base.rsplit(":", 1)[1]
        # a second portal on its port: one line, exit 2 (its main, in this process:
        # commands.run_main runs it as the script does)
        busy = run_main(["portal", "--port", port])
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(BOUND)
    assert robots.status_code == 200
    assert robots.headers["x-robots-tag"] == "noindex, nofollow"
    assert "Disallow: /" in robots.text
    assert "Gemini in your web browser" in home.text
    assert "server" not in home.headers  # no server banner
    assert code == 0
    assert busy.returncode == 2
    assert busy.stderr.startswith(f"geminibot: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in busy.stderr
