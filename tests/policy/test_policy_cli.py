"""geminibot policy check / lint, run as a user would (in-process and as a subprocess)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from geminibot.cli import main
from geminibot.policy.cli import SNIFF_BYTES
from geminibot.policy.robots_parse import MAX_ROBOTS_BYTES

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
    assert lines[0]["rule"] == {
        "file": "robots.txt",
        "line": 5,
        "directive": "Disallow",
        "pattern": "/drafts/",
        "group": "indexer",
    }
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
        "  hint: fix the spelling: Google's parser accepts it, other crawlers may not",
        f"{bad}:3: error: 'nonsense' is not 'field: value'; ignored [no-separator]",
        "  hint: write the line as 'Field: value', or make it a comment with '#'",
    ]
    good = tmp_path / "good.txt"
    good.write_bytes(ROBOTS)
    assert main(["policy", "lint", str(good), "--json"]) == 0
    assert capsys.readouterr().out == ""


def test_check_json_agrees_on_a_1_0_group_beside_a_version_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The '*' group's typo lines apply though a Robot-version group is in the file, and
    # --json says "allowed": false beside a deciding Disallow.
    path = tmp_path / "robots.txt"
    path.write_text(
        "User-agent: alfred\nRobot-version: 2.0\nDisallow: *.cgi\n\n"
        "User-agent: *\nDisallow /secret\nDisallowed: /prefixed\ndiasllow: /d2\n"
    )
    code = main(["policy", "check", str(path), "--agent", "bot", "--json", "/secret", "/d2"])
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [(r["allowed"], r["reasons"][0]["line"]) for r in records] == [(False, 6), (False, 8)]
    assert all(not g["allowed"] for r in records for g in r["groups"])


def test_lint_gives_the_2_0_reason_for_a_non_ascii_regex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Lint does not say a 2.0 regex "does not start with '/'" (the RFC reading).
    path = tmp_path / "robots.txt"
    path.write_text("User-agent: *\nRobot-version: 2.0\nDisallow: ~ ^/café\nAllow: ~ ^/[éè]\n")
    assert main(["policy", "lint", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pattern-no-slash" not in out
    assert f"{path}:4: warning:" in out and "[non-ascii-class]" in out
    assert main(["policy", "check", str(path), "--agent", "bot", "/café"]) == 1


# -- each through the command line, exit code and first line asserted --


def _first(text: str) -> str:
    return text.splitlines()[0] if text else ""


def test_check_reports_crawl_delay_at_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "robots.txt"
    path.write_text("# site\nUser-agent: *\nDisallow: /private/\n\nCrawl-delay: 7\n")
    assert main(["policy", "check", str(path), "--agent", "bot", "/a"]) == 0
    out = capsys.readouterr().out
    assert _first(out) == "allowed     /a"
    assert "wait        7 s between requests (robots.txt line 5: Crawl-delay: 7)" in out


def test_check_takes_a_local_path_after_the_sources_as_a_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /\n")
    passwd = tmp_path / "etc" / "passwd"
    passwd.parent.mkdir()
    passwd.write_text("root:x:0:0::/root:/bin/sh\n")
    # An existing local file that is no policy by name or content is a URL path.
    url = str(passwd)
    assert main(["policy", "check", str(robots), "--agent", "a", url]) == 1
    assert _first(capsys.readouterr().out) == f"DISALLOWED  {url}"
    agents = tmp_path / "agents.txt"
    agents.write_text("ai-train: no\n")
    # ... while a file named for a policy, given before the URLs, is one.
    assert main(["policy", "check", str(robots), str(agents), "--agent", "a", "/x"]) == 1
    captured = capsys.readouterr()
    assert _first(captured.out) == "DISALLOWED  /x"
    assert _first(captured.err).startswith(f"geminibot: note: {agents} is not an agents.txt")


def test_check_warns_about_the_size_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "robots.txt"
    filler = "# " + "x" * 70 + "\n"
    body = "User-agent: *\n" + filler * (MAX_ROBOTS_BYTES // len(filler) + 1) + "Disallow: /late\n"
    path.write_text(body)
    assert main(["policy", "check", str(path), "--agent", "bot", "/late"]) == 0
    captured = capsys.readouterr()
    assert _first(captured.out) == "allowed     /late"
    first = _first(captured.err)
    assert first.startswith(f"geminibot: warning: {path} is {len(body)} bytes; only its first")
    assert "later rules do not apply" in captured.err


def test_lint_escapes_terminal_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "robots.txt"
    path.write_bytes(b"User-agent: *\nDisallow: \x1b]0;owned\x07\nFoo\x1b[2J\xc2\x9b: bar\n")
    assert main(["policy", "lint", str(path)]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\x9b")
    # The pattern as matched: its control characters percent-encoded, like a URL's.
    assert _first(out).startswith(f"{path}:2: warning: Disallow pattern '%1B%5D0;owned%07'")
    assert "unknown field 'Foo\\x1b[2J\\x9b'" in out
    assert main(["policy", "check", str(path), "--agent", "b", "/\x1b[2J"]) == 0
    assert "\x1b" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "body",
    [
        b"# Welcome\n=> /about.gmi About\n",
        b"<!DOCTYPE html>\n<html><body>hello</body></html>\n",
        b"User-agent: *\nDisallow: /private/\n",
    ],
)
def test_an_agents_txt_in_another_form_means_no_agents_txt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: bytes
) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nAllow: /\n")
    agents = tmp_path / "agents.txt"
    agents.write_bytes(body)
    assert main(["policy", "check", str(robots), str(agents), "--agent", "b", "/a"]) == 0
    captured = capsys.readouterr()
    assert _first(captured.out) == "allowed     /a"
    assert _first(captured.err) == (
        f"geminibot: note: {agents} is not an agents.txt in the draft's form "
        "(no '*' + SHA-256 hash line); ignored, it restricts nothing"
    )
    assert main(["policy", "lint", str(agents)]) == 0
    out = capsys.readouterr().out
    assert _first(out).startswith(f"{agents}:1: info: not an agents.txt in the draft's form")
    assert _first(out).endswith("[not-this-dialect]")


def test_agent_is_cut_to_its_product_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: MJ12bot\nDisallow: /\n\nUser-agent: geminibot\nDisallow: /g\n")
    assert main(["policy", "check", str(robots), "--agent", "MJ12bot", "/a"]) == 1
    assert _first(capsys.readouterr().err).startswith(
        "geminibot: warning: --agent 'MJ12bot' is matched as 'MJ'"
    )
    assert main(["policy", "check", str(robots), "--agent", "geminibot/1.0", "/g"]) == 1
    captured = capsys.readouterr()
    assert _first(captured.out) == "DISALLOWED  /g"
    assert "matched as 'geminibot'" in _first(captured.err)
    assert main(["policy", "check", str(robots), "--agent", "/1.0", "/g"]) == 2
    assert "has no product token" in capsys.readouterr().err


def test_classify_and_crawl_cut_the_agent_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: geminibot\nDisallow: /\n")
    args = ["classify", "--does", "archive", "--agent", "geminibot/1.0", "--against", str(robots)]
    assert main([*args, "--path", "/a"]) == 1
    captured = capsys.readouterr()
    assert "matched as 'geminibot'" in _first(captured.err)
    assert "/a                           disallowed" in captured.out
    db = tmp_path / "crawl.db"
    assert main(["crawl", "gemini://127.0.0.1:1/", "--db", str(db), "--agent", "/1.0"]) == 2
    assert "has no product token" in _first(capsys.readouterr().err)


def test_compare_reports_crawl_delay_at_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    web = tmp_path / "robots.txt"
    web.write_text("User-agent: *\nDisallow: /a\n\nCrawl-delay: 9\n")
    gemini = tmp_path / "gemini-robots.txt"
    gemini.write_text("User-agent: *\nDisallow: /a\n")
    assert main(["compare", "--web", str(web), "--gemini", str(gemini)]) == 1
    out = capsys.readouterr().out
    assert _first(out) == f"web:    {web}"
    assert "  web:    Crawl-delay: 9 (robots.txt line 4)" in out


def test_compare_text_escapes_the_files_and_fits_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Paths and reasons quote the policy files (a server's, for ``compare HOST``): their
    escape sequences are shown escaped, and each line is wrapped to 80 columns but those
    naming the files."""
    web = tmp_path / "robots.txt"
    web.write_bytes(b"User-agent: *\nDisallow: /w\n")
    gemini = tmp_path / "gemini" / "robots.txt"
    gemini.parent.mkdir()
    gemini.write_bytes(b"User-agent: *\nDisallow: /a\x1b]0;owned\x07\n")
    assert main(["compare", "--web", str(web), "--gemini", str(gemini)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "/a%1B%5D0;owned%07: Gemini forbids it, the web allows it" in out
    body = out.splitlines()[2:]  # after the two lines naming the files (whole, to copy)
    assert body and max(len(line) for line in body) <= 80


@pytest.mark.parametrize(("extra", "is_source"), [(0, True), (1, False)])
def test_a_further_source_is_told_by_its_first_sniff_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: int, is_source: bool
) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nAllow: /\n")
    other = tmp_path / "policy-b.txt"  # named neutrally: a policy only by its content
    field = b"User-agent:"
    pad = SNIFF_BYTES - len(field) + extra
    other.write_bytes(b"#" * (pad - 1) + b"\n" + field + b" *\nDisallow: /\n")
    code = main(["policy", "check", str(robots), str(other), "--agent", "b", "/a"])
    out = capsys.readouterr().out
    if is_source:  # two robots.txt files: a usage error
        assert code == 2
    else:  # the file is the first URL to check
        assert code == 0 and _first(out) == f"allowed     {other}"
