"""The command line entry points start, teach, and fail with usage errors cleanly."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from fresh_python import run_python
from pages import one_page_database

from geminibot.cli import ALL, COMMANDS, build_parser, main


def test_help_lists_policy_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "policy" in capsys.readouterr().out


def test_no_command_is_a_usage_error() -> None:
    assert main([]) == 2


def test_module_entry_point_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "geminibot", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("geminibot ")


def _commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action


def test_the_lazy_table_is_what_the_modules_register() -> None:
    """COMMANDS names each command with the help its module gives it, in the order the
    modules add them: the stand-ins of a lazy parser say what the real ones say."""
    registered = [(c.dest, c.help) for c in _commands(build_parser())._choices_actions]
    assert registered == [pair for module in COMMANDS for pair in module.commands]


def test_top_level_help_is_the_same_lazy_or_not() -> None:
    full = build_parser().format_help()
    assert build_parser(None, load_all=False).format_help() == full
    assert "serve-search" in full and "crawl" in full


@pytest.mark.parametrize("name", sorted(ALL))
def test_each_command_parses_and_helps_the_same_lazy_or_not(name: str) -> None:
    full = _commands(build_parser()).choices[name]
    lazy_parser = build_parser(name, load_all=False)
    lazy = _commands(lazy_parser).choices[name]
    assert lazy.format_help() == full.format_help()
    assert lazy_parser.format_usage() == build_parser().format_usage()


def test_error_for_an_unknown_command_lists_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("geminibot: argument COMMAND: invalid choice: 'nope'")
    assert all(repr(name) in err for name in ALL)


IMPORTED = """
import contextlib, io, json, sys
from geminibot.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
"""


#: What ``search``, ``stats`` and ``feeds`` start without: the crawler, the policy engine,
#: network clients and TLS, the language detector (an index build's), SQLAlchemy (the
#: stores' writers'), the export's and the census's libraries.
READS_NEED_NONE_OF = [
    "geminibot.crawl",
    "geminibot.policy",
    "geminibot.gemini",
    "trio",
    "httpx",
    "cryptography",
    "ssl",
    "py3langid",
    "numpy",
    "sqlalchemy",
    "psycopg",
    "pyarrow",
    "matplotlib",
]
#: ... and ``search`` and ``stats`` without the URL parser (and its IDNA codec) too.
SEARCH_NEEDS_NONE_OF = [*READS_NEED_NONE_OF, "geminibot.urls", "idna"]
#: What the search capsule and the portal start without (the service starts them at each
#: of its starts): SQLAlchemy (the statements of /check, /feeds, /backlinks... compile on
#: first use), the census's figures, reads, report and charts, and the certificate facts,
#: which their first /census or /check of a host imports.
SERVERS_START_WITHOUT = [
    "sqlalchemy",
    "alembic",
    "geminibot.census.figures",
    "geminibot.census.policies",
    "geminibot.census.host",
    "geminibot.census.history",
    "geminibot.census.html",
    "geminibot.census.charts",
    "geminibot.store.census_reads",
    "geminibot.gemini.certfacts",
    "matplotlib",
    "numpy",
    "pyarrow",
]


@pytest.mark.parametrize(
    ("argv", "wanted", "unwanted"),
    [
        (["--version"], [], ["geminibot.policy", "geminibot.crawl", "geminibot.gemini"]),
        (["--help"], [], ["geminibot.policy", "geminibot.crawl", "geminibot.index"]),
        (["fetch", "--help"], ["geminibot.gemini.cli"], ["geminibot.crawl", "geminibot.index"]),
        (["policy", "--help"], ["geminibot.policy.cli"], ["geminibot.crawl", "geminibot.http"]),
        (
            ["crawl", "--help"],
            ["geminibot.crawl.cli"],
            ["geminibot.crawl.crawler", "geminibot.store.frontier", "trio", "httpx", "sqlalchemy"],
        ),
        (
            ["search", "--help"],
            ["geminibot.index.search_cli"],
            SEARCH_NEEDS_NONE_OF,
        ),
        (
            ["search", "-word", "word", "--db", "/nonexistent/crawl.db"],
            ["geminibot.index.search_cli", "geminibot.index.search"],
            SEARCH_NEEDS_NONE_OF,
        ),
        (
            ["stats", "--help"],
            ["geminibot.index.stats_cli"],
            SEARCH_NEEDS_NONE_OF,
        ),
        (["feeds", "--help"], ["geminibot.feeds.cli"], READS_NEED_NONE_OF),
        (["serve-search", "--help"], ["geminibot.searchcap.app"], SERVERS_START_WITHOUT),
        (["portal", "--help"], ["geminibot.portal.app"], SERVERS_START_WITHOUT),
    ],
)
def test_a_command_imports_only_its_own_module(
    argv: list[str], wanted: list[str], unwanted: list[str]
) -> None:
    """In a fresh interpreter: what the command runs decides what is imported."""
    loaded = json.loads(run_python(IMPORTED, *argv))
    assert all(m in loaded for m in wanted), loaded
    for prefix in unwanted:
        assert not [m for m in loaded if m == prefix or m.startswith(prefix + ".")], loaded


@pytest.fixture(scope="module")
def crawl_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A crawl database of one page, its tantivy index built and current."""
    path = tmp_path_factory.mktemp("cli") / "crawl.db"
    one_page_database(path)
    return str(path)


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["search", "orbit", "--db", "DB"], ["geminibot.index.tantivy_index"]),
        (["search", "orbit", "--db", "DB", "--json", "--explain"], []),
    ],
)
def test_a_search_imports_only_what_it_searches_with(
    crawl_db: str, argv: list[str], wanted: list[str]
) -> None:
    """Run on a real database (not only its --help): a search through the tantivy index
    starts without the crawler, SQLAlchemy, the network and the URL parser."""
    code = IMPORTED.replace("main(sys.argv[1:])", "assert main(sys.argv[1:]) == 0")
    loaded = json.loads(run_python(code, *[crawl_db if a == "DB" else a for a in argv]))
    assert all(m in loaded for m in wanted), loaded
    for prefix in SEARCH_NEEDS_NONE_OF:
        assert not [m for m in loaded if m == prefix or m.startswith(prefix + ".")], prefix


def _every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every parser below it (commands, and actions such as policy check)."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases name one parser
                found += _every_parser(sub)
    return found


def test_every_help_fits_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--help`` of every command and action of both programs, as an 80-column terminal
    shows it: argparse wraps what it formats, the epilogs are written to fit."""
    from capsule_server.cli import build_parser as server_parser

    monkeypatch.setenv("COLUMNS", "80")
    parsers = _every_parser(build_parser()) + _every_parser(server_parser())
    assert len(parsers) > 15
    long = {
        p.prog: [line for line in p.format_help().splitlines() if len(line) > 80] for p in parsers
    }
    assert not {prog: lines for prog, lines in long.items() if lines}
