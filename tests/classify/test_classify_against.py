"""``classify --against``: the capsules' expectations, candidate paths, delays, usage answers."""

from __future__ import annotations

import functools
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from capsule_server.expect import Check, load_expectation
from capsule_server.testing import running_server
from geminibot.classify.against import effective_policy
from geminibot.classify.sources import (
    site_from_folder,
    site_from_source,
    site_from_url,
)
from geminibot.cli import main
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.server import ServerLimits
from geminibot.net.limits import Limits
from geminibot.policy.candidates import (
    BASE_PATHS,
    MAX_CANDIDATE_PATHS,
    candidate_paths,
    concrete_paths,
)
from geminibot.policy.discovery import PolicyUnreachable
from geminibot.policy.site_policy import SitePolicy

CAPSULES = Path(__file__).resolve().parents[2] / "capsules"
#: Inside robots-v2.test's Visit-time window (2200-0600 UTC): checks are about path rules.
AT = datetime(2026, 1, 1, 23, 0, tzinfo=UTC)
#: An activity per virtual agent, to describe a check's bot with --does.
ACTIVITY_OF = {
    "archiver": "archive",
    "indexer": "search-index",
    "researcher": "statistics",
    "webproxy": "web-proxy",
}


def capsule_checks() -> list[tuple[str, int, Check]]:
    out = []
    for folder in sorted(CAPSULES.iterdir()):
        if (folder / "expect.toml").is_file():
            for i, check in enumerate(load_expectation(folder).checks):
                out.append((folder.name, i, check))
    return out


CHECKS = capsule_checks()
#: The server's per-client rate for this one client reading every capsule's policy files in
#: a row: the default (a burst of 60) answered 44 to the last capsules' robots.txt, which
#: then read as unreachable (disallow all) and failed the comparison, now and then.
UNLIMITED = ServerLimits(rate_per_second=10_000.0, rate_burst=10_000)


@functools.cache
def served_sites() -> dict[str, SitePolicy]:
    """Every capsule's policy as a bot obtains it from the real capsule server on loopback
    (serve.toml's redirects, temporary failures and generated files included)."""

    async def fetch_all() -> dict[str, SitePolicy]:
        with tempfile.TemporaryDirectory() as tmp:
            async with running_server(CAPSULES, Path(tmp), UNLIMITED) as server:
                client = GeminiClient(
                    connect_to=lambda host, port: ("127.0.0.1", server.port),
                    limits=Limits(total_timeout=20),
                )
                return {
                    name: await site_from_url(f"gemini://{name}/", client)
                    for name in sorted({name for name, _, _ in CHECKS})
                }

    return trio.run(fetch_all)


def test_there_are_capsules_to_check() -> None:
    assert len({name for name, _, _ in CHECKS}) >= 15


@pytest.mark.parametrize(("capsule", "index", "check"), CHECKS, ids=lambda x: str(x)[:24])
def test_against_each_capsule_matches_its_expectations(
    capsule: str, index: int, check: Check
) -> None:
    site = served_sites()[capsule]
    report = effective_policy(
        site,
        agent=check.agent,
        virtual_agents=check.virtual_agents,
        paths=(*check.allowed, *check.disallowed),
        at=AT,
        source=capsule,
    )
    mode = report.mode("strict" if check.strict else "precedence")
    for path in check.allowed:
        verdict = mode.verdict(path)
        assert verdict is not None and verdict.explicit
        assert verdict.robots_allowed, f"{capsule} check {index + 1}: {path}: {verdict.reason}"
    for path in check.disallowed:
        verdict = mode.verdict(path)
        assert verdict is not None
        assert not verdict.robots_allowed, f"{capsule} check {index + 1}: {path}"
        assert not verdict.allowed  # robots.txt refusing is enough for every file together


def test_cli_against_va_groups_gives_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    folder = CAPSULES / "va-groups.test"
    for check in load_expectation(folder).checks:
        does = ",".join(ACTIVITY_OF[va] for va in check.virtual_agents) or "uptime"
        argv = [
            "classify",
            "--does",
            does,
            "--agent",
            check.agent,
            "--json",
            "--at",
            AT.isoformat(),
        ]
        argv += ["--against", str(folder)]
        for path in (*check.allowed, *check.disallowed):
            argv += ["--path", path]
        code = main(argv)
        obj = json.loads(capsys.readouterr().out)
        (site,) = obj["against"]
        mode = site["modes"][1 if check.strict else 0]
        verdicts = {v["path"]: v["robots_allowed"] for v in mode["explicit"]}
        assert verdicts == {
            **dict.fromkeys(check.allowed, True),
            **dict.fromkeys(check.disallowed, False),
        }
        recommended = site["modes"][0 if site["recommended_mode"] == "precedence" else 1]
        refused = any(not v["allowed"] for v in recommended["explicit"])
        assert code == (1 if refused else 0)


