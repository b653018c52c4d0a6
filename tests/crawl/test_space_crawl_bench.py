"""bench/space_crawl.py's arithmetic (tenths, py-spy sample split), the space's address
rules, and the next-host choice measured on a small frontier."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import space_crawl  # noqa: E402
from geminispace.server import (  # noqa: E402
    MAX_ADDRESSES,
    address_number,
    address_rules,
    loopback_address,
)
from geminispace.space import Space  # noqa: E402

from geminibot.crawl.page import content_hash  # noqa: E402


def test_tenths_of_a_steady_and_a_slowing_crawl() -> None:
    steady = space_crawl.tenths([k / 10 for k in range(101)])  # 10 pages/s throughout
    assert steady == pytest.approx([10.0] * 10)
    slowing = [k / 10 for k in range(50)] + [5 + k for k in range(1, 51)]  # then 1/s
    rates = space_crawl.tenths(slowing)
    assert rates[0] == pytest.approx(10.0) and rates[-1] == pytest.approx(1.0)
    assert space_crawl.tenths([1.0] * 19) == []


def test_samples_split_by_innermost_known_frame() -> None:
    tls = "run (trio/_core/_run.py:1);send (geminibot/crawl/adapters.py:9);do_handshake (ssl.py:9)"
    sql = "run (trio/_core/_run.py:1);fetched (geminibot/store/crawlstore.py:3)"
    parse = "run (x.py:1);extract (geminibot/crawl/adapters.py:40);parse (geminibot/gemini/gemtext.py:2)"
    policy = (
        "run (x.py:1);may_fetch (geminibot/policy/site_policy.py:5);normalise (geminibot/urls.py:1)"
    )
    idle = "run (x.py:1);get_events (trio/_core/_io_epoll.py:243) 9"  # waiting: dropped
    tcp = "open (geminibot/gemini/client.py:1);connect (trio/_socket.py:1132) 2"
    lines = [f"{tls} 5", f"{sql} 3", f"{parse} 2", f"{policy} 1", "run (trio/_core/_run.py:9) 4"]
    assert space_crawl.split_samples([*lines, idle, tcp]) == {
        "TLS": 5,
        "SQLite": 3,
        "parsing": 3,  # geminibot/urls.py inside the policy's call counts as parsing
        "other": 4,
        "TCP": 2,
    }
    assert space_crawl.classify("may_fetch (geminibot/policy/site_policy.py:5)") == "policy"
    # The client's own TCP connect and TLS connection (geminibot.gemini.tls)
    connect = "_connect (geminibot/gemini/client.py:1);open_tcp (geminibot/gemini/tls.py:9)"
    assert space_crawl.classify(connect) == "TCP"
    wait = "_exchange (geminibot/gemini/client.py:1);receive_some (geminibot/gemini/tls.py:9)"
    assert space_crawl.classify(wait) == "TLS"


def test_normal_hosts() -> None:
    space = Space(12, 400, 7)
    kinds = {
        space.behaviour(i)
        for i in range(12)
        if space_crawl.normal_host(space, f"gemini://{space.host(i)}/x")
    }
    assert kinds == {"normal"}
    assert not space_crawl.normal_host(space, "gemini://elsewhere.test/")


def test_address_rules() -> None:
    assert address_rules(7000, 0) == ["*.space.test:1965:127.0.0.1:7000"]
    rules = address_rules(7000, 10)
    assert len(rules) == 1000  # by the last three digits
    assert rules[3] == f"h*003.space.test:1965:127.0.1.{address_number(3, 10)}:7000"
    with pytest.raises(ValueError):
        address_rules(7000, MAX_ADDRESSES + 1)
    assert loopback_address(MAX_ADDRESSES) == "127.0.1.254"
    with pytest.raises(ValueError):
        loopback_address(MAX_ADDRESSES + 1)


def test_addresses_say_nothing_of_behaviour() -> None:
    """Hosts of each behaviour (host number mod 10) are spread over most addresses: with
    N mod 100, every maze host shared the same ten."""
    space = Space(4400, 60_000)
    for kind in ("maze", "calendar", "normal"):
        hosts = [i for i in range(space.hosts) if space.behaviour(i) == kind]
        assert len({address_number(i, 100) for i in hosts}) >= 60
    per_address = Counter(address_number(i, 100) for i in range(1000))
    assert set(per_address.values()) == {10}


def test_next_host_choice_on_a_small_frontier(tmp_path: Path) -> None:
    """The benchmark's measurement runs end to end (the figures of a large frontier are
    the benchmark's): 50 hosts, 500 queued URLs."""
    figures = space_crawl.choice_latency(tmp_path / "f.db", 50, 500)
    assert figures["queued"] == 500
    assert set(figures) >= {"group_by_ms_median", "choice_ms_median", "choice_ms_p99"}


