"""The supervisor on small real child processes: a component that keeps exiting with a
usage error stops the service with its message; on a stop, a component that consumes what
another writes gets its SIGTERM only once that one has ended."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import trio

from geminibot.service.supervisor import USAGE_EXITS, Component, JsonLog, Supervisor


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-P", "-c", code)


def records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_component_that_keeps_exiting_with_a_usage_error_stops_the_service() -> None:
    bad = Component(
        "bad", python("import sys; print('bad: --port 0: no', file=sys.stderr); sys.exit(2)")
    )
    good = Component("good", python("import time; time.sleep(600)"))
    out = io.StringIO()
    supervisor = Supervisor([bad, good], JsonLog(out), restart_delay=0.01, restart_max=0.01)
    trio.run(supervisor.run)  # returns: the service stops by itself
    assert supervisor.failed == ("bad", "bad: --port 0: no")
    assert supervisor.state["bad"].starts == USAGE_EXITS
    logged = records(out)
    assert any("not restarted: stopping the service" in str(r.get("message")) for r in logged)
    assert any(r["component"] == "good" and r.get("message") == "stopped" for r in logged)


def test_a_component_that_fails_otherwise_is_restarted(tmp_path: Path) -> None:
    """Exit 1 (a store lost, say) is restarted as ever: the third start here lasts."""
    count = tmp_path / "starts"
    code = (
        "import pathlib, sys, time\n"
        f"p = pathlib.Path({str(count)!r})\n"
        "n = len(p.read_text()) if p.exists() else 0\n"
        "p.write_text('x' * (n + 1))\n"
        "sys.exit(1) if n < 2 else print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    out = io.StringIO()
    supervisor = Supervisor(
        [Component("flaky", python(code))], JsonLog(out), restart_delay=0.01, restart_max=0.01
    )

    def on_line(component: str, stream: str, raw: bytes) -> None:
        JsonLog.line(supervisor.log, component, stream, raw)
        if raw == b"up":
            supervisor.stop()

    supervisor.log.line = on_line  # type: ignore[method-assign]
    trio.run(supervisor.run)
    assert supervisor.failed is None
    assert supervisor.state["flaky"].starts == 3


def test_a_consumer_is_stopped_after_its_producer_has_ended(tmp_path: Path) -> None:
    """The producer writes its last piece as it stops; the consumer, told to stop only
    after, finds it (a consumer stopped at once would not: the producer's stop is slow)."""
    done = tmp_path / "last-piece"
    producer = python(
        "import pathlib, signal, sys, time\n"
        "def stop(*_):\n"
        "    time.sleep(0.5)\n"
        f"    pathlib.Path({str(done)!r}).write_text('written')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    consumer = python(
        "import pathlib, signal, sys, time\n"
        "def stop(*_):\n"
        f"    print('found' if pathlib.Path({str(done)!r}).exists() else 'missed', flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    out = io.StringIO()
    supervisor = Supervisor(
        [
            Component("consumer", consumer, stop_after=("producer",)),
            Component("producer", producer),
        ],
        JsonLog(out),
    )
    up: set[str] = set()

    def on_line(component: str, stream: str, raw: bytes) -> None:
        JsonLog.line(supervisor.log, component, stream, raw)
        if raw == b"up":
            up.add(component)
            if len(up) == 2:
                supervisor.stop()

    supervisor.log.line = on_line  # type: ignore[method-assign]
    trio.run(supervisor.run)
    said = [r.get("message") for r in records(out) if r["component"] == "consumer"]
    assert "found" in said and "missed" not in said
