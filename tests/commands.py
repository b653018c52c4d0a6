"""The project's commands run as a person runs them (importable as ``commands``:
``tests/conftest.py`` puts this folder on ``sys.path``; the benchmarks put it there
themselves).

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
from typing import Any

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


def _bytes(stream: io.TextIOWrapper) -> bytes:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue()


def _text(stream: io.TextIOWrapper) -> str:
    return _bytes(stream).decode("utf-8", errors="replace")


@contextlib.contextmanager
def _captured(stdin: bytes = b"") -> Iterator[tuple[io.TextIOWrapper, io.TextIOWrapper]]:
    """Standard input ``stdin``; standard output and error captured (yielded)."""
    out, err, given = _stream(), _stream(), _stream(stdin)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = given, out, err
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


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


def _status(code: object, err: io.TextIOWrapper) -> int:
    """The exit status of ``sys.exit(code)`` (a message is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1


def _run(argv: Sequence[str], program: str, stdin: bytes, limit: float) -> tuple[int, bytes, bytes]:
    main = _entry(program)
    with _captured(stdin) as (out, err):
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
        return _status(code, err), _bytes(out), _bytes(err)


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
    code, out, err = _run(argv, program, stdin, limit)
    decoded = out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace")
    return subprocess.CompletedProcess([program, *argv], code, *decoded)


def run_main_bytes(
    argv: Sequence[str],
    *,
    program: str = "geminibot",
    stdin: bytes = b"",
    limit: float = IN_PROCESS_LIMIT,
) -> subprocess.CompletedProcess[bytes]:
    """:func:`run_main` with ``stdout`` and ``stderr`` as the bytes written."""
    code, out, err = _run(argv, program, stdin, limit)
    return subprocess.CompletedProcess([program, *argv], code, out, err)


async def crawl_in_trio(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``geminibot crawl ARGV...`` inside the caller's trio run: next to servers of the
    same process, and on the test's clock (a mock clock makes its pacing instant). Parsed
    and reported as ``geminibot`` does (a usage or input error: its line, exit 2).

    Under an autojumping mock clock, the crawl's progress report (every
    ``PROGRESS_INTERVAL``, 0.5 s) is always the next timer or nearer than it: a jump taken
    while bytes or a server's file read are still on their way moves the clock by no more
    than that, never to a request's timeout."""
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
        status = _status(code, err)
    return subprocess.CompletedProcess(
        ["geminibot", "crawl", *argv], status, _text(out), _text(err)
    )


#: Runs ``python -m geminibot ARGS...`` with its descriptor limit (soft) set to argv[1].
_WITH_NOFILE = (
    "import os, resource, sys; "
    "resource.setrlimit(resource.RLIMIT_NOFILE, "
    "(int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
    "os.execv(sys.executable, [sys.executable, '-m', 'geminibot', *sys.argv[2:]])"
)


def start_serve_search(
    db: Path | str, certs: Path, *options: str, nofile: int | None = None
) -> tuple[subprocess.Popen[str], int, str]:
    """``geminibot serve-search --db DB --port 0 --certs CERTS OPTIONS...`` in a child
    process (its descriptor limit ``nofile`` if given), once it listens: the process
    (standard error a pipe, read past its first line), the port it chose and that first
    line (``serve-search: serving NAMES on ADDRESS:PORT``). A server that does not start
    is killed: RuntimeError with what it said."""
    python = [sys.executable, "-m", "geminibot"]
    if nofile is not None:
        python = [sys.executable, "-c", _WITH_NOFILE, str(nofile)]
    argv = [*python, "serve-search", "--db", str(db), "--port", "0"]
    proc = subprocess.Popen(
        [*argv, "--certs", str(certs), *options], stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    banner = proc.stderr.readline()
    if " serving " not in banner:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"serve-search did not start: {banner}")
    return proc, int(banner.rsplit(":", 1)[1]), banner


def answer_of(handler: Callable[[Any], Any], url: object) -> Any:
    """A Gemini handler's answer to ``url`` (a :class:`~geminibot.gemini.server.Resolution`),
    an awaitable one awaited in a trio run of its own."""
    import inspect

    import trio

    answer = handler(url)
    if not inspect.isawaitable(answer):
        return answer

    async def awaited() -> Any:
        return await answer

    return trio.run(awaited)