def test_agents_txt_with_a_bad_hash_restricts_beyond_robots_txt() -> None:
    site = served_sites()["agents-bad.test"]
    report = effective_policy(
        site, agent="geminibot", virtual_agents=["indexer"], paths=["/status"], at=AT
    )
    verdict = report.precedence.verdict("/status")
    assert verdict is not None
    assert verdict.robots_allowed and not verdict.allowed
    assert "agents.txt" in verdict.reason


def test_unreachable_robots_disallows_everything() -> None:
    site = served_sites()["robots-41.test"]
    report = effective_policy(site, agent=None, virtual_agents=[], paths=["/a.gmi"], at=AT)
    verdict = report.strict.verdict("/a.gmi")
    assert verdict is not None and not verdict.allowed and not verdict.star_allowed


def test_robots2_usage_answers_take_the_category_block() -> None:
    site = served_sites()["robots2-chain.test"]
    harvester = effective_policy(
        site,
        agent="GPTBot",
        virtual_agents=[],
        categories=["data-harvester"],
        relevant_directives=["crawl", "train"],
        at=AT,
    )
    usage = {u.answer.directive: u for u in harvester.usage}
    assert usage["crawl"].answer.value == "no" and usage["crawl"].relevant
    assert usage["train"].answer.value == "no"
    assert usage["summarise"].answer.value == "no"  # ask counts as no on Gemini
    assert not usage["quote"].relevant
    # crawl: no for data-harvesters: every path differs from `*`
    assert harvester.precedence.verdict("/") is not None
    assert all(not v.allowed for v in harvester.precedence.verdicts)
    assert harvester.precedence.delay.seconds == pytest.approx(2.0)  # rate: 30 per minute


def test_several_categories_take_the_most_restrictive_answer() -> None:
    robots2 = b"summarise: yes\n[agent: ai-assistant]\nsummarise: yes\n[agent: monitoring]\n"
    robots2 += b"summarise: no\nread: no\n"
    site = SitePolicy.from_texts("http", robots2=robots2)
    one = effective_policy(site, agent="bot", virtual_agents=[], categories=["ai-assistant"], at=AT)
    both = effective_policy(
        site, agent="bot", virtual_agents=[], categories=["ai-assistant", "monitoring"], at=AT
    )
    value = {u.answer.directive: (u.answer.value, u.category) for u in both.usage}
    assert {u.answer.directive: u.answer.value for u in one.usage}["summarise"] == "yes"
    assert value["summarise"] == ("no", "monitoring")
    assert value["read"] == ("no", "monitoring")
    agree = effective_policy(
        site, agent="bot", virtual_agents=[], categories=["ai-assistant", "search-indexer"], at=AT
    )
    assert {u.answer.directive: u.category for u in agree.usage}["summarise"] is None


def test_crawl_delay_is_the_waiting_time_and_star_differs() -> None:
    # (a group needs a rule before the next User-agent line, or the two groups merge)
    robots = b"User-agent: *\nDisallow: /p\nCrawl-delay: 5\n\n"
    robots += b"User-agent: indexer\nCrawl-delay: 30\nDisallow: /x\n"
    site = SitePolicy.from_texts("gemini", robots=robots)
    report = effective_policy(site, agent="me", virtual_agents=["indexer"], at=AT)
    assert report.precedence.delay.seconds == 30 and report.precedence.star_delay.seconds == 5
    assert report.strict.delay.seconds == 30
    differing = ["/p", "/p/x", "/px", "/x", "/x/x", "/xx"]
    assert [v.path for v in report.precedence.differing] == differing
    assert [v.path for v in report.strict.differing] == ["/x", "/x/x", "/xx"]
    none = effective_policy(
        SitePolicy.from_texts("gemini", robots=b""), agent=None, virtual_agents=[], at=AT
    )
    assert none.precedence.delay.seconds == 10  # the version 2.0 rule of thumb


