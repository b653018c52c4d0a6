"""docs/operating.md's set-ups, started as written: the test range's and the public
engine's settings are read from the document itself (so the two cannot drift), their
ports moved to free ones and the public one's addresses to loopback by flags (which win
over the file), the hosts they crawl answered by capsules served on loopback.

The test range is started by the installed ``geminibot`` script from a folder that
holds a ``geminibot/`` package of its own which breaks on import: no component dies of
it. Stopped by SIGTERM during its crawl (a request to its last host held unanswered), it
leaves the index current (``index status --verify``, and no updater said to run);
started again, it computes link authority only once the crawl has been round its three
hosts. The public set-up comes up whole and stops cleanly. A component that keeps
exiting with a usage error stops the service with its message."""

from __future__ import annotations

import re
import signal
import sqlite3
import sys
import tomllib
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import cryptography.hazmat.primitives.serialization  # noqa: F401  (ignition uses it unimported)
import ignition
import pytest
from commands import run_main
from crawl.served_capsules import capsule_server_thread, generate
from loopback import free_port, held_connections
from service_process import DEADLINE, SEARCH_EVERY, Service, resolve_to_loopback

DOC = Path(__file__).resolve().parents[2] / "docs" / "operating.md"
#: The generated capsules of the test range. The first start is stopped while its crawl
#: waits on the last host, routed to a port that never answers.
HOSTS, PAGES = 3, 60
#: The public set-up's seeds' hosts, served as capsules on loopback.
PUBLIC_HOSTS = ("geminiprotocol.net", "kennedy.gemi.dev")


def setup_block(name: str) -> str:
    """The TOML block under ``<!-- setup: NAME -->`` in docs/operating.md."""
    found = re.search(rf"<!-- setup: {name} -->\s*```toml\n(.*?)```", DOC.read_text(), re.S)
    assert found is not None, f"no {name} set-up in {DOC}"
    return found[1]


