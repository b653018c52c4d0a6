"""``geminibot crawl``, ``search``, ``stats``, ``classify`` and ``compare`` as a user meets
them, against the capsule server on loopback: each test asserts the exit code and the
first line of output, and that an error is one line, never a traceback. The commands run
in this process (``commands.run_main``: the script's ``main``, its own standard streams
and exit status), the server on a thread of it (``served_capsules.capsule_server_thread``:
these tests are about the commands, not the server's process)."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest
import trio
import trio.testing
from capsule_crawl import CAPSULES
from commands import crawl_in_trio, run_main
from fs_faults import grow, read_only, small_disk
from served_capsules import capsule_server_thread, generate

from capsule_server.testing import running_server
from geminibot.crawl.display import LOG_PREFIX
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import ServerLimits

HOST = "va-groups.test"
#: Bound on any one command (a crawl that does not stop when told fails by it).
TIMEOUT = 60.0


def geminibot(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return run_main(args, limit=timeout)


def one_line(text: str) -> str:
    """The only line of ``text`` (asserts there is one, and no traceback) besides a
    crawl's progress lines, one per LOG_INTERVAL while it runs: how many depends on the
    machine's speed, not on what the command says."""
    assert "Traceback" not in text
    (line,) = [line for line in text.splitlines() if not line.startswith(LOG_PREFIX)]
    return line


def first_line(text: str) -> str:
    return text.splitlines()[0]