def test_own_token_group_decides_alone_in_precedence_only() -> None:
    robots = b"User-agent: mybot\nDisallow: /mine\n\nUser-agent: *\nDisallow: /all\n"
    site = SitePolicy.from_texts("gemini", robots=robots)
    report = effective_policy(site, agent="mybot", virtual_agents=[], paths=["/all"], at=AT)
    p, s = report.precedence.verdict("/all"), report.strict.verdict("/all")
    assert p is not None and p.allowed and not p.star_allowed
    assert s is not None and not s.allowed
    assert [g.token for g in report.strict.groups] == ["mybot", "*"]


@pytest.mark.parametrize(
    ("pattern", "paths"),
    [
        ("/private/*.gmi$", ("/private/x.gmi", "/private/x.gmix", "/private/")),
        ("/tmp", ("/tmp", "/tmp/x", "/")),
        ("/dir/", ("/dir/", "/dir/x", "/")),
        ("*.pdf", ("/x.pdf", "/x.pdf/x", "/")),
        ("/", ("/", "/x")),
        ("/search?q=*", ("/search?q=x", "/search?q=x/x", "/")),
    ],
)
def test_concrete_paths(pattern: str, paths: tuple[str, ...]) -> None:
    assert concrete_paths(pattern) == paths


def test_concrete_paths_of_a_shell_glob() -> None:
    assert concrete_paths("/a/[bc]?.txt", glob=True) == ("/a/xx.txt", "/a/xx.txt/x", "/a/")
    assert concrete_paths("/a$b", glob=True) == ("/a$b", "/a$b/x", "/")


def test_candidate_paths_are_bounded() -> None:
    def site(n: int) -> SitePolicy:
        rules = "".join(f"Disallow: /p{i:05d}/\n" for i in range(n))
        return SitePolicy.from_texts("gemini", robots="User-agent: *\n" + rules)

    # each rule gives 3 paths ("/pN/", "/pN/x", "/pN") besides the shared BASE_PATHS
    per_rule = len(candidate_paths(site(1))[0]) - len(BASE_PATHS)
    assert per_rule == 3
    at_limit = (MAX_CANDIDATE_PATHS - len(BASE_PATHS)) // per_rule
    paths, truncated = candidate_paths(site(at_limit))
    assert len(paths) == len(BASE_PATHS) + per_rule * at_limit <= MAX_CANDIDATE_PATHS
    assert not truncated
    paths, truncated = candidate_paths(site(at_limit + 1))
    assert len(paths) == MAX_CANDIDATE_PATHS and truncated


def test_against_finds_what_compare_finds() -> None:
    """classify --against had its own candidate paths (each '*' filled with 'x' only): for
    this site it examined /xx, /xx/x, /xxx and / and saw no difference from '*'. The one
    candidate_paths also fills '*' with '' and 'a/b', and finds /a/bx."""
    site = SitePolicy.from_texts(
        "gemini", robots="User-agent: archiver\nDisallow: *x\n\nUser-agent: *\nDisallow: /x*$\n"
    )
    report = effective_policy(site, agent=None, virtual_agents=("archiver",), at=AT)
    differing = {v.path for v in report.precedence.differing}
    assert "/a/bx" in differing


def test_file_sources_are_known_by_name(tmp_path: Path) -> None:
    robots2 = tmp_path / "robots2.txt"
    robots2.write_text("train: no\n")
    site = site_from_source(str(robots2), "gemini")
    assert site.robots is None and site.robots2 is not None
    other = tmp_path / "site-policy.txt"
    other.write_text("User-agent: *\nDisallow: /\n")
    assert site_from_source(str(other), "gemini").robots is not None


def test_cli_against_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["classify", "--does", "archive", "--path", "/x"]) == 2
    assert "--path and --at need --against" in capsys.readouterr().err
    assert main(["classify", "--does", "archive", "--against", "/nonexistent/robots.txt"]) == 2
    assert "no such file" in capsys.readouterr().err
    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-agent: *\nDisallow: /private/\n")
    with pytest.raises(SystemExit) as exited:  # a usage error of argparse's (the type)
        main(["classify", "--does", "archive", "--against", str(robots), "--at", "soon"])
    assert exited.value.code == 2
    assert "argument --at: 'soon' is not an ISO 8601 time" in capsys.readouterr().err
    empty = tmp_path / "empty.test"
    empty.mkdir()
    (empty / "serve.toml").write_text("[[special]\n")  # a server's file: not read here
    assert main(["classify", "--does", "archive", "--against", str(empty), "--path", "/a"]) == 0
    assert "/a" in capsys.readouterr().out


