"""The helpers every command shares (geminibot.cliutil)."""

from __future__ import annotations

import argparse
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geminibot.cliutil import (
    LINE_WIDTH,
    Parser,
    bounded_number,
    clipped,
    counted,
    port_number,
    positive_float,
    positive_int,
    terminal_safe,
    with_article,
    wrapped,
)


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


@pytest.mark.parametrize(
    ("text", "field", "lines"),
    [
        ("plain é 中文\u3000text", "plain é 中文\u3000text", None),
        ("a\x1b[2Jb", "a\\x1b[2Jb", None),
        ("ring\x07 csi\x9b nul\x00 del\x7f", "ring\\x07 csi\\x9b nul\\x00 del\\x7f", None),
        ("line\r\nnext\rover", "line\\x0d\\x0anext\\x0dover", "line\r\nnext\\x0dover"),
        ("tab\there", "tab\\x09here", "tab\there"),
        ("abc\u202eexe.txt", "abc\\u202eexe.txt", None),  # right-to-left override
        ("a\u2066b\u2069c\u200fd\u061c", "a\\u2066b\\u2069c\\u200fd\\u061c", None),
        ("one\u2028two", "one\\u2028two", None),  # line separator
    ],
)
def test_terminal_safe_escapes_what_steers_a_terminal(
    text: str, field: str, lines: str | None
) -> None:
    assert terminal_safe(text) == field
    assert terminal_safe(text, keep_lines=True) == (field if lines is None else lines)


#: Bidirectional controls, line and paragraph separators: what reorders or breaks a line.
REORDERING = set("\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e") | set(
    "\u2066\u2067\u2068\u2069"
)


@given(st.text())
def test_terminal_safe_leaves_nothing_that_steers_and_is_idempotent(text: str) -> None:
    shown = terminal_safe(text)
    assert not any(unicodedata.category(c) == "Cc" or c in REORDERING for c in shown)
    assert terminal_safe(shown) == shown
    kept = terminal_safe(text, keep_lines=True)  # lines kept: only tab, LF and CR before LF remain
    assert all(c in "\t\n\r" for c in kept if unicodedata.category(c) == "Cc")


def test_clipped_and_wrapped_fit_a_line() -> None:
    assert clipped("x" * 80) == "x" * 80
    assert clipped("x" * 81) == "x" * 79 + "…" and len(clipped("y" * 500)) == LINE_WIDTH
    lines = wrapped("word " * 60 + "a-very-long-hyphenated-name " * 3, "  ", "    ")
    assert all(len(line) <= LINE_WIDTH for line in lines)
    assert lines[0].startswith("  word") and all(ln.startswith("    ") for ln in lines[1:])
    assert "a-very-long-hyphenated-name" in " ".join(lines)  # not cut at its hyphens


def test_an_error_quoting_what_it_was_given_is_escaped(tmp_path: Path) -> None:
    """A CommandError's message names a file whose name carries an escape sequence; an
    argparse error quotes an option's value: both reach standard error escaped, one line."""
    from commands import run_main

    name = tmp_path / "x\x1b]0;owned\x07"
    missing = run_main(["policy", "check", str(name), "--agent", "a", "/a"])
    assert missing.returncode == 2 and "\x1b" not in missing.stderr
    assert missing.stderr == f"geminibot: {tmp_path}/x\\x1b]0;owned\\x07: no such file\n"
    bad = run_main(["crawl", "gemini://a.test/", "--max-time", "9\x1b[2J"])
    assert bad.returncode == 2 and "\x1b" not in bad.stderr and bad.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("n", "noun", "plural", "text"),
    [
        (0, "request", None, "0 requests"),
        (1, "request", None, "1 request"),
        (2, "entry", "entries", "2 entries"),
        (1, "entry", "entries", "1 entry"),
    ],
)
def test_counted_agrees_in_number(n: int, noun: str, plural: str | None, text: str) -> None:
    assert counted(n, noun, plural) == text


@pytest.mark.parametrize(
    ("noun", "text"),
    [
        ("indexer", "an indexer"),
        ("archiver", "an archiver"),
        ("webproxy", "a webproxy"),
        ("researcher", "a researcher"),
    ],
)
def test_with_article_reads_as_english(noun: str, text: str) -> None:
    assert with_article(noun) == text
