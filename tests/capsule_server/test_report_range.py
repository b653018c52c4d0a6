"""``capsule-server range`` as a real process: a client's scorecard is written when it
goes idle, every client's on SIGUSR1, and the pending ones on SIGTERM."""

from __future__ import annotations

import json
import signal
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio
from capsule_fixtures import cli_process, stderr_until_exit

from capsule_server.cli import main
from capsule_server.testing import raw_request

#: Seconds a scorecard may take to appear (a bound on a loaded machine, not a speed test).
APPEAR_DEADLINE = 60.0


def range_process(*args: str) -> AbstractAsyncContextManager[tuple[trio.Process, int]]:
    """``capsule-server range --port 0 ARGS`` as a process, and its port."""
    return cli_process("range", *args, deadline=APPEAR_DEADLINE)


async def appears(path: Path) -> str:
    with trio.fail_after(APPEAR_DEADLINE):
        while not path.exists():
            await trio.sleep(0.1)
    return path.read_text(encoding="utf-8")


async def polite_and_rude(port: int) -> None:
    for path in ("/robots.txt", "/articles/a.gmi"):
        await raw_request(port, f"gemini://honeypot.test{path}\r\n".encode(), "honeypot.test")
    line = b"gemini://honeypot.test/trap/a.gmi\r\n"
    await raw_request(port, line, "honeypot.test", local_address="127.0.0.2")


async def test_scorecard_written_when_a_client_goes_idle(tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    log = tmp_path / "access.jsonl"
    args = ("--certs", str(tmp_path / "certs"), "--scorecards", str(cards), "--idle", "0.5")
    async with range_process(*args, "--log", str(log)) as (proc, port):
        await polite_and_rude(port)
        polite = await appears(cards / "127.0.0.1.txt")
        rude = json.loads(await appears(cards / "127.0.0.2.json"))
        gmi = await appears(cards / "127.0.0.2.gmi")
        proc.send_signal(signal.SIGTERM)
        err, status = await stderr_until_exit(proc, APPEAR_DEADLINE)
    assert status == 0
    # the bundled capsules ask for waits up to 60 s: a shorter --idle is warned about
    assert err.startswith("capsule-server: warning: --idle 0.5 is shorter than the longest")
    assert err.count("capsule-server: 127.0.0.1: compliant, scorecard in ") == 1
    assert polite.startswith("127.0.0.1: compliant as ")
    assert polite.splitlines()[-1] == "  verdict: compliant"
    assert rude["verdict"].startswith("not compliant: 1 forbidden request, first at ")
    assert rude["scorecard"]["honeypot.test"].startswith("fail: before robots.txt /trap/a.gmi")
    assert gmi.splitlines()[-1] == "Verdict: not compliant"
    assert len(log.read_text().splitlines()) == 3  # --log still written


async def test_scorecards_on_sigusr1_and_sigterm(tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    args = ("--certs", str(tmp_path / "certs"), "--scorecards", str(cards), "--idle", "3600")
    async with range_process(*args) as (proc, port):
        await polite_and_rude(port)
        proc.send_signal(signal.SIGUSR1)
        assert "compliant" in await appears(cards / "127.0.0.1.txt")
        await appears(cards / "127.0.0.2.txt")
        (cards / "127.0.0.1.txt").unlink()
        await raw_request(port, b"gemini://honeypot.test/\r\n", "honeypot.test")
        proc.send_signal(signal.SIGTERM)  # the pending scorecard is written on the way out
        with trio.fail_after(APPEAR_DEADLINE):
            assert await proc.wait() == 0
    assert (cards / "127.0.0.1.txt").read_text().startswith("127.0.0.1: compliant as ")


def test_range_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["range", str(tmp_path / "empty")]) == 2
    assert "no capsule folders" in capsys.readouterr().err
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["range", "--scorecards", str(a_file / "x")]) == 2
    assert "cannot create the scorecards folder" in capsys.readouterr().err
    assert main(["range", "--as", "nobody"]) == 2
    assert "unknown identity 'nobody'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["range", "--idle", "0"])
    assert "--idle: 0 must be a number above 0" in capsys.readouterr().err
