"""Small helpers shared by every command line entry point.

Exit codes across all commands: 0 success / everything allowed, 1 a negative answer
(something disallowed, lint errors, policies differ), 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A problem with what the user asked for or gave us; printed without a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def emit_json(obj: Any, stream: TextIO | None = None) -> None:
    """Write one JSON object on one line (JSON Lines), keys in a stable order."""
    out = stream if stream is not None else sys.stdout
    out.write(json.dumps(obj, ensure_ascii=False, sort_keys=False) + "\n")


def read_source(source: str) -> tuple[str, bytes]:
    """Read a SOURCE argument: a file path, or ``-`` for standard input.

    Returns (display name, raw bytes). Raises CommandError with a clear message on failure.
    """
    if source == "-":
        return "<stdin>", sys.stdin.buffer.read()
    try:
        with open(source, "rb") as fh:
            return source, fh.read()
    except FileNotFoundError:
        raise CommandError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise CommandError(f"{source}: is a directory, expected a file") from None
    except OSError as exc:
        raise CommandError(f"{source}: cannot read: {exc.strerror}") from None


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run the chosen subcommand's ``run(args) -> int``.

    A missing subcommand prints the help (exit 2); a CommandError prints its message
    without a traceback; Ctrl-C exits 130; a closed pipe (``| head``) exits quietly.
    """
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = run(args)
    except CommandError as exc:
        print(f"{parser.prog}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return code


#: What could steer a terminal: C0 controls but tab and line feed, DEL, C1 controls, and a
#: carriage return that does not end a line.
_TERMINAL_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


def terminal_safe(text: str) -> str:
    """``text`` with what could steer a terminal (escape sequences, bare CR, ...) shown as
    ``\\xNN`` escapes: for any text from a file or a server on its way to a person."""
    return _TERMINAL_UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
