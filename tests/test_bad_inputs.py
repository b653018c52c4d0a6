"""Every command and subcommand of ``geminibot`` and ``capsule-server`` with bad input:
a missing file, a folder where a file goes, a file where a folder goes, an
unreadable file, a read-only folder, numbers out of range, malformed URLs. Each must end
with the exit code the README gives (2: usage or input error), ONE line on standard
error, and no traceback anywhere. Each runs through the ``main`` its script calls, in
this process (``commands.run_main``: what a new interpreter would add is half a second of
imports); a few run as the installed scripts in a child process, as a user runs them.

No case reaches the network beyond loopback: every URL that could be fetched is on
127.0.0.1 port 1 (nothing listens) or refused before a connection is tried.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from commands import run_main
from fs_faults import read_only

from capsule_server.cli import build_parser as server_parser
from geminibot.cli import build_parser as geminibot_parser

#: Bound on one command: a server that starts serving instead of refusing fails by it.
TIMEOUT = 30.0
CAPSULES = Path(__file__).resolve().parents[1] / "capsules"
NOWHERE = "gemini://127.0.0.1:1/"

# Placeholders, replaced by paths in the test's folder:
#   MISSING  a file that does not exist        NODIR/x  a file in a folder that does not exist
#   FOLDER   an existing folder                FILE     an existing text file (not what is asked)
#   UNREAD   a file that cannot be read        RO/x     a path in a read-only folder
#   DB       a crawl database (made by the test)
#   CAPSULE  a folder of one bundled capsule: the range reads every capsule's policies
#            before it looks at its other options, the bundled ones in 0.35 s of CPU each
#            time (robots-large.test's), va-groups.test's in a few milliseconds
#: Cases known to fail, by their code (none now).
PENDING: dict[int, str] = {}
CASES: list[tuple[str, list[str], int]] = [
    # geminibot policy
    ("policy check", ["policy", "check", "MISSING", "/x", "--agent", "a"], 2),
    ("policy check", ["policy", "check", "FOLDER", "/x", "--agent", "a"], 2),
    ("policy check", ["policy", "check", "UNREAD", "/x", "--agent", "a"], 2),
    ("policy check", ["policy", "check", "FILE", "/x", "--agent", "a", "--last-duration", "-1"], 2),
    ("policy check", ["policy", "check", "FILE", "/x", "--agent", "a", "--at", "yesterday"], 2),
    ("policy lint", ["policy", "lint", "MISSING"], 2),
    ("policy lint", ["policy", "lint", "FOLDER"], 2),
    ("policy lint", ["policy", "lint", "UNREAD"], 2),
    ("policy render", ["policy", "render", "--format", "robots", "MISSING"], 2),
    ("policy render", ["policy", "render", "--format", "robots", "FOLDER"], 2),
    ("policy render", ["policy", "render", "--format", "robots", "UNREAD"], 2),
    ("policy render", ["policy", "render", "--format", "robots", "FILE"], 2),
    # geminibot fetch
    ("fetch", ["fetch", "gemini://"], 2),
    ("fetch", ["fetch", "gemini://exa mple.org/"], 2),
    ("fetch", ["fetch", "ftp://example.org/"], 2),
    ("fetch", ["fetch", NOWHERE, "--max-size", "-1"], 2),
    ("fetch", ["fetch", NOWHERE, "--timeout", "0"], 2),
    ("fetch", ["fetch", NOWHERE, "--connect-to", "x"], 2),
    ("fetch", ["fetch", NOWHERE, "--known-hosts", "FOLDER"], 2),
    ("fetch", ["fetch", NOWHERE, "--known-hosts", "NODIR/kh"], 2),
    ("fetch", ["fetch", NOWHERE, "--known-hosts", "FILE"], 2),
    ("fetch", ["fetch", NOWHERE, "--known-hosts", "RO/kh"], 2),
    # geminibot classify
    ("classify", ["classify", "MISSING"], 2),
    ("classify", ["classify", "FOLDER"], 2),
    ("classify", ["classify", "UNREAD"], 2),
    ("classify", ["classify", "FILE"], 2),
    ("classify", ["classify", "--bot", "tlgs", "--against", "MISSING"], 2),
    ("classify", ["classify", "--bot", "tlgs", "--against", "UNREAD"], 2),
    ("classify", ["classify", "--bot", "tlgs", "--against", "gemini://"], 2),
    ("classify", ["classify", "--bot", "tlgs", "--against", "FILE", "--at", "noon"], 2),
    ("classify", ["classify", "--bot", "tlgs", "--against", NOWHERE, "--connect-to", "x"], 2),
    ("classify", ["classify", "--bot", "no-such-bot"], 2),
    # geminibot crawl
    ("crawl", ["crawl", "gemini://", "--db", "NODIR/c.db"], 2),
    (
        "db migrate",
        ["db", "migrate", "--from", "MISSING", "--to", "postgresql://u@127.0.0.1:1/x"],
        2,
    ),
    ("db migrate", ["db", "migrate", "--from", "FILE", "--to", "not-a-url"], 2),
    ("serve-search", ["serve-search", "--db", "MISSING"], 2),
    ("serve-search", ["serve-search", "--db", "FILE", "--port", "70000"], 2),
    ("crawl", ["crawl", "gemini://exa mple.org/", "--db", "NODIR/c.db"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "FOLDER"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "NODIR/c.db"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "FILE"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "UNREAD"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "RO/new.db"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "RO/c.db"], 2),  # a crawl database is there
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--as", "archiver", "--warc-dir", "FILE"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--as", "archiver", "--warc-dir", "RO/w"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--warc-dir", "FOLDER"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--max-pages", "0"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--concurrency", "-1"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--max-depth", "-1"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--max-host-urls", "0"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--max-time", "0"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--max-time", "9999d"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--min-delay", "-1"], 2),
    ("crawl", ["crawl", NOWHERE, "--db", "DB", "--connect-to", "a:1:b:99999"], 2),
    ("crawl", ["crawl", "gemini://example.org/", "--db", "DB", "--test-range"], 2),
    # geminibot search and stats
    ("search", ["search", "x", "--db", "MISSING"], 2),
    ("search", ["search", "x", "--db", "FOLDER"], 2),
    ("search", ["search", "x", "--db", "FILE"], 2),
    ("search", ["search", "x", "--db", "UNREAD"], 2),
    ("search", ["search", "x", "--db", "DB", "--limit", "0"], 2),
    ("search", ["search", "x", "--db", "DB", "--limit", "100000"], 2),
    ("search", ["search", "x", "--db", "DB", "--offset", "-1"], 2),
    ("search", ["search", "--db", "DB", "--", "-only"], 2),
    ("census", ["census", "--db", "MISSING"], 2),
    ("census", ["census", "--db", "FOLDER"], 2),
    ("census", ["census", "--db", "FILE"], 2),
    ("census", ["census", "--db", "UNREAD"], 2),
    ("export", ["export", "--db", "MISSING", "--out", "NODIR/x"], 2),
    ("export", ["export", "--db", "FILE", "--out", "RO/x"], 2),
    ("export", ["export", "--db", "DB", "--out", "FILE"], 2),
    ("recheck", ["recheck", "gemini://a.test/", "--db", "MISSING"], 2),
    ("recheck", ["recheck", "gemini://a.test/", "--db", "FOLDER"], 2),
    ("recheck", ["recheck", "gemini://", "--db", "DB"], 2),
    ("recheck", ["recheck", "gemini://nowhere.test/", "--db", "DB"], 2),
    ("stats", ["stats", "--db", "MISSING"], 2),
    ("stats", ["stats", "--db", "FOLDER"], 2),
    ("stats", ["stats", "--db", "FILE"], 2),
    ("stats", ["stats", "--db", "UNREAD"], 2),
    ("stats", ["stats", "--db", "DB", "--urls", "--status", "bogus"], 2),
    ("stats", ["stats", "--db", "DB", "--urls", "--limit", "0"], 2),
    ("stats", ["stats", "--db", "DB", "--status", "51"], 2),
    # geminibot compare
    ("compare", ["compare", "--web", "MISSING", "--gemini", "FILE"], 2),
    ("compare", ["compare", "--web", "FOLDER", "--gemini", "FILE"], 2),
    ("compare", ["compare", "--web", "UNREAD", "--gemini", "FILE"], 2),
    ("compare", ["compare", "gemini://a.test/"], 2),
    ("compare", ["compare", "a.test", "--timeout", "0"], 2),
    ("compare", ["compare", "a.test", "--web-ca", "MISSING"], 2),
    ("compare", ["compare", "a.test", "--connect-to", "x"], 2),
    ("compare", ["compare", "--web", "FILE", "--gemini", "FILE", "--at", "noon"], 2),
    # geminibot index
    ("index rebuild", ["index", "rebuild", "--db", "MISSING"], 2),
    ("index rebuild", ["index", "rebuild", "--db", "FOLDER"], 2),
    ("index rebuild", ["index", "rebuild", "--db", "FILE"], 2),
    ("index rebuild", ["index", "rebuild", "--db", "UNREAD"], 2),
    ("index status", ["index", "status", "--db", "MISSING"], 2),
    ("index status", ["index", "status", "--db", "FOLDER"], 2),
    ("index status", ["index", "status", "--db", "FILE"], 2),
    ("index authority", ["index", "authority", "--db", "MISSING"], 2),
    ("index authority", ["index", "authority", "--db", "FOLDER"], 2),
    ("index authority", ["index", "authority", "--db", "FILE"], 2),
    ("index authority", ["index", "authority", "--db", "UNREAD"], 2),
    ("index authority", ["index", "authority", "--db", "FILE", "--every", "-1"], 2),
    ("index update", ["index", "update", "--db", "MISSING"], 2),
    ("index update", ["index", "update", "--db", "FOLDER"], 2),
    ("index update", ["index", "update", "--db", "FILE"], 2),
    # geminibot why
    ("feeds", ["feeds", "--db", "MISSING"], 2),
    ("feeds", ["feeds", "--db", "FOLDER"], 2),
    ("feeds", ["feeds", "--db", "FILE"], 2),
    ("feeds", ["feeds", "--db", "UNREAD"], 2),
    ("feeds", ["feeds", "--new", "--db", "DB", "--since", "soon"], 2),
    ("feeds", ["feeds", "--new", "--db", "DB", "--since", "400d"], 2),
    ("feeds", ["feeds", "--db", "DB", "--since", "1d"], 2),
    ("feeds", ["feeds", "--db", "DB", "--limit", "0"], 2),
    ("why", ["why", "gemini://a.test/", "--db", "MISSING"], 2),
    ("why", ["why", "gemini://a.test/", "--db", "FOLDER"], 2),
    ("why", ["why", "gemini://a.test/", "--db", "FILE"], 2),
    ("why", ["why", "gemini://", "--db", "DB"], 2),
    ("why", ["why", "gemini://x.test/" + "a" * 1100, "--db", "DB"], 2),
    ("why", ["why", "gemini://[oops/", "--db", "DB"], 2),
    # geminibot portal
    ("portal", ["portal", "--port", "99999"], 2),
    ("portal", ["portal", "--port", "0", "--rate", "0"], 2),
    ("portal", ["portal", "--port", "0", "--connect-to", "x"], 2),
    ("portal", ["portal", "--port", "0", "--capsule", "gemini://"], 2),
    ("portal", ["portal", "--port", "0", "--known-hosts", "FOLDER"], 2),
    # capsule-server
    ("range", ["range", "MISSING", "--port", "0"], 2),
    ("range", ["range", "CAPSULE", "--port", "99999"], 2),
    ("range", ["range", "CAPSULE", "--port", "0", "--rate", "0"], 2),
    ("range", ["range", "CAPSULE", "--port", "0", "--idle", "0"], 2),
    ("range", ["range", "CAPSULE", "--port", "0", "--log", "FOLDER"], 2),
    ("range", ["range", "CAPSULE", "--port", "0", "--scorecards", "FILE"], 2),
    ("range", ["range", "CAPSULE", "--port", "0", "--certs", "FILE"], 2),
    ("range", ["range", "CAPSULE", "--port", "0", "--certs", "RO/certs"], 2),
    ("range", ["range", "CAPSULE", "--port", "0", "--log", "NODIR/x.log"], 2),
    ("serve", ["serve", "MISSING", "--port", "0"], 2),
    ("serve", ["serve", "FILE", "--port", "0"], 2),
    ("serve", ["serve", "--port", "0", "--log", "FOLDER"], 2),
    ("serve", ["serve", "--port", "0", "--log", "NODIR/x.log"], 2),
    ("serve", ["serve", "--port", "0", "--log", "RO/x.log"], 2),
    ("serve", ["serve", "--port", "0", "--certs", "FILE"], 2),
    ("serve", ["serve", "--port", "0", "--rate", "0"], 2),
    ("serve", ["serve", "--port", "0", "--rate", "-1"], 2),
    ("serve", ["serve", "--port", "0", "--rate-burst", "0"], 2),
    ("serve", ["serve", "--port", "99999"], 2),
    ("serve", ["serve", "--port", "-1"], 2),
    ("certs", ["certs", "--certs", "FILE"], 2),
    ("certs", ["certs", "--certs", "FOLDER", "--make", "MISSING"], 2),
    ("certs", ["certs", "--certs", "FOLDER", "--make", "FILE"], 2),
    ("certs", ["certs", "--certs", "RO/certs", "--make"], 2),
    ("report", ["report", "MISSING"], 2),
    ("report", ["report", "FOLDER"], 2),
    ("report", ["report", "UNREAD"], 2),
    ("report", ["report", "FILE"], 2),
    ("report", ["report", "EMPTY"], 2),
    ("report", ["report", "EMPTY", "--capsules", "MISSING"], 2),
    ("report", ["report", "EMPTY", "--capsules", "FILE"], 2),
]
SERVER_COMMANDS = {"serve", "certs", "report", "range"}


def leaf_commands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[str]:
    """Every runnable (sub)command of ``parser``: ``policy check``, ``crawl``, ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from leaf_commands(sub, f"{prefix} {name}".strip())
            return
    if prefix:
        yield prefix