def test_cli_against_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-agent: *\nDisallow: /private/\n\nUser-agent: archiver\nDisallow: /\n")
    code = main(["classify", "--does", "archive", "--against", str(robots), "--path", "/a"])
    out = capsys.readouterr().out
    assert code == 1
    lines = out.split("\nagainst ", 1)[1].splitlines()
    assert lines[1:7] == [
        "  precedence mode (recommended):",
        "    robots.txt group archiver (User-agent line 4):",
        "      line 5  Disallow: /",
        "  strict mode also applies:",
        "    robots.txt group * (User-agent line 1):",
        "      line 2  Disallow: /private/",
    ]
    assert "  `*` for contrast: group * alone (listed above)" in lines
    assert "    /a                           disallowed (`*`: allowed)" in lines
    assert "  AI usage (robots2.txt): nothing stated (no robots2.txt)" in lines


# -- properties over generated policies ----------------------------------------------------------

GROUP_TOKENS = ("mybot", "indexer", "archiver", "researcher", "*")
patterns = st.sampled_from(["/", "/a", "/a/", "/a/b", "/b*", "/*.gmi", "/a$", "/c/*/d", "*x"])
rules = st.lists(st.tuples(st.booleans(), patterns), max_size=4)
groups = st.lists(st.tuples(st.sampled_from(GROUP_TOKENS), rules), max_size=5)


def render(spec: list[tuple[str, list[tuple[bool, str]]]]) -> str:
    lines = []
    for token, group_rules in spec:
        lines.append(f"User-agent: {token}")
        lines += [f"{'Allow' if allow else 'Disallow'}: {p}" for allow, p in group_rules]
        lines.append("")
    return "\n".join(lines)


@settings(max_examples=60, deadline=None)
@given(groups, st.sets(st.sampled_from(("indexer", "archiver", "researcher"))), st.booleans())
def test_strict_is_never_more_permissive(
    spec: list[tuple[str, list[tuple[bool, str]]]], vas: set[str], own: bool
) -> None:
    site = SitePolicy.from_texts("gemini", robots=render(spec))
    report = effective_policy(
        site, agent="mybot" if own else None, virtual_agents=sorted(vas), at=AT
    )
    assert report.precedence.verdicts and report.strict.verdicts
    for strict in report.strict.verdicts:
        loose = report.precedence.verdict(strict.path)
        assert loose is not None
        if strict.robots_allowed:
            assert loose.robots_allowed, strict.path  # strict applies a superset of groups
            assert strict.star_robots_allowed, strict.path  # ... always including `*`
        assert strict.allowed == strict.robots_allowed  # robots.txt is the only file here
    if not own and not vas:  # the baseline bot gets exactly what `*` gets
        assert not report.precedence.differing and not report.strict.differing


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300), st.binary(max_size=300))
def test_any_bytes_give_a_report_never_a_crash(
    robots: bytes, robots2: bytes, agents: bytes
) -> None:
    site = SitePolicy.from_texts("gemini", robots=robots, robots2=robots2, agents=agents)
    report = effective_policy(
        site,
        agent="mybot",
        virtual_agents=["indexer"],
        categories=["search-indexer", "data-harvester"],
        paths=["/", "/x%zz", "/é"],
        at=AT,
    )
    json.dumps(report.as_dict())
    assert report.precedence.verdict("/") is not None


# -- over the network: a gemini:// URL gives what the capsule folder gives ---------------------


def test_folder_sources_match_what_the_server_serves() -> None:
    """A capsule folder read as files gives what the server serves, except where the
    capsule's serve.toml changes the answers (redirects, failures, generated files)."""
    plain = [name for name in served_sites() if not (CAPSULES / name / "serve.toml").exists()]
    assert len(plain) >= 10
    for name in plain:
        from_folder = site_from_folder(CAPSULES / name)
        for check in load_expectation(CAPSULES / name).checks:
            kwargs = {
                "agent": check.agent,
                "virtual_agents": check.virtual_agents,
                "categories": ["search-indexer", "data-harvester"],
                "paths": (*check.allowed, *check.disallowed),
                "at": AT,
            }
            served = effective_policy(served_sites()[name], **kwargs)  # type: ignore[arg-type]
            folder = effective_policy(from_folder, **kwargs)  # type: ignore[arg-type]
            assert _without_reasons(served.as_dict()) == _without_reasons(folder.as_dict()), name


