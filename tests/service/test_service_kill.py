"""``kill -9`` of the whole service (crawl, index updater, search capsule) at ten random
moments of a crawl: after each restart nothing is lost, and once the crawl is done and
the index has caught up, ``index status --verify`` finds the index and the store agree.

Link authority, a component this property is not about, is configured off
(``authority_every = 0``): one interpreter fewer at each of the eleven starts
(test_service.py covers its start, restart and stop). Its background work runs at the
test's own niceness (``background_nice = 0``): at the default 10, beside a busy suite's
workers, each start's crawl waited for the CPU far longer than it used it."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from commands import run_main
from crawl.served_capsules import RequestCount, capsule_server_thread, generate
from db_rows import rows
from loopback import free_port

#: Kills per test (each start of the service costs CPU for its four interpreters, the
#: service and three components, that import the package and start up, whatever the
#: crawl then does); bounds on each wait (real seconds).
KILLS = 10
DEADLINE = 120.0
#: Each kill waits for 1 to MOST_REQUESTS new requests, then up to PAUSE seconds.
MOST_REQUESTS, PAUSE = 10, 0.1
#: The generated capsules: the ten kills land after at most about 65 requests in all
#: (seeded: 37 targets and 0.45 s of pauses, in which MIN_DELAY lets three hosts answer at
#: most 60 requests a second), so the crawl is still going at the last kill;
#: ``test_kill_nine_of_the_service_loses_nothing`` checks it (URLs still queued).
HOSTS, PAGES = 3, 60
#: Seconds between two requests to a host: the crawl lasts through the kills (the last
#: start, which only has to finish the crawl, goes without it).
MIN_DELAY = 0.05


def start(config: Path) -> subprocess.Popen[str]:
    """The service, its JSON log appended to ``service.log`` beside its config."""
    with config.with_name("service.log").open("a") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "geminibot", "serve", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )


def children_of(proc: subprocess.Popen[str]) -> list[int]:
    """The pids of the components the service started (from /proc: its children now)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid:
                found.append(int(entry.name))
    return found


def wait_gone(pids: list[int]) -> None:
    """Return once each of ``pids`` has ended (at most DEADLINE seconds each): its pidfd
    is readable once it has exited, reaped or not (a zombie holds no file)."""
    for pid in pids:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # ended and reaped already
        try:
            ended, _, _ = select.select([pidfd], [], [], DEADLINE)
            assert ended, f"the component {pid} outlives the service"
        finally:
            os.close(pidfd)


def wait_until(check: object, what: str, every: float) -> None:
    """Ask ``check`` every ``every`` seconds until it says yes (at most DEADLINE)."""
    deadline = time.monotonic() + DEADLINE
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(every)


def test_kill_nine_of_the_service_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261127)
    seeds = generate(tmp_path / "capsules", HOSTS, PAGES)
    db, config = tmp_path / "engine.db", tmp_path / "engine.toml"
    served = RequestCount()
    # The capsule server on a thread of this process: the service is what is killed.
    with capsule_server_thread(tmp_path / "capsules", tmp_path / "certs", access=served) as port:
        search_port = free_port()

        def write_config(min_delay: float) -> None:
            config.write_text(
                f'[service]\ndb = "{db}"\nrestart_delay = 0.2\nbackground_nice = 0\n'
                f"[crawl]\nseeds = {json.dumps(seeds)}\ntest_range = true\n"
                f'min_delay = {min_delay}\nconcurrency = 2\nallow_hosts = ["*.test"]\n'
                f'connect_to = ["*.test:1965:127.0.0.1:{port}"]\n'
                "[index]\nauthority_every = 0\n"
                f'[search]\nport = {search_port}\ncerts = "{tmp_path / "certs"}"\n'
                "[metrics]\nenabled = false\n"
            )

        write_config(MIN_DELAY)
        for _ in range(KILLS):
            before = served.count
            proc = start(config)
            target = before + rng.randint(1, MOST_REQUESTS)
            assert served.wait_for(target, DEADLINE), "the crawl does not go on"
            time.sleep(rng.uniform(0, PAUSE))
            children = children_of(proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            # The components die with it (no orphan keeps the database or the port).
            wait_gone(children)
        assert rows(db, "SELECT count(*) FROM urls WHERE state = 'queued'")[0][0] > 0

        write_config(0.0)
        proc = start(config)  # the last start: it finishes the crawl and catches up
        done = "SELECT count(*) FROM urls WHERE state IN ('queued', 'leased')"
        wait_until(lambda: rows(db, done) == [(0,)], "the crawl finishes", every=0.2)
        status = ["index", "status", "--db", str(db)]
        # Asked in this process: a new interpreter for each ask would cost more CPU the
        # longer the index takes, and the ask is not what this test is about.

        def caught_up() -> bool:
            return run_main([*status, "--json"]).returncode == 0

        wait_until(caught_up, "the index catches up", every=0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE) == 0
    served = {
        f"gemini://{p.parent.name}/{p.name}".replace("/index.gmi", "/")
        for p in (tmp_path / "capsules").glob("*/*.gmi")
    }
    fetched = {str(u) for (u,) in rows(db, "SELECT url FROM pages WHERE status = 20")}
    assert served <= fetched  # every page, despite the kills
    verified = run_main([*status, "--verify", "--json"])  # in this process, as above
    assert verified.returncode == 0, verified.stdout
    check = json.loads(verified.stdout)["verify"]
    assert check["agree"] and check["index_pages"] == check["store_pages"] >= len(served)
    assert os.path.exists(f"{db}.search")
