"""Small helpers shared by every command line entry point.

Exit codes across all commands: 0 success / everything allowed, 1 a negative answer
(something disallowed, lint errors, policies differ), 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO, TypeVar

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A problem with what the user asked for or gave us; printed without a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?:in)?)?"
    r"(?:(\d+(?:\.\d+)?)s?)?"
)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h30m``, ``2d`` -> seconds; raises ValueError."""
    m = _DURATION.fullmatch(text.strip().lower().replace(" ", ""))
    if m is None or not any(m.groups()):
        raise ValueError(f"{text!r} is not a duration (examples: 90, 90s, 5m, 1h30m, 2d)")
    d, h, mins, secs = (float(g) if g else 0.0 for g in m.groups())
    return d * 86400 + h * 3600 + mins * 60 + secs


def human_duration(seconds: float) -> str:
    """``0.4 s``, ``8 s``, ``1 min 30 s``, ``7 h 36 min``, ``2 d 3 h``: two units at most."""
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


class _ShowDefaults(argparse.HelpFormatter):
    """Adds ``(default: X)`` to an option's help unless the help already names its
    default (or it has none worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        shown = default not in (None, False, True, [], "", argparse.SUPPRESS)
        if not action.option_strings or not shown or "default" in text.lower():
            return text
        forms = {str(default)} | ({f"{default:g}"} if isinstance(default, float) else set())
        if any(re.search(rf"\({re.escape(f)}[);]", text) for f in forms):
            return text  # the help says it already: "(8965; 0: any)"
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """The parser of every command: defaults shown in ``--help``; a usage error is ONE
    line on standard error (exit 2), naming the command."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        given = kwargs.get("formatter_class", argparse.HelpFormatter)
        if not issubclass(given, _ShowDefaults):
            kwargs["formatter_class"] = type(given.__name__, (_ShowDefaults, given), {})
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {terminal_safe(message)}\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """As argparse's, noting in the namespace the innermost (sub)command's parser that
        parsed, so that :meth:`parse_args` reports an unknown argument as that command's
        (``geminibot policy check: unrecognized arguments: ...``)."""
        parsed, extras = super().parse_known_args(args, namespace)
        if getattr(parsed, _COMMAND_PARSER, None) is None:
            setattr(parsed, _COMMAND_PARSER, self)
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        command = getattr(parsed, _COMMAND_PARSER, None)
        if hasattr(parsed, _COMMAND_PARSER):
            delattr(parsed, _COMMAND_PARSER)
        if extras:
            (command if isinstance(command, Parser) else self).error(
                f"unrecognized arguments: {' '.join(extras)}"
            )
        return parsed


#: The namespace attribute where :class:`Parser` notes which command's parser parsed.
_COMMAND_PARSER = "_command_parser"


Number = TypeVar("Number", int, float)


def bounded_number(
    kind: type[Number],
    low: float | None = None,
    high: float | None = None,
    *,
    above: bool = False,
    name: str | None = None,
) -> Callable[[str], Number]:
    """The argparse ``type=`` of every bounded numeric option: a finite ``kind`` (int or
    float) from ``low`` (or, with ``above``, more than ``low``) to ``high``; either bound
    may be None. A value outside is :class:`argparse.ArgumentTypeError`, so the command's
    usage error names the option: ``'x' is not a number``, ``0 must be 1 or more``,
    ``0 must be a number above 0``, ``9 must be 0 to 5``; with ``name`` (``port``),
    ``'x' is not a port number`` and ``70000 is not a port (0-65535)``."""
    noun = f"{name} number" if name else "whole number" if kind is int else "number"

    def parse(text: str) -> Number:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a {noun}") from None
        too_low = low is not None and (value <= low if above else value < low)
        if not math.isfinite(value) or too_low or (high is not None and value > high):
            if name and low is not None and high is not None:
                raise argparse.ArgumentTypeError(f"{text} is not a {name} ({low:g}-{high:g})")
            raise argparse.ArgumentTypeError(f"{text} must be {_span(low, high, above)}")
        return value

    return parse


