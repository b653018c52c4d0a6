"""The helpers every command shares (geminibot.cliutil)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from geminibot.cliutil import Parser, bounded_number, port_number, positive_float, positive_int


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (port_number, "x", "'x' is not a port number"),
        (port_number, "-1", "-1 is not a port (0-65535)"),
        (port_number, "65536", "65536 is not a port (0-65535)"),
        (positive_int, "0", "0 must be 1 or more"),
        (positive_int, "1.5", "'1.5' is not a whole number"),
        (positive_float, "0", "0 must be a number above 0"),
        (positive_float, "inf", "inf must be a number above 0"),
        (positive_float, "nan", "nan must be a number above 0"),
        (positive_float, "ten", "'ten' is not a number"),
        (bounded_number(float, 0, 5), "5.5", "5.5 must be 0 to 5"),
        (bounded_number(float, 0, 5, above=True), "0", "0 must be above 0 and at most 5"),
        (bounded_number(int, None, 3), "4", "4 must be at most 3"),
    ],
)
def test_bounded_number_refuses_with_one_clear_line(
    parse: Callable[[str], object], text: str, message: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        parse(text)
    assert str(caught.value) == message


def test_bounded_number_accepts_its_edges() -> None:
    assert port_number("0") == 0 and port_number("65535") == 65535
    assert positive_int("1") == 1 and isinstance(positive_int("1"), int)
    assert positive_float("1e-9") == 1e-9
    assert bounded_number(float, 0, 5)("0") == 0.0
    assert bounded_number(float, 0, 5)("5") == 5.0
    assert bounded_number(float, 0, 5, above=True)("5") == 5.0


def test_bounded_number_is_an_argparse_type_naming_its_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = Parser(prog="cmd")
    parser.add_argument("--port", type=port_number)
    assert parser.parse_args(["--port", "8080"]).port == 8080
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--port", "70000"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "cmd: argument --port: 70000 is not a port (0-65535)\n"
