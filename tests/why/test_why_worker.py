"""``/check``'s work bounded (geminibot/why/reads.py, geminibot/why/host.py): a host whose
robots.txt lints badly on every line gets a short answer (findings and refusing rules
counted past their limits), explained in a worker process (never the face's), a bounded
number at once (a held one makes the next "busy"), and kept per URL or host and fetch of
its policy files. On a real SQLite crawl database; explanations held and counted through
files a worker process can reach (a FIFO holds, never a timer)."""

from __future__ import annotations

import os
import re
from contextlib import closing
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing
from commands import answer_of

from geminibot.gemini.status import Status
from geminibot.gemini.urls import parse_request
from geminibot.searchcap.app import SearchCapsule
from geminibot.store.db import connect
from geminibot.why import explain
from geminibot.why.explain import Answer
from geminibot.why.host import MAX_FINDINGS, MAX_REFUSED, HostAnswer
from geminibot.why.reads import CHECK_WAIT, CheckReads, Records
from geminibot.why.render import facts, gemtext_page

HOST = "lint.test"
#: Lines of the hostile robots.txt: each a rule of its own group, or a line that lints.
LINES = 3000


def noted(notes: Path, records: Records, now: float) -> Answer | HostAnswer:
    """:func:`geminibot.why.explain`, noting in ``notes`` the process and what it
    explained (one line each)."""
    target = getattr(records, "url", None) or records.host
    with notes.open("a") as out:
        out.write(f"{os.getpid()} {target}\n")
    return explain(records, now)


def held(folder: Path, records: Records, now: float) -> Answer | HostAnswer:
    """:func:`geminibot.why.explain` once the test lets it go: it opens the FIFO
    ``started`` to write, then ``release`` to read (no timer)."""
    with open(folder / "started", "w"):
        pass
    with open(folder / "release") as release:
        release.read()
    return explain(records, now)


def hostile_robots() -> bytes:
    lines = []
    for i in range(LINES):
        lines.append(
            (f"User-agent: bot{i}", f"Disallow: /p{i}/", f"Frobnicate: {i}", f"Disallow /x{i}")[
                i % 4
            ]
        )
    return ("User-agent: *\n" + "".join(f"Disallow: /d{i}\n" for i in range(50))).encode() + (
        "\n".join(lines) + "\n"
    ).encode()


def set_robots(db: Path, fetched_at: float) -> None:
    conn = connect(db)
    conn.execute(
        "INSERT OR REPLACE INTO robots (host, name, fetched_at, expires_at, outcome, reason,"
        " status, body) VALUES (?, 'robots.txt', ?, 1e12, 'success', '', 20, ?)",
        (HOST, fetched_at, hostile_robots()),
    )
    conn.commit()
    conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "crawl.db"
    conn = connect(path)
    conn.execute("INSERT INTO hosts (host, first_seen) VALUES (?, 0)", (HOST,))
    conn.commit()
    conn.close()
    set_robots(path, 1_000.0)
    return path


def check(capsule: SearchCapsule, target: str) -> tuple[int, str, str]:
    url = f"gemini://localhost/check?{target}".encode()
    answer = answer_of(capsule, parse_request(url))
    return int(answer.status), answer.meta, (answer.body or b"").decode()


def test_a_host_whose_robots_txt_lints_on_every_line_gets_a_short_answer(db: Path) -> None:
    with closing(SearchCapsule.of(str(db), checks=CheckReads.of(str(db)))) as capsule:
        status, _, body = check(capsule, HOST)
    assert status == Status.SUCCESS
    lints = [line for line in body.splitlines() if line.startswith("lint: ")]
    assert len(lints) == MAX_FINDINGS + 1  # the first findings, then the rest counted
    assert "more findings (" in lints[-1] and "geminibot policy lint" in lints[-1]
    refusing = [line for line in body.splitlines() if "kept out of" in line]
    assert refusing and all(line.count("(robots.txt line") <= MAX_REFUSED for line in refusing)
    counted = [re.search(r"kept out of paths by (\d+) rules", line) for line in refusing]
    assert max(int(m[1]) for m in counted if m) > MAX_REFUSED  # counted, not all listed
    assert len(body.encode()) < 16 * 1024