def test_every_command_has_bad_inputs() -> None:
    commands = set(leaf_commands(geminibot_parser())) | set(leaf_commands(server_parser()))
    assert commands - {name for name, _, _ in CASES} == set()


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "folder").mkdir()
    (tmp / "file.txt").write_text("a text file, not what was asked for\n")
    (tmp / "empty.log").write_text("")
    unreadable = tmp / "unreadable"
    if os.geteuid() == 0:  # root reads any file: a socket cannot be opened by anyone
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(unreadable))
    else:
        unreadable.write_text("secret\n")
        unreadable.chmod(0)
    ro = tmp / "ro"
    ro.mkdir()
    capsule = tmp / "capsule"
    capsule.mkdir()
    (capsule / "va-groups.test").symlink_to(CAPSULES / "va-groups.test", target_is_directory=True)
    db = tmp / "c.db"
    made = run_main(["crawl", NOWHERE, "--db", str(db), "--max-time", "1"], limit=TIMEOUT)
    assert db.exists(), made.stderr
    (ro / "c.db").write_bytes(db.read_bytes())
    with read_only(ro):
        yield {
            "MISSING": str(tmp / "missing.txt"),
            "NODIR": str(tmp / "no-such-folder"),
            "FOLDER": str(tmp / "folder"),
            "FILE": str(tmp / "file.txt"),
            "EMPTY": str(tmp / "empty.log"),
            "UNREAD": str(unreadable),
            "RO": str(ro),
            "DB": str(db),
            "CAPSULE": str(capsule),
        }


