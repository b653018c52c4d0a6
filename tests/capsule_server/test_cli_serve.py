"""``capsule-server serve`` as a real process: finds the bundled capsules, logs, and shuts
down gracefully on SIGINT and SIGTERM. Also the bounded load test: more connections at once
than the server answers (``MAX_CONNECTIONS``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio
from capsule_fixtures import cli_process, stderr_until_exit
from commands import run_main
from fresh_python import run_python

from capsule_server.cli import build_parser, main
from capsule_server.files import load_capsules
from capsule_server.testing import client_hello, has_ipv6_loopback, open_tls, raw_request
from geminibot import __version__
from geminibot.gemini.client import make_ssl_context
from geminibot.gemini.server import MAX_CONNECTIONS

IPV6 = has_ipv6_loopback()
#: One more than the server answers at once: all of them requesting together cross that edge.
LOAD_CONNECTIONS = MAX_CONNECTIONS + 1
LOAD_DEADLINE = 90.0
"""The whole load test must finish within this many seconds (a bound, not a speed test)."""


def serve_process(*args: str) -> AbstractAsyncContextManager[tuple[trio.Process, int]]:
    """``capsule-server serve --port 0 ARGS`` as a process, and its port."""
    return cli_process("serve", *args, deadline=30)


def rss_peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_serve_logs_and_stops_on_signal(tmp_path: Path, signum: signal.Signals) -> None:
    log = tmp_path / "access.jsonl"
    async with serve_process("--certs", str(tmp_path / "certs"), "--log", str(log)) as (
        proc,
        port,
    ):
        response = await raw_request(port, b"gemini://maze.test/\r\n", "maze.test")
        assert response.startswith(b"20 text/gemini")
        proc.send_signal(signum)
        with trio.fail_after(15):
            assert await proc.wait() == 0
    [record] = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["host"] == "maze.test" and record["status"] == 20
    assert sorted((tmp_path / "certs").glob("*.crt"))  # made on first start


def test_serve_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(tmp_path / "missing")]) == 2
    assert main(["serve", str(tmp_path)]) == 2  # no capsule folders
    assert "no capsule folders" in capsys.readouterr().err
    bad = tmp_path / "bad.test"
    bad.mkdir()
    (bad / "serve.toml").write_text("[maze]\nprefix = 'x'\n")
    assert main(["serve", str(tmp_path)]) == 2


# (arguments, with F a file, D a folder, M a missing folder; first line of stderr)
BAD_INPUT = [
    (["serve", "--log", "D"], "capsule-server: D: is a folder; --log names a file to append to"),
    (["serve", "--log", "M/x.log"], "capsule-server: M: no such folder (for --log M/x.log)"),
    (["serve", "--rate", "0"], "capsule-server serve: argument --rate: 0 must be a number above 0"),
    (["serve", "--rate", "-1"], "capsule-server serve: argument --rate: -1 must be a number above 0"),
    (["serve", "--rate", "x"], "capsule-server serve: argument --rate: 'x' is not a number"),
    (["serve", "--rate-burst", "0"], "capsule-server serve: argument --rate-burst: 0 must be 1 or more"),
    (["serve", "--max-per-address", "0"], "capsule-server serve: argument --max-per-address: 0 must be 1 or more"),
    (["serve", "--header-timeout", "0"], "capsule-server serve: argument --header-timeout: 0 must be a number above 0"),
    (["serve", "--header-timeout", "inf"], "capsule-server serve: argument --header-timeout: inf must be a number above 0"),
    (["serve", "--certs", "F"], "capsule-server: F: not a folder (--certs names the certificate folder)"),
    (["serve", "--port", "99999"], "capsule-server serve: argument --port: 99999 is not a port (0-65535)"),
    (["serve", "--port", "70000"], "capsule-server serve: argument --port: 70000 is not a port (0-65535)"),
    (["serve", "--port", "-1"], "capsule-server serve: argument --port: -1 is not a port (0-65535)"),
    (["serve", "F"], "capsule-server: F: not a folder"),
    (["serve", "M"], "capsule-server: M: not a folder"),
    (["serve", "D", "--hostname", "a/b"], "capsule-server: --hostname 'a/b': give a bare host name, such as localhost"),
    (["serve", "--hostname", "localhost"], "capsule-server: --hostname needs DIR: the capsule folder to serve as that host"),
    (["certs", "--make", "M"], "capsule-server: M: not a folder"),
    (["certs", "--make", "F"], "capsule-server: F: not a folder"),
    (["certs", "--certs", "F"], "capsule-server: F: not a folder (--certs names the certificate folder)"),
    (["serve", "--bogus"], "capsule-server serve: unrecognized arguments: --bogus"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "first_line"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], first_line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line on stderr, exit 2, no traceback (never serves: every case fails
    before listening). Run in this process, as the script runs ``main``."""
    (tmp_path / "F").write_text("a file\n")
    (tmp_path / "D").mkdir()
    monkeypatch.chdir(tmp_path)
    done = run_main(args, program="capsule-server")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [first_line]
    assert done.stdout == ""


