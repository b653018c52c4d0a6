"""geminibot policy check / lint over several dialects, and policy render, as a user runs them."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from geminibot.cli import main
from geminibot.policy.render import load_policy, render
from geminibot.policy.site_policy import detect_dialect

DATA = Path(__file__).parent / "data"


def agents_text(*directives: str) -> str:
    digest = hashlib.sha256("\n".join(directives).encode()).hexdigest()
    return "\n".join(["# version: 1.0", f"*{digest}", *directives]) + "\n"


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    files = {
        "robots": tmp_path / "robots.txt",
        "robots2": tmp_path / "robots2.txt",
        "agents": tmp_path / "policy-c.txt",  # named neutrally: found by content
    }
    files["robots"].write_text("User-agent: *\nDisallow: /private/\nCrawl-delay: 3\n")
    files["robots2"].write_text(
        "crawl: yes\ntrain: no\nrate: 6\n[agent: data-harvester]\ncrawl: no\n"
    )
    files["agents"].write_text(agents_text("/api/ DISALLOW"))
    return files


def test_check_three_files_json(host: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "policy",
            "check",
            str(host["robots"]),
            str(host["robots2"]),
            str(host["agents"]),
            "--agent",
            "geminibot",
            "--at",
            "2026-11-23T07:00Z",
            "--json",
            "/ok",
            "/api/x",
            "/private/y",
        ]
    )
    assert code == 1
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["allowed"] for r in records] == [True, False, False]
    assert records[1]["reasons"][-1]["file"] == "agents.txt"
    assert records[2]["rule"] == {
        "file": "robots.txt",
        "line": 2,
        "directive": "Disallow",
        "pattern": "/private/",
        "group": "*",
    }
    assert records[0]["delay"] == {
        "seconds": 10.0,
        "file": "robots2.txt",
        "line": 3,
        "rule": {
            "file": "robots2.txt",
            "line": 3,
            "directive": "rate",
            "pattern": None,
            "group": None,
        },
        "basis": "rate: 6",
    }
    assert records[0]["at"] == "2026-11-23T07:00:00+00:00"
    usage = {u["directive"]: (u["value"], u["line"]) for u in records[0]["usage"]}
    assert usage["train"] == ("no", 2) and len(usage) == 13
    assert records[0]["sources"] == {
        "robots.txt": str(host["robots"]),
        "robots2.txt": str(host["robots2"]),
        "agents.txt": str(host["agents"]),
    }


def test_check_category_and_text_output(
    host: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["policy", "check", str(host["robots"]), str(host["robots2"]), "--agent", "x", "/ok"]
    assert main([*args, "--category", "data-harvester"]) == 1
    out = capsys.readouterr().out
    assert "robots2.txt: crawl: no for this bot" in out
    assert "wait        10 s between requests (robots2.txt line 3: rate: 6)" in out


def test_check_visit_time_follows_at(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nVisit-time: 0600-0845\nDisallow: /x\n")
    base = ["policy", "check", str(robots), "--agent", "b", "/a"]
    assert main([*base, "--at", "2026-11-23T07:00:00"]) == 0
    assert main([*base, "--at", "2026-11-23T09:00:00+00:00"]) == 1
    assert main([*base, "--at", "2026-11-23T03:00:00-05:00"]) == 0  # 08:00 UTC
    assert main([*base, "--at", "2026-11-23T04:00:00-05:00"]) == 1  # 09:00 UTC


def test_check_usage_errors(host: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    other = host["robots"].with_name("robots-copy.txt")
    other.write_text("User-agent: *\n")
    assert main(["policy", "check", str(host["robots"]), str(other), "--agent", "b", "/"]) == 2
    assert "both robots.txt files" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["policy", "check", str(host["robots"]), "--agent", "b", "--at", "noon", "/"])
    assert exc.value.code == 2


def test_detect_dialect_by_name_then_content() -> None:
    assert detect_dialect("site/robots2.txt", "") == "robots2"
    assert detect_dialect("agents.txt", "") == "agents"
    assert detect_dialect("x/robots.txt", "crawl: yes") == "robots"
    assert detect_dialect("a", agents_text("/a ALLOW")) == "agents"
    assert detect_dialect("b", "# hi\n[agent: monitoring]\n") == "robots2"
    assert detect_dialect("c", "User-agent: *\nDisallow: /\n") == "robots"
    assert detect_dialect("<stdin>", "User-agent: *\ntrain: no\n") == "robots2"


@pytest.mark.parametrize(
    ("name", "text", "line", "code"),
    [
        (
            "robots.txt",
            "User-agent: a\nRobot-version: 2.0\nAllow: /x\nDisallow: ~ [bad\n",
            4,
            "bad-regex",
        ),
        ("robots2.txt", "crawl: yes\nread: yes\ntrain: sometimes\n", 3, "unknown-value"),
        ("agents.txt", agents_text("/a ALLOW", "/b ALOW", "/c DISALLOW"), 4, "bad-directive"),
    ],
)
def test_lint_finds_planted_error_in_each_dialect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, line: int, code: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    main(["policy", "lint", "--json", str(path)])
    found = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert any(f["line"] == line and f["code"] == code for f in found), found
    assert {f["dialect"] for f in found} == {name}


def test_lint_agents_hash_mismatch_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agents.txt"
    path.write_text(agents_text("/a ALLOW").replace("/a ALLOW", "/a DISALLOW"))
    assert main(["policy", "lint", str(path)]) == 1
    assert f"{path}:2: error: hash line says" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["robots", "robots2", "agents"])
def test_render_command_is_byte_identical(fmt: str) -> None:
    cmd = [
        sys.executable,
        "-m",
        "geminibot",
        "policy",
        "render",
        str(DATA / "policy.toml"),
        "--format",
        fmt,
    ]
    first = subprocess.run(cmd, capture_output=True, check=True).stdout
    second = subprocess.run(cmd, capture_output=True, check=True).stdout
    assert first == second == render(load_policy((DATA / "policy.toml").read_bytes()), fmt).encode()  # type: ignore[arg-type]


def test_render_bad_policy_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text('default_policy = "allow"\n[ai]\ntrain = "often"\n')
    assert main(["policy", "render", str(bad), "--format", "robots2"]) == 2
    assert "ai.train must be one of" in capsys.readouterr().err