def _without_reasons(value: object) -> object:
    """The decisions of a report, without the prose (which names where a file came from)."""
    if isinstance(value, dict):
        return {
            k: _without_reasons(v) for k, v in value.items() if k not in ("reason", "file_states")
        }
    if isinstance(value, list):
        return [_without_reasons(v) for v in value]
    return value


def test_folder_source_reads_only_files() -> None:
    # robots-41.test's server answers 41 for robots.txt (unreachable: nothing allowed);
    # as a folder it holds no robots.txt, which reads as unavailable: no restriction.
    site = site_from_folder(CAPSULES / "robots-41.test")
    report = effective_policy(site, agent=None, virtual_agents=[], paths=["/a.gmi"], at=AT)
    verdict = report.strict.verdict("/a.gmi")
    assert verdict is not None and verdict.robots_allowed


async def test_a_host_that_does_not_answer_has_no_policy_to_report() -> None:
    client = GeminiClient(limits=Limits(connect_timeout=5, total_timeout=5))
    # nothing listens on port 1 of the loopback: connection refused, no policy to report on
    with pytest.raises(PolicyUnreachable, match="ConnectionFailed") as caught:
        await site_from_url("gemini://127.0.0.1:1/", client)
    assert caught.value.url == "gemini://127.0.0.1:1/robots.txt"


def test_cli_against_a_gemini_url(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "classify",
            "--does",
            "archive",
            "--against",
            "gemini://127.0.0.1:1/",
            "--path",
            "/a",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(
        "geminibot: --against gemini://127.0.0.1:1/robots.txt: the policy could not be fetched: "
    )
    assert main(["classify", "--does", "archive", "--against", "gemini://"]) == 2
    assert "gemini://" in capsys.readouterr().err


def test_a_bot_that_adapts_gets_each_virtual_agents_policy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = CAPSULES / "va-groups.test"
    site = site_from_folder(folder)
    combined = effective_policy(site, agent=None, virtual_agents=["archiver", "indexer"], at=AT)
    assert combined.per_agent == ()
    adapting = effective_policy(
        site,
        agent=None,
        virtual_agents=["archiver", "indexer"],
        adapts_per_activity=True,
        paths=["/index-no/a.gmi", "/archive-no/a.gmi"],
        at=AT,
    )
    (archiver, as_archiver), (indexer, as_indexer) = adapting.per_agent
    assert (archiver, indexer) == ("archiver", "indexer")
    both = adapting.precedence
    for path in ("/index-no/a.gmi", "/archive-no/a.gmi"):
        verdict = both.verdict(path)
        assert verdict is not None and not verdict.allowed  # the combination refuses both
    index_no = as_archiver.verdict("/index-no/a.gmi")
    archive_no = as_indexer.verdict("/archive-no/a.gmi")
    assert index_no is not None and index_no.allowed  # an archiver may take /index-no/
    assert archive_no is not None and archive_no.allowed
    main(["classify", "--does", "archive,search-index", "--adapts", "--against", str(folder)])
    assert "adapting per activity, the fetches made as indexer alone" in capsys.readouterr().out


def test_cli_against_text_from_a_hostile_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Rules quoting escape sequences: shown escaped, the paths' answers still in their
    column, every line in 80 (a non-ASCII path is percent-encoded by the policy core)."""
    robots = tmp_path / "robots.txt"
    robots.write_bytes(
        b"User-agent: *\nDisallow: /a\x1b[31mred\n\n"
        b"User-agent: indexer\nDisallow: /b\x1b]0;owned\x07\nDisallow: /c\xe2\x80\xaegnp.exe\n"
    )
    code = main(["classify", "--does", "search-index", "--against", str(robots)])
    out = capsys.readouterr().out
    assert code == 0
    assert not any(c in out for c in "\x1b\x07\u202e")
    assert "/b%1B%5D0;owned%07" in out and "/c%E2%80%AEgnp.exe" in out
    shown = [line for line in out.splitlines() if not line.startswith("against ")]
    assert max(len(line) for line in shown) <= 80  # the file's name stands whole
    assert "      line 2  Disallow: /a%1B%5B31mred" in shown  # escaped as a URL is