def test_the_counts_past_the_limits_add_up(db: Path) -> None:
    async def main() -> HostAnswer:
        answer = await CheckReads.of(str(db)).answer(HOST, 2_000.0)
        assert isinstance(answer, HostAnswer)
        return answer

    answer = trio.run(main)
    [robots] = answer.files
    assert len(robots.findings) == MAX_FINDINGS
    assert sum(n for _, n in robots.more_findings) >= LINES // 2 - MAX_FINDINGS
    assert all(len(p.refused) <= MAX_REFUSED for p in answer.permissions)
    assert any(p.more_refused for p in answer.permissions)
    assert sum(f.label == "lint" for f in facts(answer)) == MAX_FINDINGS + 1


def test_answers_are_explained_in_a_worker_process_and_kept_per_fetch(
    db: Path, tmp_path: Path
) -> None:
    """The same host, then one of its URLs, then the host again: two explanations, in
    another process than the face's; once robots.txt is fetched again, a third."""
    notes = tmp_path / "notes"
    checks = CheckReads.of(str(db), explain=partial(noted, notes))
    with closing(SearchCapsule.of(str(db), checks=checks)) as capsule:
        first = check(capsule, HOST)
        assert "## Capsule health" in first[2].splitlines()  # taken in the same worker
        check(capsule, f"gemini://{HOST}/p1/x")
        assert check(capsule, HOST) == first
        explained = notes.read_text().splitlines()
        set_robots(db, 5_000.0)
        check(capsule, HOST)
    assert [line.split()[1] for line in explained] == [HOST, f"gemini://{HOST}/p1/x"]
    assert {int(line.split()[0]) for line in explained} - {os.getpid()} == {
        int(line.split()[0]) for line in explained
    }
    assert len(notes.read_text().splitlines()) == 3


async def test_a_check_past_the_worker_limit_is_told_busy(
    db: Path, tmp_path: Path, autojump_clock: object
) -> None:
    """One explanation at once: while it is held, another host's /check waits
    CHECK_WAIT for the worker, then 44; the capsule answers its other pages meanwhile."""
    os.mkfifo(tmp_path / "started")
    os.mkfifo(tmp_path / "release")
    conn = connect(db)
    conn.execute("INSERT INTO hosts (host, first_seen) VALUES ('other.test', 0)")
    conn.commit()
    conn.close()
    checks = CheckReads.of(str(db), explain=partial(held, tmp_path))
    with closing(SearchCapsule.of(str(db), checks=checks)) as capsule:

        async def ask(target: str) -> tuple[int, str]:
            done = await capsule.check(parse_request(f"gemini://x/check?{target}".encode()))
            return int(done.status), done.meta

        answers: list[tuple[int, str]] = []

        async def asked(target: str) -> None:
            answers.append(await ask(target))

        def fifo(name: str, mode: str) -> None:
            with open(tmp_path / name, mode) as end:  # blocks until the other end opens
                if mode == "w":
                    end.write("go")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(asked, HOST)
            await trio.to_thread.run_sync(fifo, "started", "r")
            assert await ask("other.test") == (Status.SLOW_DOWN, str(int(CHECK_WAIT)))
            about = await capsule.about(parse_request(b"gemini://x/about"))
            assert about.status == Status.SUCCESS
            await trio.to_thread.run_sync(fifo, "release", "w")
    assert [status for status, _ in answers] == [Status.SUCCESS]


def test_the_page_of_a_capped_answer_fits(db: Path) -> None:
    async def main() -> list[str]:
        return gemtext_page(await CheckReads.of(str(db)).answer(HOST, 2_000.0))

    assert len("\n".join(trio.run(main)).encode()) < 16 * 1024