def _tree_url(space: Space, i: int, j: int) -> str:
    return f"gemini://{space.host(i)}/p/{j}.gmi"


def _copy(space: Space, i: int, j: int, day: int) -> str:
    """The content hash of ``/p/j`` on host ``i`` as a crawl fetched it on ``day``."""
    return content_hash(space.tree_page(i, j, day).encode())


def test_space_page_and_path_kind() -> None:
    space = Space(12, 400, 7)
    assert space_crawl.space_page(space, _tree_url(space, 3, 17)) == (3, "/p/17.gmi")
    assert space_crawl.space_page(space, f"gemini://{space.host(3)}/p/17.gmi?q") == (
        3,
        "/p/17.gmi?q",
    )
    assert space_crawl.space_page(space, f"gemini://{space.host(3)}/") == (3, "/")
    for url in ("gemini://elsewhere.test/p/1.gmi", f"https://{space.host(3)}/"):
        assert space_crawl.space_page(space, url) is None
    assert space_crawl.path_kind("gemini://h.test/maze/ab1/cd2/") == "/maze/"
    assert space_crawl.path_kind("gemini://h.test/dup/a.gmi?ref=home") == "/dup/"
    assert space_crawl.path_kind("gemini://h.test/") == "/"
    assert space_crawl.path_kind("gemini://h.test/robots.txt") == "/robots.txt"


def test_compare_days_puts_every_difference_in_a_bucket() -> None:
    """Re-indexed against changed: each page the space changed and each page re-indexed
    is counted once, under its cause."""
    space = Space(12, 400, 7)
    up = next(i for i in range(12) if space.behaviour(i) == "normal")
    gone = next(i for i in range(12) if space.answers(i, 0) and not space.answers(i, 1))
    changed = [j for j in range(space.tree_size(up)) if space.changed(up, j, 1)]
    same = [j for j in range(space.tree_size(up)) if not space.changed(up, j, 1)]
    gone_changed = next(j for j in range(space.tree_size(gone)) if space.changed(gone, j, 1))
    assert len(changed) >= 3 and len(same) >= 3
    page = space_crawl.Page
    before = {  # copies fetched on day 0
        _tree_url(space, up, changed[0]): page(1, 10.0, 20, _copy(space, up, changed[0], 0)),
        _tree_url(space, up, changed[1]): page(2, 10.0, 20, _copy(space, up, changed[1], 0)),
        _tree_url(space, up, changed[2]): page(3, 10.0, 20, _copy(space, up, changed[2], 0)),
        _tree_url(space, up, same[0]): page(4, 10.0, 20),  # same, refetched, same row
        _tree_url(space, up, same[1]): page(5, 10.0, 20),  # same, re-indexed: status
        _tree_url(space, gone, gone_changed): page(
            6, 10.0, 20, _copy(space, gone, gone_changed, 0)
        ),
        f"gemini://{space.host(up)}/dup/b.gmi": page(7, 10.0, 20),  # re-indexed
    }  # changed[0] is re-indexed, [1] refetched (same row), [2] not refetched
    after = dict(before)
    after[_tree_url(space, up, changed[0])] = page(11, 99.0, 20)
    after[_tree_url(space, up, changed[1])] = page(  # same row: the store kept its copy
        2, 99.0, 20, _copy(space, up, changed[1], 0)
    )
    after[_tree_url(space, up, same[0])] = page(4, 99.0, 20)
    after[_tree_url(space, up, same[1])] = page(12, 99.0, 51)
    after[f"gemini://{space.host(up)}/dup/b.gmi"] = page(13, 99.0, 20)
    after[f"gemini://{space.host(up)}/maze/x1/"] = page(14, 98.0, 20)  # new
    figures = space_crawl.compare_days(space, 1, before, after)
    assert figures["fetch_times"] == [98.0, 99.0, 99.0, 99.0, 99.0, 99.0]
    assert figures["pages_refetched"] == 6
    assert figures["not_refetched"] == {"other /p/": 1, "host gone": 1}
    assert figures["pages_reindexed"] == 4
    assert figures["changed_since_copy"] == 4
    assert figures["changed_before_today"] == figures["copies_of_no_revision"] == 0
    assert figures["changed_and_reindexed"] == 1
    assert sum(figures["changed_not_reindexed"].values()) == 3
    assert figures["changed_not_reindexed"]["refetched, not re-indexed"] == 1
    assert figures["changed_not_reindexed"]["not refetched (not due, or the run stopped)"] == 1
    assert sum(figures["reindexed_not_changed"].values()) == 3
    assert figures["reindexed_not_changed"] == {
        "status 20 -> 51 /p/": 1,
        "same status 20, another row /dup/": 1,
        "new URL /maze/": 1,
    }


