"""Capsules also crawled over the web, as the census pairs and compares them: by host
name (any port, https before http), both robots.txt needed, at most MAX_COMPARED hosts
compared per census."""

from __future__ import annotations

from pathlib import Path

import pytest

from geminibot.census import web
from geminibot.census.web import web_figures, web_origins
from geminibot.policy.candidates import candidate_paths
from geminibot.policy.site_policy import SitePolicy
from geminibot.store.database import Database
from geminibot.store.db import connect

NOW = 1.8e9
SAME = b"User-agent: *\nDisallow: /private/\n"


def _store(tmp_path: Path, files: list[tuple[str, str, bytes | None]]) -> Database:
    conn = connect(tmp_path / "c.db")
    for host, outcome, body in files:
        conn.execute(
            "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason, status,"
            " body) VALUES (?, 'robots.txt', ?, ?, ?, '', ?, ?)",
            (host, NOW - 60, NOW + 3600, outcome, 20 if body else 51, body),
        )
    return Database("c.db", conn, path=tmp_path / "c.db")


def test_a_capsule_is_paired_with_its_host_names_web_origin(tmp_path: Path) -> None:
    conn = _store(
        tmp_path,
        [
            ("http://a.test", "success", SAME),
            ("https://a.test:8443", "success", SAME),
            ("https://a.test", "unavailable", None),
            ("http://b.test:8080", "success", SAME),
            ("https://b.test:8443", "success", SAME),
            ("http://[::1]:8080", "success", SAME),
            ("b.test", "success", SAME),
        ],
    )
    assert web_origins(conn) == {
        "a.test": "https://a.test",
        "b.test": "https://b.test:8443",
        "[::1]": "http://[::1]:8080",
    }


def test_at_most_max_compared_hosts_are_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files: list[tuple[str, str, bytes | None]] = []
    for name in ("a", "b", "c"):
        files += [(f"{name}.test", "success", SAME), (f"https://{name}.test", "success", SAME)]
    files += [("d.test:1966", "success", SAME), ("https://d.test", "unavailable", None)]
    files[-3] = ("https://c.test", "success", SAME + b"Disallow: /drafts/\n")
    conn = _store(tmp_path, files)
    capsules = ["a.test", "b.test", "c.test", "d.test:1966", "e.test"]
    monkeypatch.setattr(web, "MAX_COMPARED", 3)
    got = {f.key: f.value for f in web_figures(conn, capsules, NOW)}
    assert (got["web.hosts"], got["web.both_robots"], got["web.compared"]) == (4, 3, 3)
    assert got["web.policies"] == {"identical in effect": 2, "differing": 1}
    assert got["web.differences"] == {"path": 1, "wait": 0, "usage": 0}
    monkeypatch.setattr(web, "MAX_COMPARED", 2)  # c.test, the last by name, left out
    got = {f.key: f.value for f in web_figures(conn, capsules, NOW)}
    assert (got["web.both_robots"], got["web.compared"]) == (3, 2)
    assert got["web.policies"] == {"identical in effect": 2, "differing": 0}


def test_at_most_max_compared_paths_are_decided_per_census(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files: list[tuple[str, str, bytes | None]] = []
    for name in ("a", "b", "c"):
        files += [(f"{name}.test", "success", SAME), (f"https://{name}.test", "success", SAME)]
    conn = _store(tmp_path, files)
    one = SitePolicy.from_texts("gemini", robots=SAME)
    per_host = len(candidate_paths(one, one)[0])
    for budget, compared in ((2 * per_host, 2), (2 * per_host - 1, 1)):
        monkeypatch.setattr(web, "MAX_COMPARED_PATHS", budget)
        got = {f.key: f.value for f in web_figures(conn, ["a.test", "b.test", "c.test"], NOW)}
        assert (got["web.both_robots"], got["web.compared"]) == (3, compared)
        assert got["web.compared_in_part"] == 0
