"""CPU each component of ``geminibot serve`` costs to start, for one or more geminibot
trees side by side (each tree's own virtualenv's Python), alternated in one run.

Each component is started as the service starts it (``python -P -m geminibot ...``, in
a scratch folder) on a small crawl database of one page; once it is up, its own CPU
time (user + system, from ``/proc/PID/stat``) is read and it gets SIGTERM. "Up" is:

- ``serve-search``, ``portal``: the line that says where it listens;
- ``crawl`` (``--forever``, its seed a loopback address the guard refuses, so no
  traffic leaves the machine): the JSON summary of its first run;
- ``index update --follow``, ``index authority --every 600``: they say nothing when up,
  so their CPU is read after :data:`SETTLE` seconds (start-up and that much idling);
- ``serve`` (crawl, index, authority, search capsule and portal): the service's own
  process (its children not counted) once both servers have said they listen.

Every start is bounded by :data:`UP_BOUND` seconds and every child is stopped; nothing
but loopback is reached. The table shows the median of ``--runs`` starts (and the
lowest) per component and tree.

    .venv/bin/python bench/component_startup.py \\
        --tree main=/work/main/.venv/bin/python --tree new=.venv/bin/python [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from loopback import free_port
from machine import cpu_model
from pages import one_page_database

#: Seconds a component that says nothing when up is given before its CPU is read.
SETTLE = 2.0
#: Seconds a component may take to be up before the benchmark gives up on it.
UP_BOUND = 60.0
#: Seconds a component has to end after SIGTERM before it is killed.
STOP_BOUND = 30.0
#: A seed the crawl's address guard refuses (loopback without --test-range): no traffic.
SEED = "gemini://127.0.0.1:1/"
TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Component:
    """One component as the service starts it: its arguments (``DB``, ``CONFIG``,
    ``CERTS`` filled in) and what says it is up (None: :data:`SETTLE` seconds)."""

    name: str
    argv: tuple[str, ...]
    up: Callable[[str], bool] | None


def listening(marker: str) -> Callable[[str], bool]:
    return lambda output: marker in output


COMPONENTS = [
    Component(
        "serve-search",
        ("serve-search", "--db", "DB", "--port", "0", "--certs", "CERTS"),
        listening("serve-search: serving "),
    ),
    Component("portal", ("portal", "--db", "DB", "--port", "0"), listening("http://127.0.0.1:")),
    Component("crawl", ("crawl", SEED, "--db", "DB", "--forever", "--json"), listening('"pages"')),
    Component("index update", ("index", "update", "--db", "DB", "--follow"), None),
    Component(
        "index authority", ("index", "authority", "--db", "DB", "--every", "600", "--json"), None
    ),
    Component(
        "serve (own CPU)",
        ("serve", "--config", "CONFIG"),
        lambda out: "serve-search: serving " in out and "http://127.0.0.1:" in out,
    ),
]

CONFIG = """\
[service]
db = "{db}"
background_nice = 0
[crawl]
seeds = ["{seed}"]
[index]
authority_every = 600
[search]
port = {search_port}
certs = "{certs}"
[portal]
enabled = true
port = {portal_port}
"""


def cpu_seconds(pid: int) -> float:
    """The process's own user + system CPU so far (not its children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_once(python: str, component: Component, folder: Path) -> float:
    """Start ``component`` with ``python``; its CPU once up; stop it."""
    fill = {"DB": str(folder / "crawl.db"), "CONFIG": str(folder / "serve.toml")}
    fill["CERTS"] = str(folder / "certs")
    argv = [python, "-P", "-m", "geminibot", *(fill.get(a, a) for a in component.argv)]
    proc = subprocess.Popen(
        argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert proc.stdout is not None
        output = ""
        deadline = time.monotonic() + (SETTLE if component.up is None else UP_BOUND)
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while component.up is None or not component.up(output):
                left = deadline - time.monotonic()
                if left <= 0:
                    if component.up is None:
                        break
                    raise SystemExit(f"{component.name}: not up in {UP_BOUND:g} s:\n{output}")
                if selector.select(left):
                    line = proc.stdout.readline()
                    if not line:
                        raise SystemExit(f"{component.name}: ended before it was up:\n{output}")
                    output += line
        return cpu_seconds(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tree",
        action="append",
        required=True,
        metavar="NAME=PYTHON",
        help="a geminibot tree: a name and its virtualenv's python (repeat)",
    )
    parser.add_argument("--runs", type=int, default=7, help="starts per component and tree")
    parser.add_argument("--only", action="append", help="only this component (repeat)")
    args = parser.parse_args()
    trees = {}
    for tree in args.tree:
        name, _, python = tree.partition("=")
        if not os.access(python, os.X_OK):
            parser.error(f"--tree {tree!r}: no Python at {python!r}")
        # Absolute, not resolved: the components start in another folder, and a
        # virtualenv's python is a link that must stay itself.
        trees[name] = str(Path(python).absolute())
    components = [c for c in COMPONENTS if not args.only or c.name in args.only]
    print(f"nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    seconds: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        folder = Path(scratch)
        one_page_database(folder / "crawl.db")
        (folder / "serve.toml").write_text(
            CONFIG.format(
                db=folder / "crawl.db",
                seed=SEED,
                certs=folder / "certs",
                search_port=free_port(),
                portal_port=free_port(),
            )
        )
        for run in range(args.runs):
            for component in components:
                for name, python in trees.items():  # alternated: each start beside the other
                    cpu = start_once(python, component, folder)
                    seconds.setdefault((component.name, name), []).append(cpu)
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"CPU seconds to be up, median (lowest) of {args.runs} starts")
    print(f"{'component':<18}" + "".join(f"{name:>16}" for name in trees))
    for component in components:
        cells = []
        for name in trees:
            found = seconds[(component.name, name)]
            cells.append(f"{statistics.median(found):.2f} ({min(found):.2f})")
        print(f"{component.name:<18}" + "".join(f"{cell:>16}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
