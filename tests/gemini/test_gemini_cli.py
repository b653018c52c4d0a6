"""``geminibot fetch``: usage errors and failed fetches (the happy paths run against jetforce
in tests/interop)."""

from __future__ import annotations

import json
import socket

import pytest

from geminibot.cli import main


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    "argv",
    [
        ["fetch", "https://example.org/"],
        ["fetch", "gemini://user@h.test/"],
        ["fetch", "gemini://h.test/", "--resolve", "h.test:1965"],
        ["fetch", "gemini://h.test/", "--connect-to", "h.test:1965:127.0.0.1"],
        ["fetch", "gemini://h.test/", "--timeout", "0"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as exited:  # argparse's own (an option's type): "geminibot fetch: ..."
        code = int(str(exited.code))
    assert code == 2
    assert capsys.readouterr().err.startswith(("geminibot: ", "geminibot fetch: argument "))


def test_failed_fetch_exits_1_with_the_error_named(capsys: pytest.CaptureFixture[str]) -> None:
    port = closed_port()
    route = ["--resolve", f"h.test:{port}:127.0.0.1"]
    assert main(["fetch", f"h.test:{port}/", *route]) == 1
    assert "ConnectionFailed" in capsys.readouterr().err
    assert main(["fetch", f"gemini://h.test:{port}/", "--json", *route]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["error"] == "ConnectionFailed"
    assert record["url"] == f"gemini://h.test:{port}/"


def test_resolve_accepts_ipv6_addresses(capsys: pytest.CaptureFixture[str]) -> None:
    port = closed_port()
    assert main(["fetch", f"gemini://h.test:{port}/", "--resolve", f"h.test:{port}:[::1]"]) == 1
    assert "::1" in capsys.readouterr().err
