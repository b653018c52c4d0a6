"""``compare`` grouped by difference and ``classify --against`` that reads like the file
(issue 54): small fixtures written for the purpose, each shaped like a real file that
gave a long or wrong answer."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from geminibot.classify.activities import Activity
from geminibot.classify.against import effective_policy
from geminibot.classify.registry import load_registry
from geminibot.classify.rules import classify
from geminibot.cli import main
from geminibot.policy import candidates
from geminibot.policy.compare import PathDifference, UsageDifferences, bot_classes, compare
from geminibot.policy.outcomes import fetch_outcome
from geminibot.policy.robots_parse import MAX_ROBOTS_BYTES
from geminibot.policy.site_policy import Fetched, SitePolicy

AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
RULE_KEYS = ["file", "line", "directive", "pattern", "group"]

#: Three differences: /drafts/ only the web forbids, /cgi-bin/ only Gemini forbids, and an
#: archiver group closing the Gemini site.
WEB = "User-agent: *\nDisallow: /drafts/\n"
GEMINI = "User-agent: *\nDisallow: /cgi-bin/\n\nUser-agent: archiver\nDisallow: /\n"
#: The same three rules in three virtual agents' groups (shaped like r010).
THREE_GROUPS = "".join(
    f"User-agent: {va}\nDisallow: /youtube\nDisallow: /repo/*/files\nDisallow: /search/\n"
    for va in ("archiver", "indexer", "researcher")
)


def write(folder: Path, name: str, text: str | bytes) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(text, str):
        path.write_text(text)
    else:
        path.write_bytes(text)
    return str(path)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    return code, capsys.readouterr().out.splitlines()


def rule_objects(value: object) -> list[dict[str, object]]:
    """Every rule object in a JSON answer (a dict under a key named rule or rules)."""
    found: list[dict[str, object]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "rule" and isinstance(item, dict):
                found.append(item)
            elif key == "rules" and isinstance(item, list):
                found.extend(item)
            else:
                found.extend(rule_objects(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(rule_objects(item))
    return found


# -- compare ---------------------------------------------------------------------------------


def test_three_differences_each_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    web = write(tmp_path / "web", "robots.txt", WEB)
    gemini = write(tmp_path / "gemini", "robots.txt", GEMINI)
    code, lines = run_cli(["compare", "--web", web, "--gemini", gemini], capsys)
    assert code == 1
    assert len(lines) <= 20, lines  # was 54
    body = "\n".join(lines[2:])
    for path in ("/drafts/", "/cgi-bin/"):
        assert 1 <= body.count(path) <= 2, path  # was 12 times each
    assert lines[2:6] == [
        "/drafts/: the web forbids it, Gemini allows it",
        "  web:    Disallow: /drafts/ (robots.txt line 2, group *)",
        "  gemini: allows it: no rule matches",
        "  for indexer, researcher, webproxy, *; 1 more path like it",
    ]
    assert "  gemini: Disallow: / (robots.txt line 5, group archiver)" in lines
    assert "  for archiver; 6 more paths like it" in lines
    assert lines[-1] == "summary: 3 paths differ for 5 of 5 bot classes"
    assert max(len(line) for line in lines[2:]) <= 80


def test_json_has_the_same_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    web = write(tmp_path / "web", "robots.txt", WEB)
    gemini = write(tmp_path / "gemini", "robots.txt", GEMINI)
    code, lines = run_cli(["compare", "--web", web, "--gemini", gemini, "--json"], capsys)
    data = json.loads("\n".join(lines))
    assert code == 1 and data["agree"] is False
    assert [(d["kind"], d["path"], d["classes"]) for d in data["differences"]] == [
        ("path", "/drafts/", ["indexer", "researcher", "webproxy", "*"]),
        ("path", "/cgi-bin/", ["indexer", "researcher", "webproxy", "*"]),
        ("path", "/", ["archiver"]),
    ]
    drafts = data["differences"][0]
    assert drafts["web"]["rules"] == [
        {"file": "robots.txt", "line": 2, "directive": "Disallow", "pattern": "/drafts/"}
        | {"group": "*"}
    ]
    assert drafts["gemini"] == {
        "allowed": True,
        "rules": [],
        "reason": drafts["gemini"]["reason"],
    }
    assert data["candidates_capped"] is False and data["notes"] == []
    assert [c["name"] for c in data["classes"]] == [
        "archiver",
        "indexer",
        "researcher",
        "webproxy",
        "*",
    ]


def test_one_rule_in_several_groups_is_one_difference() -> None:
    web = SitePolicy.from_texts("http", "User-agent: *\nDisallow: /misc/\n")
    gemini = SitePolicy.from_texts("gemini", THREE_GROUPS)
    result = compare(web, gemini, bot_classes((web, gemini)), AT)
    paths = [d for d in result.differences if isinstance(d, PathDifference)]
    assert [d.path for d in paths] == ["/misc/", "/search/", "/youtube", "/repo/x/files"]
    assert paths[0].classes == ("archiver", "indexer", "researcher", "webproxy", "*")
    youtube = paths[2]
    assert youtube.classes == ("archiver", "indexer", "researcher")
    assert [(r.line, r.group) for r in youtube.gemini_rules] == [
        (2, "archiver"),
        (6, "indexer"),
        (10, "researcher"),
    ]
    by_name = {c.bot_class.name: c.bot_class.bot for c in result.classes}
    for diff in paths:  # every example is a real disagreement for every class it names
        for name in diff.classes:
            w = web.may_fetch(diff.path, by_name[name], AT).allowed
            g = gemini.may_fetch(diff.path, by_name[name], AT).allowed
            assert (w, g) == (diff.web_allowed, diff.gemini_allowed)


def test_one_rule_in_several_groups_in_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    web = write(tmp_path / "web", "robots.txt", "User-agent: *\nDisallow: /misc/\n")
    gemini = write(tmp_path / "gemini", "robots.txt", THREE_GROUPS)
    _, lines = run_cli(["compare", "--web", web, "--gemini", gemini], capsys)
    assert "  gemini: Disallow: /youtube (robots.txt lines 2, 6, 10)" in lines
    assert "  for archiver, indexer, researcher, each by its own group; 2 more paths like it" in (
        lines
    )
    assert len(lines) <= 4 * 4 + 6


def test_usage_of_a_side_without_robots2_is_one_difference() -> None:
    robots2 = "crawl: yes\ntrain: no\nstore: session-only\n"
    web = SitePolicy.from_texts("http", "User-agent: *\nAllow: /\n", robots2)
    gemini = SitePolicy.from_texts("gemini", "User-agent: *\nAllow: /\n")
    result = compare(web, gemini, bot_classes((web, gemini)), AT)
    (usage,) = result.differences
    assert isinstance(usage, UsageDifferences) and len(usage.classes) == 5
    assert [u.directive for u in usage.usage] == ["crawl", "train", "store"]
    assert result.summary() == "summary: 1 AI usage differs for 5 of 5 bot classes"


def test_a_file_cut_at_500_kib_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    comment = b"# " + b"x" * 98 + b"\n"
    big = b"User-agent: *\nDisallow: /a\n" + comment * (MAX_ROBOTS_BYTES // len(comment) + 10)
    web = write(tmp_path / "web", "robots.txt", big + b"Disallow: /late\n")
    gemini = write(tmp_path / "gemini", "robots.txt", "User-agent: *\nDisallow: /a\n")
    code, lines = run_cli(["compare", "--web", web, "--gemini", gemini], capsys)
    assert code == 0  # the rule past the cut is not read: the two agree
    note = " ".join(line.strip() for line in lines[2:4])
    assert note == (
        f"note: the web's robots.txt is {len(big) + 16:,} bytes: only its first "
        "512,000 bytes (500 KiB, whole lines) are read"
    )


def test_capped_candidates_are_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(candidates, "MAX_CANDIDATE_PATHS", 12)
    rules = "".join(f"Disallow: /p{i}/\n" for i in range(10))
    web = write(tmp_path / "web", "robots.txt", "User-agent: *\n" + rules)
    gemini = write(tmp_path / "gemini", "robots.txt", "User-agent: *\nDisallow: /\n")
    _, lines = run_cli(["compare", "--web", web, "--gemini", gemini, "--json"], capsys)
    data = json.loads("\n".join(lines))
    assert data["candidates"] == 12 and data["candidates_capped"] is True
    (note,) = data["notes"]
    assert note.startswith("only the 12 shortest candidate paths were decided")
    _, lines = run_cli(["compare", "--web", web, "--gemini", gemini], capsys)
    assert any(line.startswith("note: only the 12 shortest") for line in lines)


# -- classify --against -------------------------------------------------------------------------


def test_against_lists_the_rules_not_made_up_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    robots = write(tmp_path, "robots.txt", THREE_GROUPS)
    code, lines = run_cli(["classify", "--does", "search-index", "--against", robots], capsys)
    assert code == 0
    assert len(lines) <= 30, lines  # was 107 for the real file of this shape
    at = lines.index(f"against {robots} (no own token; indexer)")
    assert lines[at + 1 : at + 6] == [
        "  precedence mode (recommended), strict mode the same:",
        "    robots.txt group indexer (User-agent line 5):",
        "      line 6  Disallow: /youtube",
        "      line 7  Disallow: /repo/*/files",
        "      line 8  Disallow: /search/",
    ]
    assert "  `*` for contrast: no group applies to it, nothing is restricted" in lines
    made_up = re.compile(r"/youtub\b|/youtubex|/repo//|/search/x")
    assert not any(made_up.search(line) for line in lines)
    assert max(len(line) for line in lines if not line.startswith("against ")) <= 80


def test_modes_shown_apart_only_where_they_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    robots = write(
        tmp_path,
        "robots.txt",
        "User-agent: mybot\nDisallow: /mine\n\nUser-agent: *\nDisallow: /all\n",
    )
    argv = ["classify", "--does", "uptime", "--agent", "mybot", "--against", robots]
    _, lines = run_cli([*argv, "--path", "/all"], capsys)
    at = lines.index(f"against {robots} (agent mybot; no virtual agent)")
    assert lines[at + 1 : at + 7] == [
        "  precedence mode (recommended):",
        "    robots.txt group mybot (User-agent line 1):",
        "      line 2  Disallow: /mine",
        "  strict mode also applies:",
        "    robots.txt group * (User-agent line 4):",
        "      line 5  Disallow: /all",
    ]
    assert "  `*` for contrast: group * alone (listed above)" in lines
    assert "    /all                         allowed (strict: disallowed; `*`: disallowed)" in lines


def test_a_known_bot_is_not_shown_obeying_what_it_does_not_claim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    robots = write(tmp_path, "robots.txt", THREE_GROUPS)
    _, lines = run_cli(["classify", "--bot", "mozz-archiver", "--against", robots], capsys)
    text = "\n".join(lines)
    assert "    robots.txt group archiver (User-agent line 1):" in lines
    assert (
        "documented to obey mozz-archiver, *: here no group names them: nothing\n"
        "    restricted; not documented to obey archiver, so the groups above are what it\n"
        "    should obey, not what it is known to do"
    ) in text
    _, lines = run_cli(["classify", "--bot", "tlgs", "--against", robots], capsys)
    assert "  documented to obey tlgs, indexer, *: the same groups here" in lines
    _, lines = run_cli(["classify", "--bot", "tlgs", "--against", robots, "--json"], capsys)
    (site,) = json.loads("\n".join(lines))["against"]
    assert [g["token"] for g in site["documented_groups"]] == ["indexer"]


def test_against_json_rules_are_rule_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "site"
    write(folder, "robots.txt", THREE_GROUPS + "\nUser-agent: *\nDisallow: /tmp\n")
    write(folder, "robots2.txt", "[agent: search-indexer]\ncrawl: no\n")
    argv = ["classify", "--does", "search-index", "--against", str(folder), "--json"]
    _, lines = run_cli([*argv, "--path", "/youtube"], capsys)
    (site,) = json.loads("\n".join(lines))["against"]
    objects = rule_objects(site)
    assert objects and all(list(o) == RULE_KEYS for o in objects), objects
    precedence = site["modes"][0]
    assert precedence["groups"][0]["rules"][0] == {
        "file": "robots.txt",
        "line": 6,
        "directive": "Disallow",
        "pattern": "/youtube",
        "group": "indexer",
    }
    (crawl,) = precedence["beyond"]  # the folder's robots2.txt is named as it is served
    assert str(crawl.pop("file")).endswith("/robots2.txt")
    assert crawl == {"line": 2, "directive": "crawl", "pattern": None, "group": "search-indexer"}
    assert site["star_groups"][0]["token"] == "*"


def test_against_text_says_what_other_files_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "site"
    write(folder, "robots.txt", "User-agent: *\nDisallow: /tmp\n")
    write(folder, "robots2.txt", "[agent: search-indexer]\ncrawl: no\n")
    _, lines = run_cli(["classify", "--does", "search-index", "--against", str(folder)], capsys)
    at = next(i for i, line in enumerate(lines) if line.startswith("  also refused by crawl"))
    said = " ".join(line.strip() for line in lines[at : at + 2])
    assert (
        said == "also refused by crawl: no (gemini://site/robots2.txt line 2, for search-indexer)"
    )


def test_an_unreachable_robots_txt_is_its_own_line() -> None:
    site = SitePolicy.build("gemini", Fetched(fetch_outcome("gemini", 44, meta="60")))
    report = effective_policy(site, agent=None, virtual_agents=("indexer",), at=AT)
    (state,) = report.file_states
    assert state.startswith("robots.txt is unreachable (44")
    assert state.endswith("everything is disallowed until it is fetched, for every bot")
    assert report.precedence.groups == () and report.star_groups == ()
    assert all(not v.allowed for v in report.precedence.verdicts if v.path != "/robots.txt")


# -- the registry ---------------------------------------------------------------------------------


def test_the_internet_archives_crawler_is_known() -> None:
    bot = load_registry().find("ia_archiver")
    assert bot is not None and bot.id == "ia-archiver" and bot.obeys == ("ia_archiver",)
    assert bot.profile().classify().virtual_agent_names == ("archiver",)


def test_a_personal_feed_reader_obeys_star_and_its_own_token() -> None:
    result = classify([Activity.FEED_READER])
    assert result.virtual_agent_names == () and result.category_names == ()
    assert result.directive_names == ("read",)
    assert [w.code for w in result.warnings] == ["no-virtual-agent", "no-robots2-category"]