def test_a_page_rewritten_under_its_row_id_at_the_same_instant_counts_as_reindexed() -> None:
    """SQLite gives a replaced last row its id back, and two runs on one mock clock can
    fetch at the same instant: a new body still says the page was fetched and re-indexed
    (the flake of test_a_day_cut_short_leaves_its_changes_to_the_next)."""
    space = Space(12, 400, 7)
    up = next(i for i in range(12) if space.behaviour(i) == "normal")
    j = next(j for j in range(space.tree_size(up)) if space.changed(up, j, 1))
    url = _tree_url(space, up, j)
    before = {url: space_crawl.Page(204, 10.0, 20, _copy(space, up, j, 0))}
    after = {url: space_crawl.Page(204, 10.0, 20, _copy(space, up, j, 1))}
    figures = space_crawl.compare_days(space, 1, before, after)
    assert figures["pages_refetched"] == figures["pages_reindexed"] == 1
    assert figures["changed_and_reindexed"] == 1
    assert figures["changed_not_reindexed"] == {}


def test_the_space_server_moves_to_the_next_day(tmp_path: Path) -> None:
    """SIGUSR1: the next day on the same port (so the same pinned certificate)."""
    server, port = space_crawl.start_space(12, 400, 0)
    try:
        assert port > 0
        assert space_crawl.next_day(server) == 1
        assert space_crawl.next_day(server) == 2
    finally:
        server.kill()
        server.wait()


def test_copy_and_checkpoint_a_crawl_db(tmp_path: Path) -> None:
    from geminibot.store.db import connect

    conn = connect(tmp_path / "a.db")
    with conn:
        conn.execute(
            "INSERT INTO decisions (url, host, allowed, reason, at) VALUES ('u', 'h', 1, 'r', 0)"
        )
    conn.close()
    space_crawl.copy_db(tmp_path / "a.db", tmp_path / "b.db")
    size, rows = space_crawl.checkpointed(tmp_path / "b.db")
    assert rows == {"pages": 0, "links": 0, "fetches": 0, "decisions": 1}
    assert size == space_crawl.db_bytes(tmp_path / "b.db") > 0
    assert not (tmp_path / "b.db-wal").exists() or (tmp_path / "b.db-wal").stat().st_size == 0


def test_requests_by_kind(tmp_path: Path) -> None:
    from geminibot.store.db import connect

    conn = connect(tmp_path / "a.db")
    rows = [
        ("gemini://h/robots.txt", 20),
        ("gemini://h/robots2.txt", 51),
        ("gemini://h/agents.txt", None),
        ("gemini://h/p/1.gmi", 20),
        ("gemini://h/p/2.gmi", 44),
        ("gemini://h/p/3.gmi", None),
        ("gemini://h/p/4.gmi", 51),
    ]
    with conn:
        conn.executemany(
            "INSERT INTO fetches (url, host, status, started_at, duration) VALUES (?, 'h', ?, 0, 0)",
            rows,
        )
    conn.close()
    assert space_crawl.last_fetch(tmp_path / "a.db") == 7
    assert space_crawl.requests_by_kind(tmp_path / "a.db", 1) == {
        "policy files": 2,
        "pages": 2,
        "44 slow down": 1,
        "failed (no answer)": 1,
    }
    assert space_crawl.requests_by_kind(tmp_path / "a.db", 7) == {}


