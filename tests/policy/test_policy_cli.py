"""geminibot policy check / lint, run as a user would (in-process and as a subprocess)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from geminibot.cli import main

ROBOTS = b"User-agent: *\nDisallow: /private/\n\nUser-agent: indexer\nDisallow: /drafts/\n"


@pytest.fixture
def robots_file(tmp_path: Path) -> Path:
    path = tmp_path / "robots.txt"
    path.write_bytes(ROBOTS)
    return path


def test_check_text_and_exit_codes(robots_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(robots_file), "--agent", "bot", "/ok"]) == 0
    assert main(["policy", "check", str(robots_file), "--agent", "bot", "/ok", "/private/x"]) == 1
    out = capsys.readouterr().out
    assert "DISALLOWED  /private/x" in out
    assert "'Disallow: /private/' (line 2)" in out


def test_check_json_fields(robots_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "policy",
            "check",
            str(robots_file),
            "--agent",
            "bot",
            "--as",
            "indexer",
            "--json",
            "/drafts/a",
            "/private/a",
        ]
    )
    assert code == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["url"], x["allowed"]) for x in lines] == [("/drafts/a", False), ("/private/a", True)]
    assert lines[0]["rule"] == {"line": 5, "directive": "Disallow", "pattern": "/drafts/"}
    assert lines[1]["rule"] is None
    assert all(isinstance(x["reason"], str) and x["reason"] for x in lines)


def test_check_strict(robots_file: Path) -> None:
    args = ["policy", "check", str(robots_file), "--agent", "bot", "--as", "indexer", "/private/a"]
    assert main(args) == 0
    assert main([*args, "--strict"]) == 1


def test_check_usage_errors(robots_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(robots_file), "--agent", "bot", "--as", "spider", "/"]) == 2
    assert "unknown virtual agent 'spider'" in capsys.readouterr().err
    assert main(["policy", "check", "/no/such/file", "--agent", "bot", "/"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["policy", "check", str(robots_file), "/"])  # --agent missing
    assert exc.value.code == 2


def test_check_reads_stdin() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "geminibot", "policy", "check", "-", "--agent", "bot", "/private/x"],
        input=ROBOTS,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 1
    assert b"DISALLOWED" in proc.stdout


def test_lint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"User-agent: *\nDisalow: /a\nnonsense\n")
    assert main(["policy", "lint", str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{bad}:2: warning: 'Disalow' is read as 'Disallow' [typo-accepted]",
        f"{bad}:3: error: 'nonsense' is not 'field: value'; ignored [no-separator]",
    ]
    good = tmp_path / "good.txt"
    good.write_bytes(ROBOTS)
    assert main(["policy", "lint", str(good), "--json"]) == 0
    assert capsys.readouterr().out == ""
