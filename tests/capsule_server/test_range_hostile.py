"""``capsule-server range`` as a real process against hostile requests: every one
answered with a proper Gemini status, and no traceback on standard error, also once the
scorecards of those requests are written."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from capsule_fixtures import cli_process, stderr_until_exit
from hostile_requests import COMMON, check_all

HOST = "honeypot.test"
#: (request line, proper statuses) of the capsules' own paths.
PATHS: list[tuple[bytes, set[int]]] = [
    (b"gemini://{host}/robots.txt\r\n", {20}),
    (b"gemini://{host}/.hidden\r\n", {51}),
    (b"gemini://{host}/%2e/robots.txt\r\n", {20}),  # /./robots.txt: /robots.txt
    (b"gemini://{host}/robots.txt/\r\n", {51}),
    (b"gemini://{host}/robots.txt%00\r\n", {51}),
    (b"gemini://{host}/trap/%ff%fe\r\n", {51}),
    (b"gemini://{host}/?\xff\r\n", {59}),
]


async def test_hostile_requests_get_proper_answers_and_no_traceback(tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    args = (
        "--certs", str(tmp_path / "certs"), "--scorecards", str(cards), "--idle", "3600",
        "--rate-burst", "1000", "--rate", "1000",
    )  # fmt: skip
    async with cli_process("range", *args, deadline=60.0) as (proc, port):
        await check_all(port, HOST, COMMON + PATHS)
        proc.send_signal(signal.SIGTERM)  # scores the requests on the way out
        err, status = await stderr_until_exit(proc, 60.0)
    assert status == 0
    assert "Traceback" not in err, err
    assert "127.0.0.1: not compliant, scorecard in" in err
    card = json.loads((cards / "127.0.0.1.json").read_text())
    assert card["requests"] >= len(PATHS)