def fill(arg: str, places: dict[str, str]) -> str:
    head, sep, rest = arg.partition("/")
    return places[head] + sep + rest if head in places else arg


@pytest.mark.parametrize(
    ("command", "argv", "code"),
    [
        pytest.param(
            c,
            a,
            abs(code),
            id=f"{c}:{' '.join(a)}",
            marks=[pytest.mark.xfail(reason=PENDING[code])] if code in PENDING else [],
        )
        for c, a, code in CASES
    ],
)
def test_bad_input(command: str, argv: list[str], code: int, places: dict[str, str]) -> None:
    program = "capsule-server" if command.split(maxsplit=1)[0] in SERVER_COMMANDS else "geminibot"
    proc = run_main([fill(a, places) for a in argv], program=program, limit=TIMEOUT)
    _is_one_clean_line(proc, code)


#: Cases run as the installed scripts, in a child process: one of each program.
AS_PROCESSES = [
    ("geminibot", ["crawl", NOWHERE, "--db", "FOLDER"]),
    ("capsule-server", ["serve", "--port", "0", "--log", "FOLDER"]),
]


@pytest.mark.parametrize(("program", "argv"), AS_PROCESSES, ids=str)
def test_bad_input_as_a_process(program: str, argv: list[str], places: dict[str, str]) -> None:
    exe = [str(Path(sys.executable).with_name(program))]
    proc = subprocess.run(
        [*exe, *(fill(a, places) for a in argv)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    _is_one_clean_line(proc, 2)


def _is_one_clean_line(proc: subprocess.CompletedProcess[str], code: int) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), proc.stderr