def test_version() -> None:
    done = run_main(["--version"], program="capsule-server")
    assert (done.returncode, done.stdout.strip()) == (0, f"capsule-server {__version__}")


def subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += subcommands(sub)
    return found


def test_every_help_shows_the_defaults() -> None:
    """Each option with a default shows it in --help; so do the options of
    serve and certs whose default is not a value (the bundled capsules, stdout...)."""
    for parser in subcommands(build_parser()):
        text = " ".join(re.sub(r"-\n\s+", "-", parser.format_help()).split())
        for action in parser._actions:
            default = action.default
            if default in (None, False, argparse.SUPPRESS):
                if parser.prog.split()[-1] in ("serve", "certs") and action.help:
                    shown = "default" in action.help or action.dest in ("help", "json")
                    assert shown, f"{parser.prog} {action.dest}: no default in its help"
                continue
            shown_as = {str(default)} | ({f"{default:g}"} if isinstance(default, float) else set())
            assert any(f"(default: {v})" in text for v in shown_as), f"{parser.prog} {action.dest}"


async def test_serve_one_folder_as_localhost(tmp_path: Path) -> None:
    """``serve DIR --hostname NAME`` serves DIR itself as the capsule of
    NAME, dot-less names such as localhost included (as jetforce and agate do)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.gmi").write_text("# my capsule\n")
    for name in ("localhost", "myhost"):
        args = (str(site), "--hostname", name, "--certs", str(tmp_path / "certs"))
        async with serve_process(*args, "--log", os.devnull) as (_proc, port):
            response = await raw_request(port, f"gemini://{name}/\r\n".encode(), name)
            assert response == b"20 text/gemini; charset=utf-8\r\n# my capsule\n"
            other = await raw_request(port, b"gemini://maze.test/\r\n", None)
            assert other.startswith(b"53 ")


def test_a_folder_named_localhost_is_a_capsule(tmp_path: Path) -> None:
    """In a capsules folder, ``localhost/`` is the capsule of localhost;
    other dot-less folders are still not taken for capsules."""
    for name in ("localhost", "a.test", "notes", ".hidden.test"):
        (tmp_path / name).mkdir()
    assert sorted(load_capsules(tmp_path)) == ["a.test", "localhost"]


async def test_listens_on_ipv4_and_ipv6_on_one_port(tmp_path: Path) -> None:
    """``--host`` repeated: one listener per address, all on the same port (even port 0)."""
    if not IPV6:
        pytest.skip("this machine has no ::1")
    args = ("--host", "127.0.0.1", "--host", "::1", "--certs", str(tmp_path / "certs"))
    async with serve_process(*args, "--log", os.devnull) as (_proc, port):
        for address in ("127.0.0.1", "::1"):
            response = await raw_request(
                port, b"gemini://maze.test/\r\n", "maze.test", host=address
            )
            assert response.startswith(b"20 text/gemini")


async def test_non_ascii_sni_prints_no_traceback(tmp_path: Path) -> None:
    """As the operator sees it: nothing on stderr but the banner and
    the shutdown line, however many clients send a non-ASCII SNI name."""
    log = tmp_path / "log"
    args = ("--certs", str(tmp_path / "certs"), "--log", str(log))
    async with serve_process(*args) as (proc, port):
        for _ in range(3):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(client_hello("bücher.test".encode()))
            with trio.fail_after(10):
                assert (await stream.receive_some(100))[:1] == b"\x15"  # a TLS alert
            await stream.aclose()
        assert (await raw_request(port, b"gemini://maze.test/\r\n", "maze.test"))[:2] == b"20"
        proc.send_signal(signal.SIGTERM)
        rest, status = await stderr_until_exit(proc, 15)
        assert status == 0
    assert rest.splitlines() == ["capsule-server: SIGTERM, shutting down"]
    errors = [json.loads(line).get("error") for line in log.read_text().splitlines()]
    assert errors == ["tls: SNI name is not ASCII: b\\xc3\\xbccher.test"] * 3 + [None]


async def test_header_timeout_option_closes_a_silent_connection(tmp_path: Path) -> None:
    log = tmp_path / "access.jsonl"
    args = ("--certs", str(tmp_path / "certs"), "--log", str(log), "--header-timeout", "0.2")
    async with serve_process(*args) as (proc, port):
        with trio.fail_after(LOAD_DEADLINE):  # the server closes it: nothing is sent
            assert await raw_request(port, b"", "maze.test") == b""
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            assert await proc.wait() == 0
    [record] = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["error"] == "header timeout"


async def test_more_concurrent_connections_than_the_server_answers(tmp_path: Path) -> None:
    """``MAX_CONNECTIONS + 1`` TLS connections open at once, then all send their request
    together: every one is answered (20 with the right body) or refused with 44; the server
    lives on."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 3 * LOAD_CONNECTIONS  # our sockets, and the server's (it inherits the limit)
    if soft < need:
        if hard < need:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    try:
        await _load(tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def _load(tmp_path: Path) -> None:
    expected_body = (Path(__file__).parents[2] / "capsules/va-groups.test/index.gmi").read_bytes()
    args = ("--certs", str(tmp_path / "certs"), "--log", str(tmp_path / "log"))
    unlimited = ("--rate-burst", "100000", "--rate", "100000", "--max-per-address", "100000")
    # Connections wait for all of them to be open, which takes what the machine takes: the
    # header timeout must not end the first ones meanwhile (the test's own bound does).
    unlimited += ("--header-timeout", str(LOAD_DEADLINE))
    async with serve_process(*args, *unlimited) as (proc, port):
        ctx = make_ssl_context()
        go = trio.Event()
        results: list[bytes | str] = []
        connected = 0
        all_connected = trio.Event()

        async def one() -> None:
            nonlocal connected
            try:
                tls = await open_tls(port, "va-groups.test", context=ctx)
                connected += 1
                if connected == LOAD_CONNECTIONS:
                    all_connected.set()
                await go.wait()
                await tls.send_all(b"gemini://va-groups.test/\r\n")
                data = b""
                while chunk := await tls.receive_some(65536):
                    data += chunk
                await tls.aclose()
                results.append(data)
            except (OSError, trio.BrokenResourceError) as exc:
                results.append(f"error: {exc!r}")
                all_connected.set()

        with trio.fail_after(LOAD_DEADLINE):
            async with trio.open_nursery() as nursery:
                for _ in range(LOAD_CONNECTIONS):
                    nursery.start_soon(one)
                await all_connected.wait()
                go.set()
        answered = sum(
            1 for r in results if r == b"20 text/gemini; charset=utf-8\r\n" + expected_body
        )
        refused = sum(1 for r in results if isinstance(r, bytes) and r.startswith(b"44 "))
        peak = rss_peak_kib(proc.pid)
        print(
            f"\nload: {answered} answered, {refused} refused with 44, peak RSS {peak / 1024:.1f} MiB"
        )
        assert connected == LOAD_CONNECTIONS
        assert answered + refused == LOAD_CONNECTIONS, [
            r for r in results if not isinstance(r, bytes)
        ][:3]
        assert answered > 0
        assert proc.returncode is None  # no crash
        again = await raw_request(port, b"gemini://va-groups.test/\r\n", "va-groups.test")
        assert again.startswith(b"20 ")
        assert peak < 512 * 1024  # a sanity bound on memory, not a speed claim


async def test_a_log_that_cannot_be_written_stops_the_server(tmp_path: Path) -> None:
    """A full disk under the access log: one line, exit 1, no traceback (it was an
    exception group from the connection handler)."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this machine")
    async with serve_process("--certs", str(tmp_path / "certs"), "--log", "/dev/full") as (
        proc,
        port,
    ):
        await raw_request(port, b"gemini://maze.test/\r\n", "maze.test")
        rest, status = await stderr_until_exit(proc, 30)
        assert status == 1
    assert rest.splitlines() == [
        "capsule-server: /dev/full: cannot write the access log (No space left on device); stopped"
    ]


def test_capsule_server_starts_without_the_crawl_database_code() -> None:
    """A capsule server reads files, not a crawl database: starting it imports neither
    SQLAlchemy nor the frontier (each test capsule is a process of its own)."""
    program = "import json, sys\nimport capsule_server.cli\nprint(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(run_python(program))
    assert "capsule_server.compliance_range" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "sqlalchemy"], loaded
    assert "geminibot.store.frontier" not in loaded
