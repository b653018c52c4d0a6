"""``capsule-server range``'s bounds at their edges: records per client and in all, an
IPv6 client as its /64, the number of scorecards in the folder, and scorecards built
off the event loop. The range's clock is a list's first item, moved by hand."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from capsule_fixtures import bundled_policies

from capsule_server.compliance_range import (
    MAX_RECORDS,
    MAX_RECORDS_PER_CLIENT,
    MAX_SCORECARDS,
    Scorecards,
    score,
    score_gone,
)
from geminibot.gemini.accesslog import AccessRecord

HOST = "honeypot.test"


def record(client: str, path: str = "/robots.txt", status: int = 20) -> AccessRecord:
    return AccessRecord(client, HOST, path, status, time="2026-11-27T10:00:00.000Z")


def cards(
    tmp_path: Path, said: list[str] | None = None, now: list[float] | None = None, **bounds: int
) -> Scorecards:
    lines = said if said is not None else []
    clock = now if now is not None else [0.0]
    policies = dict(bundled_policies())
    return Scorecards(
        policies, tmp_path, "geminibot", None, lambda: clock[0], lines.append, **bounds
    )


def test_the_default_bounds() -> None:
    assert (MAX_RECORDS_PER_CLIENT, MAX_RECORDS, MAX_SCORECARDS) == (5_000, 100_000, 1_000)


async def test_records_per_client_edge(tmp_path: Path) -> None:
    said: list[str] = []
    now = [0.0]
    range_ = cards(tmp_path, said, now, max_records_per_client=3)
    for k in range(3):
        range_.add(record("192.0.2.1", f"/p{k}"))
    assert range_.clients["192.0.2.1"].dropped == 0
    range_.add(record("192.0.2.1", "/ignored-44", status=44))
    range_.add(record("192.0.2.1", "/ignored-44", status=44))
    client = range_.clients["192.0.2.1"]
    assert len(client.records) == 3 and range_.held == 3 and client.dropped == 2
    now[0] = 2.0  # the second 44 in a row asked for 2 s (no number: back-off from 1 s)
    await score_gone(range_, 0.0)
    assert said[-1].endswith("scorecard in " + str(tmp_path / "192.0.2.1.gmi") + _CUT32)
    # the records stay for the whole run: a later request is counted, the card rewritten
    range_.add(record("192.0.2.1", "/p3"))
    assert range_.held == 3 and client.dropped == 3
    await score_gone(range_, 0.0)
    assert said[-1].endswith("updated to 6 requests (its first 3 requests; 3 more not kept)")


_CUT32 = " (its first 3 requests; 2 more not kept)"


async def test_records_in_all_edge_evict_the_client_seen_least_recently(tmp_path: Path) -> None:
    """At the bound, the client seen least recently is handed to the scorer (woken at
    once) and the record that found no room is counted; its records are held until
    written, then room is made. Its scorecard then stands: later requests of it are
    counted, not judged, and said on stopping."""
    said: list[str] = []
    range_ = cards(tmp_path, said, max_records=4)
    for client in ("192.0.2.1", "192.0.2.2"):
        range_.add(record(client))
        range_.add(record(client, "/a"))
    assert range_.held == 4 and range_.evicted == [] and not range_.wake.is_set()
    range_.add(record("192.0.2.1", "/b"))  # no room: 192.0.2.2 was seen least recently
    assert list(range_.clients) == ["192.0.2.1"] and range_.held == 4
    assert [(c, len(r)) for c, r, _ in range_.evicted] == [("192.0.2.2", 2)]
    assert range_.wake.is_set() and range_.clients["192.0.2.1"].dropped == 1
    range_.add(record("192.0.2.3"))  # still no room until the scorer has run
    assert range_.held == 4 and list(range_.clients) == ["192.0.2.3"]
    assert list(range_.closed) == ["192.0.2.2", "192.0.2.1"]
    await score_gone(range_, 3600.0)  # the evicted are scored, not the others
    assert (tmp_path / "192.0.2.2.json").exists() and (tmp_path / "192.0.2.1.json").exists()
    assert not (tmp_path / "192.0.2.3.json").exists()
    assert range_.held == 0 and range_.evicted == [] and not range_.wake.is_set()
    range_.add(record("192.0.2.3", "/c"))
    assert range_.held == 1
    card = (tmp_path / "192.0.2.2.json").read_text()
    range_.add(record("192.0.2.2", "/later"))  # counted, its scorecard left as written
    assert range_.closed["192.0.2.2"] == 1 and range_.held == 1
    await score_gone(range_, 0.0)
    assert (tmp_path / "192.0.2.2.json").read_text() == card
    range_.say_closed()
    assert said[-1] == (
        "capsule-server: 192.0.2.2: 1 request after its scorecard not judged "
        "(the range held 4 records)"
    )


async def test_a_client_none_of_whose_requests_was_kept_is_said_and_forgotten(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    range_ = cards(tmp_path, said, max_records=1)
    range_.add(record("192.0.2.1"))
    range_.add(record("192.0.2.2"))  # no room: 192.0.2.1 is scored, this one counted
    assert range_.clients["192.0.2.2"].records == [] and range_.held == 1
    await score_gone(range_, 0.0)
    assert said[-1] == "capsule-server: 192.0.2.2: 1 request not judged (the range held 1 records)"
    assert list(range_.clients) == [] and range_.held == 0
    range_.add(record("192.0.2.2"))  # room again: a new client
    assert len(range_.clients["192.0.2.2"].records) == 1


async def test_an_ipv6_client_is_its_64(tmp_path: Path) -> None:
    range_ = cards(tmp_path)
    for k in range(1, 200):
        range_.add(record(f"2001:db8:1:2::{k:x}"))
    range_.add(record("2001:db8:1:3::1"))
    assert list(range_.clients) == ["2001:db8:1:2::/64", "2001:db8:1:3::/64"]
    await score_gone(range_, 0.0)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        f"2001_db8_1_{n}___64.{suffix}" for n in (2, 3) for suffix in ("gmi", "json", "txt")
    ]
    assert (tmp_path / "2001_db8_1_2___64.txt").read_text().startswith("2001:db8:1:2::/64: ")


async def test_scorecards_in_the_folder_edge(tmp_path: Path) -> None:
    (tmp_path / "from-before.txt").write_text("kept")
    range_ = cards(tmp_path, max_scorecards=2)
    for k in (1, 2):
        range_.add(record(f"192.0.2.{k}"))
    await score_gone(range_, 0.0)
    range_.add(record("192.0.2.1"))  # again: its files are rewritten, not added
    await score_gone(range_, 0.0)
    assert json.loads((tmp_path / "192.0.2.1.json").read_text())["requests"] == 2
    assert len(list(tmp_path.glob("192.*"))) == 6
    range_.add(record("192.0.2.3"))  # a third client: the oldest scorecard goes
    await score_gone(range_, 0.0)
    assert sorted({p.stem for p in tmp_path.glob("192.*")}) == ["192.0.2.1", "192.0.2.3"]
    assert (tmp_path / "from-before.txt").read_text() == "kept"


async def test_a_scorecard_is_built_off_the_event_loop(tmp_path: Path) -> None:
    threads: list[threading.Thread] = []
    range_ = cards(tmp_path)
    range_.say = lambda _line: threads.append(threading.current_thread())
    range_.add(record("192.0.2.1"))
    await score(range_, range_.due(range_.pending()))
    assert threads and threads[0] is not threading.main_thread()
    assert len(range_.clients["192.0.2.1"].records) == 1  # kept for the whole run


def test_nothing_to_judge_writes_nothing(tmp_path: Path) -> None:
    range_ = cards(tmp_path)
    range_.add(AccessRecord("192.0.2.1", error="timeout"))  # no request read
    assert range_.clients == {}
    assert range_.write("192.0.2.1", []) is None
    assert list(tmp_path.iterdir()) == []
