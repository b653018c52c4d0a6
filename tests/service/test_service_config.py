"""``geminibot serve``'s settings checked whole before anything starts: each value out of
its range or form is one line naming the setting and its line in the file (or its flag),
exit 2, and nothing is created; the service's defaults are its commands' own; every
component is started so that the working directory cannot shadow the package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from commands import run_main

from geminibot import defaults as shared
from geminibot.cli import build_parser
from geminibot.service.cli import components
from geminibot.service.config import defaults

SEEDED = '[crawl]\nseeds = ["gemini://example.org/"]\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[search]\nport = 70000\n", "c.toml:4: search.port = 70000: must be 1 to 65535"),
        ("[metrics]\n\nport = 0\n", "c.toml:5: metrics.port = 0: must be 1 to 65535"),
        ("min_delay = -5\n", "c.toml:3: crawl.min_delay = -5.0: must be 0 or more (seconds)"),
        ("concurrency = 0\n", "c.toml:3: crawl.concurrency = 0: must be 1 or more"),
        ("role = 'crawler'\n", 'crawl.role = "crawler": must be one of indexer, archiver,'),
        ("allow_hosts = ['gemini://x/']\n", 'crawl.allow_hosts: "gemini://x/": must be a host'),
        ("connect_to = ['x.test:1965']\n", 'crawl.connect_to: "x.test:1965": expected HOST:'),
        ("allow_addresses = ['10.0.0.0/33']\n", 'crawl.allow_addresses: "10.0.0.0/33": must'),
        ("[service]\nrestart_delay = 0\n", "c.toml:4: service.restart_delay = 0.0: must be more"),
        ("[service]\nbackground_nice = 20\n", "service.background_nice = 20: must be 0 to 19"),
        ("[service]\nstop_timeout = 1e9\n", "service.stop_timeout = 1000000000.0: must be at"),
        ("[index]\nauthority_every = -1\n", "c.toml:4: index.authority_every = -1.0: must be 0"),
        ("[search]\nhost = 'every address'\n", 'search.host = "every address": must be an IP'),
        ("[search]\nhostname = 'a/b'\n", 'search.hostname = "a/b": must be a host name'),
        ("[portal]\nport = 'http'\n", 'c.toml:4: portal.port = "http": must be a whole number'),
        ("[service]\ndb = 'mysql://db/'\n", 'service.db = "mysql://db/": must be an SQLite'),
    ],
)
def test_a_value_out_of_its_range_or_form_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)  # where the default database and certificates would go
    path = tmp_path / "c.toml"
    path.write_text(SEEDED + text)
    done = run_main(["serve", "--config", str(path)])
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]  # nothing started


def test_seeds_that_are_not_urls_are_named_with_their_line(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    for seeds, expected in (
        ('["gemini://a.test/", "a.test"]', 'c.toml:3: crawl.seeds: "a.test": not an absolute'),
        ('["ftp://a.test/"]', 'crawl.seeds: "ftp://a.test/": not a gemini:// or http(s)://'),
        ('["gemini:///"]', 'crawl.seeds: "gemini:///": URL has no host'),
    ):
        path.write_text(f"# the engine\n[crawl]\nseeds = {seeds}\n")
        done = run_main(["serve", "--config", str(path)])
        assert done.returncode == 2 and expected in done.stderr, done.stderr


def test_paths_and_ports_checked_against_each_other_and_the_disk(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    (tmp_path / "a-file").write_text("")
    for text, expected in (
        (f"[service]\ndb = '{tmp_path}'\n", "names a folder, not a file"),
        (f"[search]\ncerts = '{tmp_path / 'a-file'}'\n", "names a file, not a folder"),
        (f"[search]\ncerts = '{tmp_path / 'a-file' / 'x'}'\n", "a-file is a file, not a folder"),
        ("[search]\nport = 9465\n", "search.port and metrics.port are both 9465"),
        ("[service]\nrestart_max = 0.5\n", "restart_max must not be below"),
    ):
        path.write_text(SEEDED + text)
        done = run_main(["serve", "--config", str(path)])
        assert done.returncode == 2 and expected in done.stderr, done.stderr


def test_flags_are_checked_as_the_file_is(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(SEEDED)
    for argv, expected in (
        (["--search-port", "70000"], "--search-port 70000: must be 1 to 65535"),
        (["--crawl-min-delay", "-1"], "--crawl-min-delay -1.0: must be 0 or more"),
        (["--crawl-seeds", "example.org"], '--crawl-seeds: "example.org": not an absolute'),
        (["--crawl-concurrency", "many"], "'many': must be a whole number"),
    ):
        done = run_main(["serve", "--config", str(path), *argv])
        assert done.returncode == 2 and expected in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1


def test_the_service_and_each_command_have_one_set_of_defaults() -> None:
    parser = build_parser()
    crawl = parser.parse_args(["crawl", "gemini://a.test/", "--db", "x.db"])
    search = parser.parse_args(["serve-search", "--db", "x.db"])
    portal = parser.parse_args(["portal"])
    ours = defaults()
    assert ours["crawl"]["min_delay"] == crawl.min_delay == shared.CRAWL_MIN_DELAY == 0.0
    assert ours["crawl"]["concurrency"] == crawl.concurrency == shared.CRAWL_CONCURRENCY
    assert ours["crawl"]["role"] == crawl.role == shared.CRAWL_ROLE
    assert ours["search"]["port"] == search.port == 1965
    assert ours["search"]["certs"] == search.certs == shared.SEARCH_CERTS
    assert search.host is None and search.hostname is None  # the defaults below apply
    assert ours["search"]["host"] == shared.LISTEN_HOST
    assert ours["search"]["hostname"] == shared.SEARCH_HOSTNAME
    assert (ours["portal"]["host"], ours["portal"]["port"]) == (portal.host, portal.port)


def test_components_run_the_installed_package_and_take_the_loopback_rules() -> None:
    settings = defaults()
    settings["crawl"]["seeds"] = ["gemini://a.test/"]
    settings["crawl"]["test_range"] = True
    settings["crawl"]["connect_to"] = ["*.test:1965:127.0.0.1:1966"]
    settings["portal"]["enabled"] = True
    started = components(settings)
    assert {c.name for c in started} == {"crawl", "index", "authority", "search", "portal"}
    for component in started:  # safe path: the working directory is not on sys.path
        assert component.argv[:4] == (sys.executable, "-P", "-m", "geminibot")
    argv = {c.name: c.argv for c in started}
    for name in ("crawl", "portal"):
        assert "--test-range" in argv[name]
        assert "*.test:1965:127.0.0.1:1966" in argv[name]
    assert argv["crawl"][argv["crawl"].index("--min-delay") + 1] == "0.0"
    index = next(c for c in started if c.name == "index")
    assert index.stop_after == ("crawl",)