def _span(low: float | None, high: float | None, above: bool) -> str:
    if low is None:
        return f"at most {high:g}" if high is not None else "a finite number"
    if high is None:
        return f"a number above {low:g}" if above else f"{low:g} or more"
    return f"above {low:g} and at most {high:g}" if above else f"{low:g} to {high:g}"


#: ``--port``: 0 (any free port) to 65535.
port_number = bounded_number(int, 0, 65535, name="port")
#: Counts of at least one (connections, burst sizes).
positive_int = bounded_number(int, 1)
#: Rates and times above 0.
positive_float = bounded_number(float, 0, above=True)


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
    (escaped: :func:`terminal_safe`) on one line, without a traceback; Ctrl-C exits 130;
    a closed pipe (``| head``) exits quietly.
    """
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = run(args)
    except CommandError as exc:  # its message may quote a file or a server: escaped
        print(f"{parser.prog}: {terminal_safe(exc.message)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return code


#: What could steer a terminal or reorder what it shows: C0 controls, DEL, C1 controls,
#: Unicode's bidirectional controls (text shown in another order than it is read: "Trojan
#: Source") and its line and paragraph separators.
_CONTROLS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # but tab, LF and CR
_REORDERING = r"\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_LINE_UNSAFE = re.compile(rf"[{_CONTROLS}{_REORDERING}\t\n\r]")
#: The same but tab, line feed and a carriage return that ends a line: for text of lines.
_TEXT_UNSAFE = re.compile(rf"[{_CONTROLS}{_REORDERING}]|\r(?!\n)")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with what could steer a terminal (escape sequences, line breaks, tabs,
    bidirectional controls, ...) shown as ``\\xNN`` or ``\\uNNNN`` escapes: for any text
    from a file or a server on its way to a person, which must not start a line that could
    pass for the program's own. ``keep_lines``: tabs and line breaks (LF, CRLF) are kept,
    for a text of several lines (a page's body)."""
    return (_TEXT_UNSAFE if keep_lines else _LINE_UNSAFE).sub(_escape, text)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` agreeing: ``1 request``, ``2 requests``, ``0 entries`` (give
    ``plural`` when adding "s" is wrong: ``counted(n, "entry", "entries")``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an" by its first letter: ``an indexer``, ``a webproxy``,
    ``an archiver`` (by spelling: good for the project's words, not for "an hour")."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


#: Columns a line for a person fits in when nothing says the terminal is wider.
LINE_WIDTH = 80


def clipped(text: str, width: int = LINE_WIDTH) -> str:
    """``text`` cut to ``width`` characters, the cut shown by a final "…" (for a line that
    ends in text of unbounded length, a server's reason say: make it terminal-safe first)."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def wrapped(text: str, indent: str = "", hang: str | None = None) -> list[str]:
    """``text`` escaped for a terminal (it may quote a file or a server:
    :func:`terminal_safe`, which leaves escaped text as it is) as lines of at most
    :data:`LINE_WIDTH` columns, the first led by ``indent``, the others by ``hang`` (by
    default ``indent`` and two spaces); never cut at a hyphen; none for an empty text."""
    follow = indent + "  " if hang is None else hang
    return textwrap.wrap(
        terminal_safe(text),
        LINE_WIDTH,
        initial_indent=indent,
        subsequent_indent=follow,
        break_on_hyphens=False,
    )


def say(out: TextIO, text: str, indent: str = "", hang: str | None = None) -> None:
    """Write one line for a person to ``out``: ``text`` escaped and wrapped to 80 columns
    (:func:`wrapped`); an empty ``text`` writes an empty line."""
    out.write("\n".join(wrapped(text, indent, hang)) + "\n")


class StopSignals:
    """SIGTERM and SIGINT ask a synchronous loop to stop, for the duration of a ``with``
    block: :meth:`is_set` says whether one came, :meth:`wait` sleeps until one comes or
    the time is up. The previous handlers are restored on leaving."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, _signum: int, _frame: object) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` or until a stop signal; True if one came."""
        return self._event.wait(seconds)