@pytest.fixture(scope="module")
def capsules(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The test range's hosts (host00.test...) and the public seeds' on one capsule
    server on loopback; its port."""
    root = tmp_path_factory.mktemp("capsules")
    generate(root / "site", HOSTS, PAGES)
    for n, host in enumerate(PUBLIC_HOSTS):
        (root / "site" / host).mkdir()
        other = PUBLIC_HOSTS[(n + 1) % len(PUBLIC_HOSTS)]
        text = f"# {host}\n\nsmall web of {host}\n=> gemini://{other}/ a neighbour\n"
        (root / "site" / host / "index.gmi").write_text(text)
    with capsule_server_thread(root / "site", root / "certs") as port:
        yield port


def searched(port: int, query: str, expected: str) -> Any:
    """A function that asks the search capsule on ``port`` (as ``localhost``) and returns
    its page when it holds ``expected``."""

    def ask() -> str | None:
        try:
            answer = ignition.request(f"gemini://localhost:{port}/search?{query}", timeout=10)
        except Exception:  # not listening yet
            return None
        body = answer.raw_body.decode("utf-8") if answer.status == "20" else ""
        return body if expected in body else None

    return ask


def fetched(url: str) -> Any:
    """A function that returns the text at ``url`` (HTTP), or None while nothing answers."""

    def get() -> str | None:
        try:
            return str(urllib.request.urlopen(url, timeout=10).read().decode())
        except OSError:  # not listening yet
            return None

    return get


def stop(service: Service) -> int:
    service.proc.send_signal(signal.SIGTERM)
    code = service.proc.wait(timeout=DEADLINE)
    service._reader.join(timeout=10)
    return code


@pytest.mark.usefixtures("ignition_hosts")
def test_the_test_range_as_written_from_a_folder_that_shadows_the_package(
    tmp_path: Path, capsules: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = setup_block("test-range")
    settings = tomllib.loads(text)
    assert settings["crawl"]["test_range"] and "min_delay" not in settings["crawl"]
    opt = tmp_path / "opt"
    (opt / "geminibot").mkdir(parents=True)  # as the venv /opt/geminibot seen from /opt
    (opt / "geminibot" / "__init__.py").write_text("raise ImportError('not the package')\n")
    (opt / "test-range.toml").write_text(text)
    search, portal, metrics = free_port(), free_port(), free_port()
    argv = ["--config", "test-range.toml", "--search-port", str(search)]
    argv += ["--portal-port", str(portal), "--metrics-port", str(metrics)]
    # At the niceness of the test's own process: the crawl and the index at 10, beside a
    # busy suite's workers at 0, waited for CPU far longer than they used it.
    argv += ["--service-background-nice", "0"]
    every_host = ["--crawl-connect-to", f"*.test:1965:127.0.0.1:{capsules}"]
    last_host = f"host{HOSTS - 1:02d}.test"
    resolve_to_loopback(monkeypatch, "localhost")
    db = opt / settings["service"]["db"]

    with held_connections() as held:  # the last host never answers: the crawl goes on
        first_argv = [*argv, "--crawl-connect-to", f"{last_host}:1965:127.0.0.1:{held.port}"]
        service = Service([*first_argv, *every_host], cwd=opt, entry_point=True)
        try:  # stopped as soon as the crawl, its first pages stored, waits on the last host
            service.wait_for(held.first.is_set, "a request to the last host")
        finally:
            assert stop(service) == 0, service.proc.stderr.read()  # type: ignore[union-attr]
    first = service.records
    for name in ("crawl", "index", "authority", "search", "portal"):
        assert [r for r in first if r["component"] == name and r.get("message") == "started"]
    assert not [r for r in first if str(r.get("message", "")).startswith("exited with")]
    (run,) = [r["event"] for r in first if r["component"] == "crawl" and "event" in r]
    # (the last host is reached through the others' pages; its request never timed out)
    assert run["interrupted"] and run["pages"] > 0 and not run["hosts_skipped"], run
    status = run_main(["index", "status", "--db", str(db), "--verify"])
    assert status.returncode == 0, status.stdout  # a clean stop leaves the index current
    assert "verified" in status.stdout and "an updater" not in status.stdout

    again = Service([*argv, *every_host], cwd=opt, entry_point=True)
    try:  # the crawl goes on from where it stopped; authority once it has been round
        again.wait_for(searched(search, "word1", "host00.test/p1.gmi"), "a page", SEARCH_EVERY)
        # The portal reaches the test capsules on loopback too (test_range, connect_to).
        shown = fetched(f"http://127.0.0.1:{portal}/gemini/host01.test/p2.gmi")
        assert "Page 2 of host 1" in again.wait_for(shown, "the portal")
        computed = again.wait_for(
            lambda: [e for e in _authority(first) + _authority(again.records) if "hosts" in e],
            "link authority computed",
        )
        last = searched(search, f"word{PAGES // HOSTS - 2}", f"{last_host}/")
        again.wait_for(last, "the last host's pages searchable", SEARCH_EVERY)
    finally:
        assert stop(again) == 0, again.proc.stderr.read()  # type: ignore[union-attr]
    # Never over a part of the crawl: the first computation ranked every page it made.
    with closing(sqlite3.connect(db)) as conn:
        pages = conn.execute("SELECT count(*) FROM pages WHERE text_indexed").fetchone()[0]
    assert (computed[0]["hosts"], computed[0]["pages"]) == (HOSTS, pages)
    assert run_main(["index", "status", "--db", str(db), "--verify"]).returncode == 0


def _authority(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["event"] for r in records if r["component"] == "authority" and "event" in r]


@pytest.mark.usefixtures("ignition_hosts")
def test_the_public_engine_as_written_comes_up_whole_and_stops(
    tmp_path: Path, capsules: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = setup_block("public")
    settings = tomllib.loads(text)
    assert settings["search"]["host"] == "0.0.0.0" and "test_range" not in settings["crawl"]
    (tmp_path / "public.toml").write_text(text)
    search, portal, metrics = free_port(), free_port(), free_port()
    argv = ["--config", "public.toml", "--search-host", "127.0.0.1"]
    argv += ["--search-port", str(search), "--portal-port", str(portal)]
    argv += ["--metrics-port", str(metrics), "--crawl-allow-addresses", "127.0.0.1"]
    for host in PUBLIC_HOSTS:
        argv += ["--crawl-connect-to", f"{host}:1965:127.0.0.1:{capsules}"]
    name = settings["search"]["hostname"]
    resolve_to_loopback(monkeypatch, name)

    def answered() -> bool:
        try:
            answer = ignition.request(f"gemini://{name}:{search}/about", timeout=10)
        except Exception:  # not listening yet
            return False
        return answer.status == "20"

    service = Service(argv, cwd=tmp_path)
    try:
        service.wait_for(answered, "the search capsule's /about", SEARCH_EVERY)
        service.wait_for(fetched(f"http://127.0.0.1:{portal}/"), "the portal")
        up = service.wait_for(fetched(f"http://127.0.0.1:{metrics}/metrics"), "metrics")
        for component in ("crawl", "index", "authority", "search", "portal"):
            assert f'geminibot_component_up{{component="{component}"}} 1.0' in up
    finally:
        assert stop(service) == 0, service.proc.stderr.read()  # type: ignore[union-attr]
    assert not [r for r in service.records if str(r.get("message", "")).startswith("exited")]
    crawl = next(r for r in service.records if r["component"] == "crawl" and "argv" in r)
    assert crawl["argv"][:4] == [sys.executable, "-P", "-m", "geminibot"]
    assert "--test-range" not in crawl["argv"]
    assert crawl["argv"][crawl["argv"].index("--min-delay") + 1] == "0.0"


def test_a_component_that_keeps_exiting_with_a_usage_error_stops_the_service(
    tmp_path: Path,
) -> None:
    """Its message is the service's one line, exit 2, not a restart for ever. The crawl
    here: it checks its arguments before it imports what it runs."""
    path = tmp_path / "engine.toml"
    path.write_text(
        f'[service]\ndb = "{tmp_path / "e.db"}"\nrestart_delay = 0.1\nrestart_max = 0.1\n'
        '[crawl]\nseeds = ["gemini://a.test/"]\nargs = ["--concurrency", "0"]\n'
        "[index]\nenabled = false\n[search]\nenabled = false\n[metrics]\nenabled = false\n"
    )
    service = Service(["--config", str(path)])
    code = service.proc.wait(timeout=DEADLINE)
    service._reader.join(timeout=10)
    stderr = service.proc.stderr.read()  # type: ignore[union-attr]
    assert code == 2, stderr
    assert stderr.splitlines() == [
        "geminibot: serve: crawl: argument --concurrency: 0 must be 1 or more"
    ]
    assert len([r for r in service.records if r.get("message") == "started"]) == 3
