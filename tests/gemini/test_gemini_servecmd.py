"""servecmd.serve: what ``capsule-server serve`` and ``geminibot serve-search`` share, up to
the point where they listen (serving itself: tests/capsule_server/test_cli_serve.py,
tests/interop/test_searchcap_interop.py)."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from geminibot.cliutil import CommandError, Parser
from geminibot.gemini.accesslog import JsonLinesLog
from geminibot.gemini.servecmd import add_listen_options, serve
from geminibot.gemini.server import GeminiServer, ServerLimits


def options(log: Path | None, port: int = 0) -> argparse.Namespace:
    return argparse.Namespace(
        rate=2.5, rate_burst=7, log=str(log) if log else None, host=["127.0.0.1"], port=port
    )


def test_a_log_in_a_missing_folder_stops_before_the_server_is_made(tmp_path: Path) -> None:
    made: list[ServerLimits] = []

    def make(limits: ServerLimits, log: JsonLinesLog) -> GeminiServer:
        made.append(limits)
        raise AssertionError("not reached")

    with pytest.raises(CommandError, match="no such folder"):
        serve(options(tmp_path / "missing" / "a.log"), tmp_path, make, "prog")
    assert made == []


def test_a_server_that_cannot_make_its_certificates_is_one_line(tmp_path: Path) -> None:
    def make(limits: ServerLimits, log: JsonLinesLog) -> GeminiServer:
        raise PermissionError(13, "Permission denied")

    with pytest.raises(CommandError, match="cannot make certificates: Permission denied"):
        serve(options(tmp_path / "a.log"), tmp_path / "certs", make, "prog")
    assert (tmp_path / "a.log").exists()  # opened, then closed by serve


def test_limits_come_from_the_options_and_a_busy_port_is_one_line(tmp_path: Path) -> None:
    made: list[ServerLimits] = []

    def make(limits: ServerLimits, log: JsonLinesLog) -> GeminiServer:
        made.append(limits)
        return GeminiServer({}, tmp_path / "certs", limits, log)

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError, match=f"cannot listen on 127.0.0.1 port {port}"):
            serve(options(None, port), tmp_path / "certs", make, "prog", max_per_address=3)
    assert made == [ServerLimits(rate_per_second=2.5, rate_burst=7, max_per_address=3)]


def test_listen_options_default_to_loopback_and_the_gemini_port() -> None:
    parser = Parser(prog="prog")
    add_listen_options(parser)
    args = parser.parse_args([])
    assert (args.host, args.port) == (None, 1965)  # serve: None is [DEFAULT_HOST]
    args = parser.parse_args(["--host", "::1", "--host", "127.0.0.1", "--port", "0"])
    assert (args.host, args.port) == (["::1", "127.0.0.1"], 0)
    with pytest.raises(SystemExit):
        parser.parse_args(["--port", "65536"])
