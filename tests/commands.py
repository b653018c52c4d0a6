"""The project's commands run as a person runs them (importable as ``commands``:
``tests/conftest.py`` puts this folder on ``sys.path``).

:func:`run_main` runs a command in this process: the same ``main(argv)`` the
``geminibot`` and ``capsule-server`` scripts call, with standard input, output and error
of its own and the exit status the script would give (an uncaught exception prints its
traceback on standard error and exits 1, as Python does). It spares a test the half a
second a new interpreter spends importing the package. :func:`run_module` runs
``python -m MODULE`` in a child process, for the tests that are about the process itself
(its entry point, signals, a kill)."""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType

#: Seconds an in-process command may run before it is stopped (and its test fails): far
#: more than any command under test needs, far less than a hang.
IN_PROCESS_LIMIT = 60.0


def run_module(
    module: str, *args: str, timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS...`` with its output captured as text; it is killed (and
    the test fails) after ``timeout`` seconds."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


class CommandTimeout(Exception):
    """An in-process command ran past its limit."""


def _entry(program: str) -> Callable[[Sequence[str]], int]:
    if program == "geminibot":
        from geminibot.cli import main
    elif program == "capsule-server":
        from capsule_server.cli import main
    else:
        raise ValueError(f"no such program: {program}")
    return main


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline=None)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", errors="replace")


@contextlib.contextmanager
def _limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CommandTimeout` in the main thread after ``seconds`` (SIGALRM)."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise CommandTimeout(f"the command ran more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_main(
    argv: Sequence[str],
    *,
    program: str = "geminibot",
    stdin: bytes = b"",
    limit: float = IN_PROCESS_LIMIT,
) -> subprocess.CompletedProcess[str]:
    """``PROGRAM ARGV...`` (``geminibot`` or ``capsule-server``) run in this process, as
    its script runs it: ``returncode``, ``stdout`` and ``stderr`` as text. Standard input
    is ``stdin`` (empty: as from /dev/null)."""
    main = _entry(program)
    out, err, given = _stream(), _stream(), _stream(stdin)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = given, out, err
    try:
        with _limit(limit):
            try:
                code: object = main(list(argv))
            except SystemExit as exc:
                code = exc.code
            except CommandTimeout:
                raise
            except BaseException:  # what Python does with an uncaught exception
                traceback.print_exc(file=err)
                code = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message")
        print(code, file=err)
        code = 1
    return subprocess.CompletedProcess([program, *argv], code, _text(out), _text(err))


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.TextIOWrapper, io.TextIOWrapper]]:
    out, err, given = _stream(), _stream(), _stream()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = given, out, err
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


async def crawl_in_trio(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``geminibot crawl ARGV...`` inside the caller's trio run: next to servers of the
    same process, and on the test's clock (a mock clock makes its pacing instant). Parsed
    and reported as ``geminibot`` does (a usage or input error: its line, exit 2)."""
    from geminibot.cli import build_parser
    from geminibot.cliutil import CommandError
    from geminibot.crawl.cli import crawl_async

    parser = build_parser("crawl", load_all=False)
    with _captured() as (out, err):
        try:
            code: object = await crawl_async(parser.parse_args(["crawl", *argv]))
        except SystemExit as exc:
            code = exc.code
        except CommandError as exc:
            print(f"{parser.prog}: {exc.message}", file=err)
            code = exc.exit_code
    return subprocess.CompletedProcess(["geminibot", "crawl", *argv], code, _text(out), _text(err))
