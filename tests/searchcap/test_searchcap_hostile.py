"""``geminibot serve-search`` as a real process against hostile requests: every one
answered with a proper Gemini status, none a handler's ``40 Internal error``, and nothing
but its banner and its stop line on standard error (no traceback)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from commands import start_serve_search
from hostile_requests import COMMON, check_all
from pages import gemtext_page

from geminibot.index.tantivy_index import rebuild
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Link, store_page

HOST = "search.test"
#: (request line, proper statuses) of the search capsule's own routes.
ROUTES: list[tuple[bytes, set[int]]] = [
    (b"gemini://{host}/search?%ff\r\n", {59}),
    (b"gemini://{host}/search?\xc3\r\n", {59}),
    (b"gemini://{host}/search?" + b"a" * 900 + b"\r\n", {59}),
    (b"gemini://{host}/search?%22%2A%28%5E%7E\r\n", {10, 20}),
    (b"gemini://{host}/search?-%20-%20NOT%20OR\r\n", {10, 20}),
    (b"gemini://{host}/search?lang%3A%00\r\n", {59}),  # an operator without its value
    (b"gemini://{host}/search/0?a\r\n", {51}),
    (b"gemini://{host}/search/51?a\r\n", {51}),
    (b"gemini://{host}/search/99999999999999999999?a\r\n", {51}),
    (b"gemini://{host}/hosts/999999\r\n", {51}),
    (b"gemini://{host}/hosts/-1\r\n", {51}),
    (b"gemini://{host}/backlinks?%ff\r\n", {59}),
    (b"gemini://{host}/backlinks?gemini://[::1\r\n", {59}),
    (b"gemini://{host}/backlinks?javascript:alert(1)\r\n", {59}),
    (b"gemini://{host}/check?gemini://[::1\r\n", {20, 59}),
    (b"gemini://{host}/check?%E2%80%AE%00\r\n", {20, 59}),
    (b"gemini://{host}/check?" + b"x" * 1000 + b"\r\n", {20, 59}),
    (b"gemini://{host}/stats?%ff\r\n", {20}),
]


def make_index(path: Path) -> None:
    conn = connect(path)
    with transaction(conn):
        for n in range(3):
            page = gemtext_page(
                f"gemini://garden.test/{n}",
                f"Tomato diary {n}",
                f"Day {n}: the tomatoes are ripening.",
                fetched_at=1_700_000_000.0,
                links=(Link("gemini://hub.test/", "hub"),),
            )
            store_page(conn, page, "indexer")
    rebuild(conn)
    conn.close()


async def test_hostile_requests_get_proper_answers_and_no_traceback(tmp_path: Path) -> None:
    make_index(tmp_path / "idx.db")
    log = tmp_path / "access.jsonl"
    proc, port, _ = start_serve_search(
        tmp_path / "idx.db", tmp_path / "certs", "--hostname", HOST, "--log", str(log),
        "--rate-burst", "1000", "--rate", "1000",
    )  # fmt: skip
    try:
        await check_all(port, HOST, COMMON + ROUTES)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "Traceback" not in err and err.strip().endswith("SIGTERM, shutting down"), err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) >= 3 * len(COMMON + ROUTES)
    assert not [r for r in records if str(r.get("error", "")).startswith("handler")]
