"""``geminibot serve-search`` usage errors: one line each, exit 2, nothing served."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from geminibot.cli import build_parser, main
from geminibot.store.db import connect


@pytest.fixture
def db(tmp_path: Path) -> Path:
    connect(tmp_path / "idx.db").close()
    return tmp_path / "idx.db"


def test_help_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve-search", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for default in ("127.0.0.1", "1965", "localhost", "var/serve-search/certs", "10.0", "60"):
        assert f"(default: {default})" in out, default


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--hostname", "bad/name"], "--hostname 'bad/name': give a bare host name"),
        (["--certs", "FILE"], "not a folder (--certs names the certificate folder)"),
        (["--log", "MISSING/log"], "no such folder (for --log"),
    ],
)
def test_bad_options_are_one_line(
    db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    (tmp_path / "FILE").write_text("x")
    extra = [
        e.replace("FILE", str(tmp_path / "FILE")).replace("MISSING", str(tmp_path / "no"))
        for e in extra
    ]
    assert main(["serve-search", "--db", str(db), "--certs", str(tmp_path / "c"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1, err


def test_a_port_in_use_is_one_line(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["serve-search", "--db", str(db), "--certs", str(tmp_path / "c")]
        assert main([*args, "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1 port {port}" in err and len(err.splitlines()) == 1, err
