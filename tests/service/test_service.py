"""``geminibot serve``: started from a config file over generated capsules, it crawls,
keeps the index current and answers a real Gemini client (ignition) from its search
capsule; its metrics are read over HTTP; a component killed is restarted and logged;
SIGTERM stops it all with exit 0."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import cryptography.hazmat.primitives.serialization  # noqa: F401  (ignition uses it unimported)
import ignition
import pytest
from commands import run_main
from service_process import (
    DEADLINE,
    NAME,
    SEARCH_EVERY,
    Service,
    config,
    resolve_to_loopback,
    served_capsules,
)

from geminibot.service.cli import components
from geminibot.service.config import OPTIONS, ConfigError, default_config, defaults, read_file
from geminibot.service.metrics import Metrics

#: The service's ``background_nice`` in the end-to-end test: another than the default
#: (10, held by test_background_nice_is_taken_at_both_ends), and small, so that the crawl
#: and the index are not left waiting for the CPU beside a busy suite's workers.
BACKGROUND = 1


@pytest.fixture
def names_resolve_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    resolve_to_loopback(monkeypatch, NAME)


@pytest.fixture
def capsules(tmp_path: Path) -> Iterator[tuple[list[str], int]]:
    with served_capsules(tmp_path) as served:
        yield served


@pytest.mark.usefixtures("names_resolve_to_loopback", "ignition_hosts")
def test_the_service_crawls_serves_search_and_metrics_and_stops_on_sigterm(
    tmp_path: Path, capsules: tuple[list[str], int]
) -> None:
    seeds, port = capsules
    path, search_port, metrics_port = config(tmp_path, seeds, port, background_nice=BACKGROUND)
    service = Service(["--config", str(path)])
    try:
        base = f"gemini://{NAME}:{search_port}"

        def found() -> str | None:
            try:
                answer = ignition.request(base + "/search?word3", timeout=10)
            except Exception:  # not listening yet
                return None
            body = answer.raw_body.decode("utf-8") if answer.status == "20" else ""
            return body if "host00.test/p3.gmi" in body else None

        body = service.wait_for(found, "the crawled page found through the capsule", SEARCH_EVERY)
        assert "=> gemini://host00.test/p3.gmi" in body

        def scraped() -> str | None:
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            # A scrape while the store is busy has no store figures (the next one reads it).
            return text if "geminibot_pages " in text else None

        metrics = service.wait_for(scraped, "a scrape with the store's figures")
        assert 'geminibot_component_up{component="crawl"} 1.0' in metrics
        assert 'geminibot_component_up{component="index"} 1.0' in metrics
        assert "geminibot_search_request_seconds_count" in metrics
        assert "geminibot_pages " in metrics and "geminibot_index_lag " in metrics
        assert "geminibot_changed_last_day 0.0" in metrics  # a first crawl changes nothing
        # Background work runs at background_nice, the capsule at 0.
        ours = os.nice(0)  # the service inherits the test's own niceness
        for name, nice in (("crawl", BACKGROUND), ("index", BACKGROUND), ("search", 0)):
            (child,) = service.logged(name, "started")
            assert child["nice"] == nice
            stat = Path(f"/proc/{child['pid']}/stat").read_text()
            assert int(stat.rsplit(")", 1)[1].split()[16]) == min(ours + nice, 19)
        # A component that dies is started again, and both are logged.
        (started,) = service.logged("index", "started")
        subprocess.run(["kill", "-9", str(started["pid"])], check=True)
        service.wait_for(lambda: len(service.logged("index", "started")) == 2, "a restart")
        assert service.logged("index", "exited with -9; restarting")
        # Link authority is computed at once (never computed before), logged as one event.
        runs = service.wait_for(
            lambda: [r for r in service.records if r["component"] == "authority" and "event" in r],
            "link authority computed",
        )
        assert {"hosts", "applied_to"} <= set(runs[0]["event"]) or "skipped" in runs[0]["event"]
        metrics = (
            urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
            .read()
            .decode()
        )
        assert "geminibot_authority_runs_total{outcome=" in metrics
    finally:
        service.proc.send_signal(signal.SIGTERM)
        code = service.proc.wait(timeout=DEADLINE)
    assert code == 0, service.proc.stderr.read()  # type: ignore[union-attr]
    service._reader.join(timeout=10)
    for component in ("crawl", "index", "authority", "search"):
        assert service.logged(component, "stopped"), component
    assert service.logged("service", "stopped")
    access = [r for r in service.records if r["component"] == "search" and "event" in r]
    assert any(r["event"].get("status") == 20 for r in access)


def test_the_default_file_is_the_defaults_and_flags_win(tmp_path: Path) -> None:
    assert tomllib.loads(default_config()) == defaults()
    assert all(len(line) <= 80 for line in default_config().splitlines())
    path = tmp_path / "c.toml"
    path.write_text('[crawl]\nseeds = ["gemini://a.test/"]\nconcurrency = 4\n')
    assert read_file(path)["crawl"]["concurrency"] == 4
    assert {o.flag for o in OPTIONS} >= {"--crawl-seeds", "--search-port", "--metrics-host"}
    for text, message in (
        (
            "[crawl]\nconcurrency = 'many'\n",
            'c.toml:2: crawl.concurrency = "many": must be a whole',
        ),
        ("[crawl]\nseed = []\n", "unknown setting crawl.seed"),
        ("[crawler]\n", "unknown section [crawler]"),
        ("[crawl\n", "not TOML"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
            read_file(path)


def test_serve_usage_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[crawl]\nseeds = []\n")
    seeded = tmp_path / "seeded.toml"
    seeded.write_text('[crawl]\nseeds = ["gemini://example.org/"]\n')
    for argv, message in (
        (["--config", str(path)], "crawl.seeds is empty"),
        (["--config", str(tmp_path / "none.toml")], "cannot read"),
        (["--no-crawl-enabled", "--no-index-enabled", "--no-search-enabled"], "nothing to run"),
        (["--config", str(seeded), "--service-background-nice", "20"], "nice 20: must be 0 to 19"),
        (["--config", str(seeded), "--service-background-nice", "-1"], "nice -1: must be 0 to 19"),
    ):
        # In this process: the same main(argv) and exit status as the script's.
        done = run_main(["serve", *argv, "--no-metrics-enabled"])
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and len(done.stderr.splitlines()) == 1


def test_metrics_count_the_computations_of_link_authority() -> None:
    from prometheus_client import generate_latest

    metrics = Metrics({}, lambda: {"authority_age_seconds": 120.0})
    for event in (
        {"pages": 10, "hosts": 3, "applied_to": "search index", "seconds": 2.5},
        {"skipped": "no pages with text yet"},
        {"error": "database is locked"},
        {"error": "database is locked"},
    ):
        metrics.on_event("authority", event)
    text = generate_latest(metrics.registry).decode()
    assert 'geminibot_authority_runs_total{outcome="computed"} 1.0' in text
    assert 'geminibot_authority_runs_total{outcome="skipped"} 1.0' in text
    assert 'geminibot_authority_runs_total{outcome="failed"} 2.0' in text
    assert "geminibot_authority_seconds 2.5" in text
    assert "geminibot_authority_age_seconds 120.0" in text


def test_background_nice_is_taken_at_both_ends() -> None:
    settings = defaults()
    settings["crawl"]["seeds"] = ["gemini://example.org/"]
    niceness = {c.name: c.nice for c in components(settings)}
    assert niceness["crawl"] == niceness["index"] == niceness["authority"] == 10  # default
    for nice in (0, 19):
        settings["service"]["background_nice"] = nice
        niceness = {c.name: c.nice for c in components(settings)}
        assert niceness["crawl"] == niceness["index"] == niceness["authority"] == nice
        assert niceness["search"] == 0


def asked(url: str) -> str:
    """GET ``url`` from the metrics listener; a thread gives its place back just after it
    closes its client, so a request that meets no free thread (closed unanswered) is
    asked again (50 times at most, 0.1 s apart). An HTTP error is raised."""
    for _ in range(49):
        try:
            return urllib.request.urlopen(url, timeout=DEADLINE).read().decode()
        except urllib.error.HTTPError:
            raise
        except (ConnectionError, urllib.error.URLError):
            time.sleep(0.1)
    return urllib.request.urlopen(url, timeout=DEADLINE).read().decode()


def test_the_metrics_listener_answers_metrics_only_within_its_threads_and_time() -> None:
    metrics = Metrics({}, lambda: {"pages": 3})
    port = metrics.serve("127.0.0.1", 0, threads=2, timeout=0.5)
    base = f"http://127.0.0.1:{port}"
    assert "geminibot_pages 3.0" in asked(f"{base}/metrics")
    for path in ("/", "/metrics/x", "/favicon.ico", "/../metrics"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            asked(f"{base}{path}")
        assert refused.value.code == 404, path
    # two clients that send nothing hold both threads; a third is closed at once, and the
    # two are closed when their time is up: then a scrape is answered again
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    for sock in silent:
        sock.settimeout(DEADLINE)
    closed = [sock.recv(1) for sock in reversed(silent)]
    for sock in silent:
        sock.close()
    assert closed == [b"", b"", b""]
    assert "geminibot_pages 3.0" in asked(f"{base}/metrics")