def crawl(db: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return geminibot(
        "crawl",
        *args,
        "--db",
        str(db),
        "--test-range",
        "--connect-to",
        f"*.test:1965:127.0.0.1:{port}",
    )


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# --- does nothing and says it succeeded ---


def test_allow_host_keeps_the_seeds_hosts(served: int, tmp_path: Path) -> None:
    proc = crawl(tmp_path / "c.db", served, f"gemini://{HOST}/", "--allow-host", "other.test")
    assert proc.returncode == 0, proc.stderr
    assert first_line(proc.stdout).startswith("crawled 7 pages (10 requests)")


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_an_ipv6_literal_seed_is_crawled(tmp_path: Path) -> None:
    with capsule_server_thread(CAPSULES, tmp_path / "certs", host="::1") as port:
        db = tmp_path / "v6.db"
        proc = geminibot("crawl", f"gemini://[::1]:{port}/", "--db", str(db), "--test-range")
    assert proc.returncode == 0, proc.stderr
    # the server serves named capsules only: it answers 53 for [::1], and the crawl says so
    assert first_line(proc.stdout).startswith("crawled 1 page (4 requests)")
    assert rows(db, "SELECT url, status FROM pages") == [(f"gemini://[::1]:{port}/", 53)]


def test_a_crawl_of_unreachable_hosts_fails(tmp_path: Path) -> None:
    proc = geminibot("crawl", "gemini://127.0.0.1:1/", "--db", str(tmp_path / "u.db"))
    assert proc.returncode == 1
    assert first_line(proc.stdout).startswith("crawled 0 pages (1 request)")
    line = one_line(proc.stderr)
    assert line.startswith("geminibot crawl: nothing fetched: 1 request failed (")
    assert "gemini://127.0.0.1:1/robots.txt: ConnectionFailed" in line


def test_a_second_crawl_that_makes_no_request_fails(tmp_path: Path) -> None:
    """Run again within the policy-file cache's window, the unreachable host is skipped
    for now without a request: not a success (it was exit 0, "1 URLs left")."""
    db = str(tmp_path / "u.db")
    # On a test range: nothing listens on the port (no 10 s first pace to wait out for
    # the host's turn, at which the second crawl finds it skipped).
    argv = ("crawl", "gemini://127.0.0.1:1/", "--db", db, "--test-range")
    assert geminibot(*argv).returncode == 1
    proc = geminibot(*argv)
    assert proc.returncode == 1
    assert first_line(proc.stdout).startswith("crawled 0 pages (0 requests)")
    line = one_line(proc.stderr)
    assert line.startswith("geminibot crawl: nothing fetched: 1 URL queued, no request made (")
    assert line.endswith("); run again later")


# --- does not stop when told ---


def test_max_pages_reached_ends_the_crawl(served: int, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    seeds = (f"gemini://{HOST}/", "gemini://robots-44.test/")
    proc = crawl(db, served, *seeds, "--max-pages", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(first_line(proc.stdout))
    assert summary["pages"] == 3 and summary["stopped_at"] == "--max-pages"
    # robots-44.test answers 44 to everything: it was not re-asked once the limit was met
    asked = rows(db, "SELECT count(*) FROM fetches WHERE host = 'robots-44.test'")[0][0]
    assert isinstance(asked, int) and asked <= 2
    text = crawl(db, served, *seeds, "--max-pages", "3")
    assert text.returncode == 0
    assert first_line(text.stdout).startswith("crawled 0 pages (0 requests)")
    assert "stopped at --max-pages" in text.stdout


def test_max_time_ends_the_crawl(served: int, tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    # no --test-range: 10 s between two requests to a host, so 2 s leave most queued
    proc = geminibot(
        "crawl",
        f"gemini://{HOST}/",
        "--db",
        str(db),
        "--connect-to",
        f"*.test:1965:127.0.0.1:{served}",
        "--allow-address",
        "127.0.0.1/32",
        "--max-time",
        "2s",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(first_line(proc.stdout))
    assert summary["stopped_at"] == "--max-time" and summary["queued"] > 0
    assert rows(db, "SELECT count(*) FROM urls WHERE state = 'leased'") == [(0,)]


# --- tracebacks instead of one line ---


def archive(tmp_path: Path, port: int, warc_dir: Path) -> subprocess.CompletedProcess[str]:
    return crawl(
        tmp_path / "w.db",
        port,
        f"gemini://{HOST}/",
        "--as",
        "archiver",
        "--warc-dir",
        str(warc_dir),
    )


def test_warc_dir_that_is_a_file(served: int, tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    proc = archive(tmp_path, served, a_file)
    assert proc.returncode == 2
    assert one_line(proc.stderr) == f"geminibot: --warc-dir {a_file}: is a file, expected a folder"
    assert a_file.read_text() == "mine\n"


def test_warc_dir_read_only(served: int, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    with read_only(folder):
        proc = archive(tmp_path, served, folder / "warc")
    assert proc.returncode == 2
    assert one_line(proc.stderr).startswith(
        f"geminibot: --warc-dir {folder / 'warc'}: cannot write"
    )


def test_read_only_folder_with_a_database(served: int, tmp_path: Path) -> None:
    folder = tmp_path / "crawl"
    folder.mkdir()
    db = folder / "c.db"
    assert crawl(db, served, f"gemini://{HOST}/").returncode == 0
    with read_only(folder):
        proc = crawl(db, served, f"gemini://{HOST}/")
        assert geminibot("stats", "--db", str(db)).returncode == 0  # still readable
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert line.startswith(f"geminibot: {db}: cannot write in {folder} (")
    assert "cannot create" not in line


def test_a_full_disk_ends_the_crawl_in_one_line_and_loses_nothing(tmp_path: Path) -> None:
    """A real full disk: an 832 KiB tmpfs holds the database (needs root). A batch of up
    to BATCH_URLS pages, which a full disk rolls back whole, needs room for its WAL before
    any page is kept: 832 KiB hold the first batch of 100 pages, not the second (of the
    150 pages) on top of it. (When measured, 704 KiB held the first batch and 640 KiB did
    not; 896 KiB did not hold the second.)"""
    seeds = generate(tmp_path / "capsules", 2, 150)
    disk = tmp_path / "disk"
    with (
        small_disk(disk, "832k"),
        capsule_server_thread(tmp_path / "capsules", tmp_path / "certs") as port,
    ):
        db = disk / "c.db"
        args = (*seeds, "--allow-host", "*.test", "--max-host-urls", "1000", "--max-depth", "99")
        full = crawl(db, port, *args)
        assert full.returncode == 1, full.stderr
        assert one_line(full.stderr) == (
            f"geminibot: {db}: crawl stopped: the disk is full; every page committed is kept: "
            "make room and run the same command to resume"
        )
        assert rows(db, "PRAGMA integrity_check") == [("ok",)]
        (kept,) = rows(db, "SELECT count(*) FROM pages")[0]
        assert isinstance(kept, int) and kept > 0
        grow(disk, "64m")
        rest = crawl(db, port, *args, "--json")
        assert rest.returncode == 0, rest.stderr
        (pages,) = rows(db, "SELECT count(*) FROM pages")[0]
        assert pages == kept + json.loads(rest.stdout)["pages"] == 150, rest.stdout
        assert rows(db, "SELECT count(*) FROM urls WHERE state IN ('queued', 'leased')") == [(0,)]


# --- hostile pages ---


def test_a_page_that_cannot_be_read_is_failed_not_retried(tmp_path: Path) -> None:
    """A server-chosen charset that is no text encoding stops nothing (the
    attempts bound behind it is tested in test_crawl_cli_display.py)."""
    site = tmp_path / "capsules" / "bad.test"
    site.mkdir(parents=True)
    (site / "index.gmi").write_text("# home\n=> /rot.gmi rot\n=> /b.gmi b\n")
    (site / "rot.gmi").write_text("# rot\n=> /c.gmi c\n")
    (site / "b.gmi").write_text("# b\n")
    (site / "serve.toml").write_text('[mime]\n"/rot.gmi" = "text/gemini; charset=rot13"\n')
    db = tmp_path / "h.db"
    with capsule_server_thread(tmp_path / "capsules", tmp_path / "certs") as port:
        proc = crawl(db, port, "gemini://bad.test/")
        again = crawl(db, port, "gemini://bad.test/")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    # decoded as UTF-8 with replacement (docs/gemini.md), so its link is followed too
    assert first_line(proc.stdout).startswith("crawled 4 pages (7 requests)")
    assert first_line(again.stdout).startswith("crawled 0 pages (0 requests)")
    (row,) = rows(db, "SELECT state FROM urls WHERE url = 'gemini://bad.test/rot.gmi'")
    assert row == ("done",)


# --- new options ---


def test_exclude(served: int, tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    proc = crawl(db, served, f"gemini://{HOST}/", "--exclude", "*/public/*", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(first_line(proc.stdout))["pages"] == 6
    assert not rows(db, "SELECT url FROM fetches WHERE url GLOB '*/public/*'")
    # a URL queued by an earlier run is not fetched once excluded
    db2 = tmp_path / "x2.db"
    assert crawl(db2, served, f"gemini://{HOST}/", "--max-pages", "1").returncode == 0
    later = crawl(db2, served, f"gemini://{HOST}/", "--exclude", "*/public/*", "--json")
    assert json.loads(first_line(later.stdout))["excluded"] == 1
    assert not rows(db2, "SELECT url FROM fetches WHERE url GLOB '*/public/*'")


def test_min_delay_is_a_floor(served: int, tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    proc = crawl(db, served, f"gemini://{HOST}/", "--min-delay", "0.3", "--json")
    assert proc.returncode == 0, proc.stderr
    starts = [
        float(s)
        for (s,) in rows(db, "SELECT started_at + duration FROM fetches ORDER BY started_at")
    ]
    begun = [float(s) for (s,) in rows(db, "SELECT started_at FROM fetches ORDER BY started_at")]
    assert len(begun) == 10
    assert all(b - e >= 0.3 - 1e-6 for e, b in zip(starts, begun[1:], strict=False))


def test_duration_and_number_options_in_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "o.db")
    for bad in (["--max-time", "5x"], ["--max-time", "0"], ["--min-delay", "-1"]):
        proc = geminibot("crawl", "gemini://a.test/", "--db", db, *bad)
        assert proc.returncode == 2
        assert one_line(proc.stderr).startswith(f"geminibot crawl: argument {bad[0]}: ")


def test_certificate_pins_are_kept_and_a_change_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    capsules = tmp_path / "capsules"
    generate(capsules, 1, 3)
    with capsule_server_thread(capsules, tmp_path / "certs") as port:
        first = crawl(db, port, "gemini://host00.test/", "--max-pages", "1")
    assert first.returncode == 0, first.stderr
    ((host, pinned_port, fingerprint),) = rows(db, "SELECT host, port, fingerprint FROM pins")
    assert (host, pinned_port) == ("host00.test", 1965)
    # the same capsule with new certificates: the server is not the one pinned
    with capsule_server_thread(capsules, tmp_path / "other-certs") as port:
        second = crawl(db, port, "gemini://host00.test/", "--json")
    summary = json.loads(first_line(second.stdout))
    assert second.returncode == 1 and summary["pages"] == 0
    assert "CertificateChanged" in summary["last_error"]
    assert rows(db, "SELECT fingerprint FROM pins") == [(fingerprint,)]
    assert one_line(second.stderr).startswith("geminibot crawl: nothing fetched: ")


async def test_capsules_on_one_address_are_paced_as_one(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    """Six capsules on one server that allows 2 requests/s per client, each asking
    Crawl-delay: 1: paced per host name the crawler sent 6 requests/s and was answered
    44 (30 times in 71 requests when this was measured); per address, one request at a
    time, each at least --min-delay 0.5 s (the address's delay here) after the last
    request to the address and 1 s after its host's last one. The
    server and the crawl run in this trio run, on one mock clock: the pacing is the
    crawler's, the seconds are not waited."""
    capsules = tmp_path / "capsules"
    seeds = generate(capsules, 6, 18)
    for robots in capsules.glob("*/robots.txt"):
        robots.write_text("User-agent: *\nDisallow: /private/\nCrawl-delay: 1\n")
    log: list[AccessRecord] = []
    db = tmp_path / "a.db"
    limits = ServerLimits(
        rate_burst=2, rate_per_second=2.0
    )  # capsule-server --rate 2 --rate-burst 2
    certs = tmp_path / "certs"
    async with running_server(capsules, certs, limits, log.append, trio.current_time) as server:
        argv = [*seeds, "--min-delay", "0.5", "--json", "--db", str(db), "--test-range"]
        argv += ["--connect-to", f"*.test:1965:127.0.0.1:{server.port}"]
        with trio.fail_after(TIMEOUT):
            proc = await crawl_in_trio(argv)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(first_line(proc.stdout))["pages"] == 18
    assert [r.status for r in log].count(44) == 0


def test_search_host_and_offset(served: int, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert crawl(db, served, f"gemini://{HOST}/", "gemini://wildcards.test/").returncode == 0
    every = geminibot("search", "the", "--db", str(db), "--json", "--limit", "50")
    urls = [json.loads(line)["url"] for line in every.stdout.splitlines()]
    assert {u.split("/")[2] for u in urls} == {HOST, "wildcards.test"}
    only = geminibot("search", "the", "--db", str(db), "--json", "--host", "va-*", "--limit", "50")
    assert only.returncode == 0
    assert [json.loads(line)["url"] for line in only.stdout.splitlines()] == [
        u for u in urls if HOST in u
    ]
    second = geminibot("search", "the", "--db", str(db), "--offset", "1", "--limit", "1")
    assert second.returncode == 0
    assert first_line(second.stdout).startswith("2. ")
    assert second.stdout.splitlines()[1].strip() == urls[1]
    bad = geminibot("search", "the", "--db", str(db), "--offset", "-1")
    assert bad.returncode == 2
    assert one_line(bad.stderr) == "geminibot search: argument --offset: -1 must be 0 to 100000"


def test_stats_lists_urls_by_status_and_host(served: int, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    assert crawl(db, served, f"gemini://{HOST}/", "gemini://robots-41.test/").returncode == 0
    listed = geminibot("stats", "--db", str(db), "--urls")
    assert listed.returncode == 0
    assert first_line(listed.stdout) == f"done      20  gemini://{HOST}/"
    refused = geminibot("stats", "--db", str(db), "--urls", "--status", "refused", "--json")
    (row,) = [json.loads(line) for line in refused.stdout.splitlines()]
    assert row["host"] == HOST and row["state"] == "refused" and row["reason"]
    by_host = geminibot("stats", "--db", str(db), "--urls", "--host", "robots-41.*")
    assert {line.split()[-1] for line in by_host.stdout.splitlines()} <= {
        "gemini://robots-41.test/"
    } or all("robots-41.test" in line for line in by_host.stdout.splitlines())
    ok = geminibot("stats", "--db", str(db), "--urls", "--status", "2x", "--host", HOST)
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 7
    none = geminibot("stats", "--db", str(db), "--urls", "--status", "59")
    assert none.returncode == 1 and one_line(none.stderr) == "no URLs match"
    bad = geminibot("stats", "--db", str(db), "--urls", "--status", "7")
    assert bad.returncode == 2 and one_line(bad.stderr).startswith("geminibot: stats: --status")


# --- classify and compare when nothing answers ---


def test_classify_against_a_host_that_does_not_answer() -> None:
    proc = geminibot("classify", "--bot", "tlgs", "--against", "gemini://127.0.0.1:1/")
    assert proc.returncode == 1 and proc.stdout == ""
    assert one_line(proc.stderr).startswith(
        "geminibot: --against gemini://127.0.0.1:1/robots.txt: the policy could not be fetched: "
    )


def test_classify_connect_to(served: int) -> None:
    proc = geminibot(
        "classify",
        "--does",
        "search-index",
        "--against",
        f"gemini://{HOST}/",
        "--connect-to",
        f"{HOST}:1965:127.0.0.1:{served}",
        "--path",
        "/index-no/a.gmi",
        "--json",
    )
    assert proc.returncode == 1, proc.stderr  # /index-no/ is closed to indexers
    (report,) = json.loads(first_line(proc.stdout))["against"]
    assert report["modes"][0]["explicit"][0]["allowed"] is False


def test_compare_with_both_sides_unreachable() -> None:
    proc = geminibot(
        "compare",
        "a.test",
        "--connect-to",
        "a.test:443:127.0.0.1:1",
        "--connect-to",
        "a.test:1965:127.0.0.1:1",
    )
    assert proc.returncode == 1 and proc.stdout == ""
    line = one_line(proc.stderr)
    assert line.startswith("geminibot: a.test: neither policy could be fetched: ")
    assert "agree" not in line
