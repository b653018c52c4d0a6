"""``geminibot classify`` end to end: help, the three ways to name a bot, --list, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geminibot.classify import Activity, load_registry
from geminibot.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse --help / usage errors
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_teaches_every_activity(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "classify", "--help")
    assert code == 0
    for activity in Activity:
        assert activity.value in out
    assert "most restrictive combination" in out
    assert "docs/classify.md" in out


def test_top_level_help_lists_classify(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "classify" in out


def test_does_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "classify", "--does", "statistics,link")
    assert code == 0
    assert "researcher" in out and "[not-purely-researcher]" in out
    assert "mode: strict" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    words = " ".join(out.split())  # the text wraps where it will
    assert 'gemini-robots-virtual-agents.txt (researcher): "study large-scale' in words


def test_does_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "classify", "--does", "archive,search-index", "--agent", "mybot", "--json"
    )
    assert code == 0
    (line,) = out.splitlines()
    obj = json.loads(line)
    assert obj["profile"]["token"] == "mybot"
    names = [va["name"] for va in obj["classification"]["virtual_agents"]]
    assert names == ["archiver", "indexer"]
    assert obj["classification"]["combination"].startswith("fits several virtual agents")
    assert obj["registry"] is None


def test_bot_from_registry(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "classify", "--bot", "mozz-archiver")
    assert code == 0
    assert "documented as:" in out and "source: github.com/michael-lazar" in out
    assert "not documented to obey archiver" in out
    code, out, _ = run(capsys, "classify", "--bot", "GPTBot", "--json")
    obj = json.loads(out)
    assert obj["registry"]["token"] == "GPTBot"
    assert [c["name"] for c in obj["classification"]["categories"]] == ["data-harvester"]


def test_profile_file_and_overrides(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    profile = tmp_path / "bot.toml"
    profile.write_text('name = "sb"\ntoken = "sb"\nactivities = ["archive", "search-index"]\n')
    code, out, _ = run(capsys, "classify", str(profile), "--agent", "other", "--adapts", "--json")
    assert code == 0
    obj = json.loads(out)
    assert obj["profile"]["token"] == "other"
    assert obj["classification"]["adapts_per_activity"] is True
    assert obj["classification"]["combination"].startswith("adapts per activity")


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    bots = load_registry().bots
    code, out, _ = run(capsys, "classify", "--list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["ID", "TOKEN", "PROTOCOL"]
    assert len(lines) == 1 + len(bots)
    code, out, _ = run(capsys, "classify", "--list", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in rows] == [b.id for b in bots]
    gus = next(r for r in rows if r["id"] == "gus")
    assert gus["classification"]["virtual_agents"] == ["indexer"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "exactly one way"),
        (("--does", "archive", "--bot", "gus"), "exactly one way"),
        (("--does", "crawl"), "unknown activity 'crawl'"),
        (("--does", "archive", "--agent", "/1.0"), "has no product token"),
        (("--bot", "nosuchbot"), "unknown bot 'nosuchbot'"),
        (("--list", "--bot", "gus"), "--list takes no bot"),
        (("/nonexistent/profile.toml",), "no such file"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, _, err = run(capsys, "classify", *argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_bad_profile_file_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"activities = [\xff")
    code, _, err = run(capsys, "classify", str(bad))
    assert code == 2 and f"{bad}: not UTF-8" in err