def test_peak_rss_is_the_childs_own_not_the_parents(tmp_path: Path) -> None:
    """A crawl started by a benchmark holding a lot of memory reports its own peak: the
    ``ru_maxrss`` of ``wait4`` counted the parent's pages at the fork (2.3 GiB "revisit
    peaks" that were the benchmark's own table of 750,000 pages)."""
    import os
    import subprocess

    from machine import measured_argv, peak_rss_kib

    held = bytearray(400 * 1024 * 1024)  # the parent's: 400 MiB, every page touched
    for at in range(0, len(held), 4096):
        held[at] = 1
    peak_file = tmp_path / "peak.kib"
    argv = [*measured_argv("json.tool", peak_file, 86400.0), "--help"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert usage.ru_maxrss > 400 * 1024  # what the benchmark used to report
    assert 0 < peak_rss_kib(peak_file) < 100 * 1024
    del held


def test_measured_runs_the_module_with_its_clock_ahead(tmp_path: Path) -> None:
    import subprocess
    import time

    from machine import measured_argv, peak_rss_kib

    probe = tmp_path / "probe.py"
    probe.write_text("import sys, time\nprint(time.time(), sys.argv[1:])\n")
    argv = [*measured_argv("probe", tmp_path / "peak.kib", 86400.0), "a", "--b"]
    out = subprocess.run(
        argv, capture_output=True, text=True, check=True, cwd=tmp_path, env={"PYTHONPATH": "."}
    ).stdout.split(" ", 1)
    assert float(out[0]) - time.time() == pytest.approx(86400.0, abs=60)
    assert out[1].strip() == "['a', '--b']"
    assert peak_rss_kib(tmp_path / "missing.kib") == 0


def test_a_copy_older_than_an_earlier_days_change_is_changed() -> None:
    """Day 2 revisits a database whose copies are of day 0 or day 1 (a day-1 revisit cut
    by --max-time leaves day-0 copies): a page the space changed on day 1 only, its copy
    from day 0, differs from it on day 2, so re-indexing it is right. Counted as changed
    (``changed_before_today``), not as a page re-indexed unchanged."""
    space = Space(12, 400, 7)
    up = next(i for i in range(12) if space.behaviour(i) == "normal")
    size = space.tree_size(up)
    day1_only = [j for j in range(size) if space.changed(up, j, 1) and not space.changed(up, j, 2)]
    never = next(j for j in range(size) if space.revision(up, j, 2) == 0)
    assert len(day1_only) >= 3
    old, fresh, bogus = (_tree_url(space, up, j) for j in day1_only[:3])
    page = space_crawl.Page
    before = {
        old: page(1, 10.0, 20, _copy(space, up, day1_only[0], 0)),  # day 1 did not reach it
        fresh: page(2, 20.0, 20, _copy(space, up, day1_only[1], 1)),  # refetched on day 1
        bogus: page(3, 10.0, 20, "0" * 64),  # a hash no revision has
        _tree_url(space, up, never): page(4, 10.0, 20, "1" * 64),  # never changed: not hashed
    }
    after = dict(before)
    after[old] = page(11, 30.0, 20, _copy(space, up, day1_only[0], 2))  # re-indexed
    after[fresh] = page(2, 30.0, 20, before[fresh].content_hash)  # unchanged
    figures = space_crawl.compare_days(space, 2, before, after)
    assert figures["pages_reindexed"] == 1
    assert figures["reindexed_not_changed"] == {}
    assert figures["changed_since_copy"] == figures["changed_and_reindexed"] == 1
    assert figures["changed_before_today"] == 1
    assert figures["copies_of_no_revision"] == 1
    path = [f"/p/{j}.gmi" for j in day1_only[:2]]
    assert space_crawl.held_revision(space, up, path[1], 2, before[fresh].content_hash) == 1
    assert space_crawl.held_revision(space, up, path[0], 2, before[old].content_hash) == 0


def test_a_gemlog_index_with_a_new_post_is_changed() -> None:
    """A gemlog's index changes on the days its gemlog gains a post, and only then: its
    copy re-indexed that day is a changed page; the new post is a new URL."""
    space = Space(12, 400, 7)
    blog = next(i for i in range(12) if space.gemlogs.has(i))
    posting = next(d for d in range(1, 30) if space.gemlogs.posted(blog, d))
    quiet = next(d for d in range(1, 30) if not space.gemlogs.posted(blog, d))
    host = space.host(blog)
    index, post = f"gemini://{host}/gemlog/", f"gemini://{host}/gemlog/"
    post += f"{space.gemlogs.posts(blog, posting) - 1}.gmi"

    def copy(day: int) -> str:
        return content_hash(space.respond(host, "/gemlog/", day).body)

    assert copy(posting) != copy(posting - 1) and copy(quiet) == copy(quiet - 1)
    page = space_crawl.Page
    before = {index: page(1, 10.0, 20, copy(posting - 1))}
    after = {index: page(2, 20.0, 20, copy(posting)), post: page(3, 20.0, 20)}
    figures = space_crawl.compare_days(space, posting, before, after)
    assert figures["changed_since_copy"] == figures["changed_and_reindexed"] == 1
    assert figures["reindexed_not_changed"] == {"new URL /gemlog/": 1}
    assert space_crawl.held_revision(space, blog, "/gemlog/", posting, copy(posting - 1)) == (
        space.revision_of(blog, "/gemlog/", posting) - 1
    )
