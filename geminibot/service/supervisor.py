"""A supervised process tree: each component a child process, restarted when it dies.

A :class:`Component` is a name and a command line. :func:`supervise` starts every one,
reads what each writes (standard output and error, line by line) and logs it as one JSON
object a line (:class:`JsonLog`: the time, the component, and the line, or the object
when the line is one); a component that ends while the service runs is logged and started
again after ``restart_delay`` seconds, doubled at each death in a row up to
``restart_max`` (back to the first delay once it has run :data:`HEALTHY_AFTER` seconds).
When :meth:`Supervisor.stop` is called (SIGTERM, SIGINT), each child gets SIGTERM, and
SIGKILL if it has not ended within ``stop_timeout`` seconds; a component that consumes
what another writes (the index updater, the crawl's pages) gets its SIGTERM once that one
has ended (``stop_after``, at most ``stop_timeout`` later), so that it takes the last of it.

A component that exits with a usage error (exit 2: what it was given cannot work, and
will not on the next start either) :data:`USAGE_EXITS` times in a row is not started
again: the service stops, and :attr:`Supervisor.failed` holds the component and the last
line it wrote on standard error (its message).

The children die with the supervisor (``PR_SET_PDEATHSIG`` on Linux): a ``kill -9`` of
the service leaves no orphan holding the database or a port; each component's own crash
safety (the crawl's store, the index's catch-up) makes the next start lose nothing.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import trio

#: Seconds a component must have run for its next death to be restarted after the first
#: delay again.
HEALTHY_AFTER = 60.0
#: Exits with a usage error in a row after which a component is not started again (more
#: than one: a port that a component killed a moment ago still holds is no mistake).
USAGE_EXITS = 3
#: A component's exit code that says it was given what cannot work.
EXIT_USAGE = 2
#: Longest line of a component's output logged whole (bytes); the rest is cut.
MAX_LINE = 64 * 1024
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Component:
    """One child process of the service: its name and command line."""

    name: str
    argv: tuple[str, ...]
    #: Added to the process's niceness (``os.nice``): background work yields the CPU.
    nice: int = 0
    #: On a stop, the components that must have ended before this one gets SIGTERM.
    stop_after: tuple[str, ...] = ()


@dataclass
class ComponentState:
    """What the service knows of one component (for the metrics)."""

    running: bool = False
    starts: int = 0
    restarts: int = 0
    last_exit: int | None = None
    #: The last line it wrote on standard error (a usage error's message).
    last_error: str = ""
    process: Child | None = field(default=None, repr=False)


class JsonLog:
    """One JSON object a line: ``time`` (Unix seconds), ``component``, then either
    ``message`` (a line of text) or ``event`` (a line that was a JSON object)."""

    def __init__(
        self, out: TextIO, clock: Callable[[], float] = time.time, on_event: Any = None
    ) -> None:
        self.out = out
        self.clock = clock
        #: Called with (component, event object) for each JSON line a component writes.
        self.on_event: Callable[[str, dict[str, Any]], None] | None = on_event

    def write(self, component: str, **fields: object) -> None:
        record = {"time": round(self.clock(), 3), "component": component, **fields}
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()

    def line(self, component: str, stream: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if text.startswith("{"):
            try:
                event = json.loads(text)
            except ValueError:
                event = None
            if isinstance(event, dict):
                if self.on_event is not None:
                    self.on_event(component, event)
                self.write(component, stream=stream, event=event)
                return
        self.write(component, stream=stream, message=text)


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Child:
    """A component's process, started from the thread that runs the service (Linux sends
    ``PR_SET_PDEATHSIG`` when the thread that started a child ends, so not from a worker
    thread, as ``trio.lowlevel.open_process`` would), waited for through a pidfd."""

    def __init__(self, argv: list[str], env: dict[str, str], nice: int = 0) -> None:
        def before_exec() -> None:  # pragma: no cover - runs in the child before exec
            _die_with_parent()
            if nice:
                os.nice(nice)

        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=before_exec,  # noqa: PLW1509 - only prctl and nice, no lock
        )
        self.pid = self.popen.pid
        self._pidfd = os.pidfd_open(self.pid)
        self._watcher = False
        self._exited = trio.Event()
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self.streams = {
            "stdout": trio.lowlevel.FdStream(os.dup(self.popen.stdout.fileno())),
            "stderr": trio.lowlevel.FdStream(os.dup(self.popen.stderr.fileno())),
        }
        self.popen.stdout.close()
        self.popen.stderr.close()

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    async def wait(self) -> int:
        """Wait until the process ends (any number of tasks at once); its exit code."""
        while self.popen.poll() is None:
            if self._watcher:  # another task watches the pidfd: wait for its word
                await self._exited.wait()
                continue
            self._watcher = True
            try:
                await trio.lowlevel.wait_readable(self._pidfd)
            finally:
                self._watcher = False
            self.popen.wait()
            self._exited.set()
        return int(self.popen.returncode)

    def send_signal(self, signum: int) -> None:
        if self.popen.returncode is None:
            self.popen.send_signal(signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def close(self) -> None:
        os.close(self._pidfd)


async def _pump(stream: trio.abc.ReceiveStream, emit: Callable[[bytes], None]) -> None:
    """Each line of ``stream`` to ``emit`` (a line longer than :data:`MAX_LINE` cut)."""
    pending = b""
    while chunk := await stream.receive_some(65536):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            emit(line[:MAX_LINE])
        if len(pending) > MAX_LINE:
            emit(pending[:MAX_LINE])
            pending = b""
    if pending:
        emit(pending[:MAX_LINE])


class Supervisor:
    """Runs each component as a child process, restarts it when it dies after a delay
    that doubles while it keeps dying, and stops them all on :meth:`stop`."""

    def __init__(
        self,
        components: list[Component],
        log: JsonLog,
        *,
        restart_delay: float = 1.0,
        restart_max: float = 60.0,
        stop_timeout: float = 30.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.components = components
        self.log = log
        self.restart_delay = restart_delay
        self.restart_max = restart_max
        self.stop_timeout = stop_timeout
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.state = {c.name: ComponentState() for c in components}
        self.stopping = False
        #: The component that exited with usage errors and the last line it wrote, when
        #: that stopped the service.
        self.failed: tuple[str, str] | None = None
        self._wakeup = trio.Event()
        self._ended = {c.name: trio.Event() for c in components}

    async def run(self) -> None:
        """Run every component until :meth:`stop`; returns once all have ended."""
        async with trio.open_nursery() as nursery:
            for component in self.components:
                nursery.start_soon(self._ended_after, component)

    async def _ended_after(self, component: Component) -> None:
        try:
            await self._keep(component)
        finally:
            self._ended[component.name].set()

    def stop(self) -> None:
        """Stop every component (SIGTERM, then SIGKILL after ``stop_timeout``)."""
        self.stopping = True
        self._wakeup.set()

    async def _keep(self, component: Component) -> None:
        delay = self.restart_delay
        usage_errors = 0
        state = self.state[component.name]
        while not self.stopping:
            started = time.monotonic()
            code = await self._run_once(component, state)
            if self.stopping:
                self.log.write(component.name, message="stopped", exit=code)
                return
            if time.monotonic() - started >= HEALTHY_AFTER:
                delay = self.restart_delay
                usage_errors = 0
            usage_errors = usage_errors + 1 if code == EXIT_USAGE else 0
            if usage_errors >= USAGE_EXITS:
                self.log.write(
                    component.name,
                    message=f"exited with {code} (a usage error) {usage_errors} times in a "
                    "row; not restarted: stopping the service",
                    exit=code,
                )
                self.failed = (component.name, state.last_error)
                self.stop()
                return
            state.restarts += 1
            self.log.write(
                component.name,
                message=f"exited with {code}; restarting in {delay:g} s",
                exit=code,
                restarts=state.restarts,
            )
            with trio.move_on_after(delay):
                await self._wakeup.wait()
            delay = min(delay * 2, self.restart_max)

    async def _run_once(self, component: Component, state: ComponentState) -> int:
        process = Child(list(component.argv), self.env, component.nice)
        state.process, state.running = process, True
        state.starts += 1
        self.log.write(
            component.name,
            message="started",
            pid=process.pid,
            argv=component.argv,
            nice=component.nice,
        )
        try:
            async with trio.open_nursery() as nursery:
                for name, stream in process.streams.items():
                    nursery.start_soon(
                        _pump, stream, lambda raw, n=name: self._line(component.name, n, raw)
                    )
                nursery.start_soon(self._reap, component, process)
        finally:
            state.running = False
            if process.returncode is None:  # cancelled: do not leave it behind
                process.kill()
            for stream in process.streams.values():
                stream.close()
            process.close()
        state.last_exit = process.returncode
        return int(process.returncode or 0)

    def _line(self, component: str, stream: str, raw: bytes) -> None:
        if stream == "stderr" and raw.strip():
            self.state[component].last_error = raw.decode("utf-8", "replace").strip()
        self.log.line(component, stream, raw)

    async def _reap(self, component: Component, process: Child) -> None:
        """Wait for the process to end; once the service stops (and the components of
        ``stop_after`` have ended, or ``stop_timeout`` has passed), SIGTERM it, and
        SIGKILL it after ``stop_timeout``."""
        async with trio.open_nursery() as nursery:

            async def on_stop() -> None:
                await self._wakeup.wait()
                with trio.move_on_after(self.stop_timeout):
                    for name in component.stop_after:
                        if name in self._ended:
                            await self._ended[name].wait()
                self.log.write("service", message="stopping", pid=process.pid)
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(self.stop_timeout):
                    await process.wait()
                if process.returncode is None:
                    self.log.write("service", message="killing", pid=process.pid)
                    process.kill()

            nursery.start_soon(on_stop)
            await process.wait()
            nursery.cancel_scope.cancel()
