"""``geminibot serve-search`` as a real process over TLS, on both stores, against the
searches that cost most (``hostile_pages``): pages of megabytes, a keyword-stuffed page
with a link farm, queries over the query budget (``59`` with what to change) and a
client that spends its budget of work (``44``, while other clients are answered)."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import hostile_pages as hp
import pytest
from commands import start_serve_search
from postgres_cluster import new_database

from capsule_server.testing import raw_request
from geminibot.index.query import parse_query, query_cost
from geminibot.searchcap.app import CLIENT_BUDGET
from geminibot.store.db import connect

HOST = "search.test"
_HEADER = re.compile(rb"^(\d\d) ?([^\r\n]*)\r\n")
#: A query at every limit of the query budget: three prefixes and nine eight-word phrases.
COSTLY = "lor* ips* dol* " + " ".join(
    '"' + " ".join(f"{chr(97 + i)}{n}" for i in range(8)) + '"' for n in range(9)
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def port(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of a serve-search process over the hostile crawl in one store."""
    folder = tmp_path_factory.mktemp("costs-served")
    db: Path | str
    if request.param == "sqlite":
        db = folder / "crawl.db"
        conn = connect(db)
        hp.fill_sqlite(conn)
        conn.close()
    else:
        db = new_database(request.getfixturevalue("pg_cluster"))
        hp.fill_postgres(db)
    proc, port, _ = start_serve_search(
        db, folder / "certs", "--hostname", HOST, "--rate", "1000", "--rate-burst", "1000"
    )
    yield port
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err


async def ask(port: int, path: str, client: str = "127.0.0.1") -> tuple[int, str, str]:
    """(status, meta, body) of ``gemini://HOST{path}`` asked from the address ``client``."""
    got = await raw_request(port, f"gemini://{HOST}{path}\r\n".encode(), HOST, local_address=client)
    m = _HEADER.match(got)
    assert m is not None, got[:80]
    return int(m[1]), m[2].decode(), got[m.end() :].decode()


def results(body: str) -> list[str]:
    return [line.split()[1] for line in body.splitlines() if line.startswith("=> gemini://")]


async def test_pages_of_megabytes_are_listed_with_their_first_words(port: int) -> None:
    status, _, body = await ask(port, "/search?party")
    assert status == 20 and len(results(body)) == 10
    assert body.count(" · lorem ipsum dolor") == 10


async def test_a_stuffed_page_of_an_untrusted_host_is_not_first(port: int) -> None:
    status, _, body = await ask(port, "/search?recipe")
    assert status == 20
    assert results(body)[0] == hp.RECIPES[0] and hp.SPAM in results(body)


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (" ".join(f"{c}*" for c in "abcdefghijklmnopqrstuvwxy" * 5), "too many terms (25,"),
        ("a* recipe", "prefix a* too short (at least 3 letters before *)"),
        ("lor* ips* dol* sit*", "too many prefixes (4 word* terms, at most 3)"),
    ],
)
async def test_a_query_over_budget_gets_59_saying_what_to_change(
    port: int, query: str, reason: str
) -> None:
    status, meta, _ = await ask(port, "/search?" + quote(query), "127.0.0.2")
    assert (status, meta.split(": ", 1)[0]) == (59, "Query too costly")
    assert reason in meta


async def test_a_client_that_spends_its_budget_is_slowed_and_others_are_not(port: int) -> None:
    """However high the rate the server allows, a client asking for costly searches
    again and again is told to wait once its budget of work is spent."""
    statuses = []
    assert query_cost(parse_query(COSTLY)) > CLIENT_BUDGET // 2
    for _ in range(10):
        status, meta, _ = await ask(port, "/search?" + quote(COSTLY), "127.0.0.3")
        statuses.append(status)
        if status == 44:
            assert int(meta) >= 1
            break
    assert statuses[0] == 20 and statuses[-1] == 44, statuses
    assert (await ask(port, "/search?recipe", "127.0.0.4"))[0] == 20
