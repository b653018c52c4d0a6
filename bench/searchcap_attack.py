"""The search capsule under attack, on loopback: is a normal search still answered in
under a second?

In one run, for the search capsule of this tree (and, with ``--old SRC``, of another
source tree, side by side), each with a crawl database its own code wrote:

- the crawl: ``--pages`` ordinary pages on 50 hosts, a trusted hub (the seed of link
  authority) linking to honest recipe pages; twelve pages of 4 MB titled "garden party"
  whose text never says party; one 4 MB page titled "recipe poetry" with headings
  "recipe", on a host linked as "recipe" by a farm of six hosts nothing trusted links to;
  authority computed (TrustRank from the hub), the tantivy index built;
- ``geminibot serve-search`` on it, a real process with its default limits and its
  descriptor limit at 1,024;
- the attacks, one after another, each for ``--seconds``, each from addresses of its
  own (127.0.0.x): **stuffing**, eight clients searching "recipe" and "party" (the
  stuffed page and the pages of megabytes) as fast as they are answered; **costly
  queries**, four clients each sending 1.5 queries a second (6 in all, under the rate
  limit) of 125 one-letter prefixes, or the costliest query the budget accepts;
- a person (127.0.0.1) searching for an ordinary word four times a second, before (the
  baseline), during each attack and for 10 s after it (is its median back?); and,
  before the attacks, for "recipe" and "party" (the hostile pages' words), alone
  ("hostile pages": what those pages cost each search that lists them);
- the capsule's resident memory, sampled 4 times a second, and its peak.

Every loop stops by itself after its seconds; every request has a bound; every
connection is to loopback.

    .venv/bin/python bench/searchcap_attack.py [--seconds 20] [--old /path/to/old/tree]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "portal"))

from machine import cpu_model
from public_fixtures import rss_mib

from capsule_server.testing import raw_request

HOST = "search.test"
#: The descriptor limit the capsule runs with (systemd's default).
DESCRIPTORS = 1024
STARTUP_BOUND = 120.0
#: Seconds one request may take before it counts as failed (a bound, not a figure).
REQUEST_BOUND = 30.0
#: Seconds the person goes on searching after an attack stops.
AFTER = 10.0
PERSON_EVERY = 0.25
BIG_PAGES = 12
BIG_CHARS = 4_000_000
FARM = 6
STUFFERS = 8
COSTLY_CLIENTS = 4
COSTLY_EVERY = 1 / 1.5
ONE_LETTER_PREFIXES = " ".join(f"{c}*" for c in "abcdefghijklmnopqrstuvwxy" * 5)
#: The costliest query the query budget of this tree accepts (3 prefixes, 9 words).
COSTLIEST = "gar* ter* lor* " + " ".join(f"w{n}" for n in range(9))
PERSON_WORDS = ["tomato", "basil", "harbour", "lantern", "orchard"]
_HEADER = re.compile(rb"^(\d\d) ?([^\r\n]*)\r\n")


def build(db: Path, pages: int) -> None:
    """The crawl (see the module docstring), written by the code on ``sys.path``."""
    try:
        from geminibot.store.db import connect, transaction
        from geminibot.store.pages import Link, Page, store_page
    except ImportError:  # a tree from before geminibot/store/
        from geminibot.index import (  # type: ignore[attr-defined,no-redef]
            Link,
            Page,
            connect,
            store_page,
            transaction,
        )
    from geminibot.index.authority import compute_authority
    from geminibot.index.tantivy_index import rebuild

    def page(url: str, title: str, text: str, **kw: object) -> Page:
        host = url.split("/")[2]
        return Page(url, host, 20, "text/gemini", 1.7e9, len(text), "text/gemini",
                    title=title, text=text, **kw)  # type: ignore[arg-type]  # fmt: skip

    rnd = random.Random(55)
    vocabulary = [f"w{n}" for n in range(4000)] + PERSON_WORDS + ["garden", "terrace"]
    filler = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * 80_000)[:BIG_CHARS]
    conn = connect(db)
    with transaction(conn):
        hub = "gemini://hub.test/"
        kitchens = [f"gemini://kitchen.test/{n}" for n in range(3)]
        store_page(conn, page(hub, "Hub", "Good capsules.",
                              links=tuple(Link(k, "a kitchen") for k in kitchens)), "indexer")  # fmt: skip
        for k in kitchens:
            store_page(conn, page(k, "Soup", "A recipe for soup; this recipe is good."), "indexer")
        for n in range(pages):
            text = " ".join(rnd.choice(vocabulary) for _ in range(300))
            url = f"gemini://h{n % 50}.test/{n}"
            links = (Link(f"gemini://h{(n + 1) % 50}.test/{n + 1}", "next"),)
            store_page(conn, page(url, f"Page {n}", text, links=links), "indexer")
        store_page(conn, page(hub + "more", "More", "", links=(Link("gemini://h0.test/0"),)),
                   "indexer")  # fmt: skip
        spam = "gemini://spam.test/"
        store_page(conn, page(spam, "recipe poetry", filler, headings=("recipe",)), "indexer")
        for n in range(FARM):
            farm = page(f"gemini://farm{n}.test/", "Farm", "x", links=(Link(spam, "recipe"),))
            store_page(conn, farm, "indexer")
        for n in range(BIG_PAGES):
            store_page(conn, page(f"gemini://party{n}.test/", "garden party", filler), "indexer")
    compute_authority(conn, ["gemini://hub.test/"])
    rebuild(conn)
    conn.close()


def limit_descriptors() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, hard))


def start(src: Path | None, db: Path, folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``serve-search`` of ``src`` (None: this tree) on ``db``, once it listens."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    argv = [sys.executable, "-m", "geminibot", "serve-search", "--db", str(db), "--port", "0"]
    argv += ["--certs", str(folder / "certs"), "--hostname", HOST, "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env,
        preexec_fn=limit_descriptors, cwd=folder,  # noqa: PLW1509  (no threads yet)
    )  # fmt: skip
    assert proc.stderr is not None
    banner = proc.stderr.readline().decode()
    if " serving " not in banner:
        proc.kill()
        raise RuntimeError(f"serve-search did not start: {banner}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # never a full pipe
    return proc, int(banner.rsplit(":", 1)[1])


@dataclass
class Phase:
    person: list[float] = field(default_factory=list)  # seconds of each answered search
    statuses: dict[str, int] = field(default_factory=dict)  # the person's answers
    attackers: dict[str, int] = field(default_factory=dict)
    after: list[float] = field(default_factory=list)  # the person's last 5 s after it
    peak_mib: float = 0.0


async def ask(port: int, query: str, client: str) -> tuple[str, float]:
    """(status, seconds) of one search; status "--" when nothing came within the bound."""
    started = time.monotonic()
    line = f"gemini://{HOST}/search?{quote(query)}\r\n".encode()
    with trio.move_on_after(REQUEST_BOUND):
        got = await raw_request(port, line, HOST, local_address=client)
        m = _HEADER.match(got)
        return (m[1].decode() if m else "??"), time.monotonic() - started
    return "--", time.monotonic() - started


def count(counts: dict[str, int], status: str) -> None:
    counts[status] = counts.get(status, 0) + 1


async def person(
    port: int, stop: float, phase: Phase, after: float | None = None, words: list[str] | None = None
) -> None:
    words = words or PERSON_WORDS
    n = 0
    while trio.current_time() < stop:
        status, took = await ask(port, words[n % len(words)], "127.0.0.1")
        n += 1
        if after is not None and trio.current_time() >= after:
            phase.after.append(took)
        elif after is None:
            count(phase.statuses, status)
            if status == "20":
                phase.person.append(took)
        await trio.sleep(PERSON_EVERY)


async def stuffer(port: int, stop: float, phase: Phase, n: int) -> None:
    while trio.current_time() < stop:
        query = "recipe" if n % 2 else "party"
        with trio.move_on_at(stop):
            count(phase.attackers, (await ask(port, query, f"127.0.0.{10 + n}"))[0])


async def costly(port: int, stop: float, phase: Phase, n: int) -> None:
    while trio.current_time() < stop:
        query = ONE_LETTER_PREFIXES if n % 2 else COSTLIEST
        with trio.move_on_at(stop):
            count(phase.attackers, (await ask(port, query, f"127.0.0.{30 + n}"))[0])
            await trio.sleep(COSTLY_EVERY)


async def memory(pid: int, stop: float, phase: Phase) -> None:
    while trio.current_time() < stop:
        try:
            phase.peak_mib = max(phase.peak_mib, rss_mib(pid)[1])
        except (OSError, KeyError):
            return
        await trio.sleep(0.25)


async def first_result(port: int, query: str) -> str:
    """The first result's URL for ``query`` (asked from an address of its own)."""
    line = f"gemini://{HOST}/search?{quote(query)}\r\n".encode()
    with trio.move_on_after(REQUEST_BOUND):
        got = await raw_request(port, line, HOST, local_address="127.0.0.99")
        links = re.findall(rb"^=> (gemini://\S+)", got, re.MULTILINE)
        return links[0].decode() if links else "(none)"
    return "(no answer)"


async def one_run(port: int, pid: int, seconds: float) -> dict[str, Phase]:
    print(f"  first for 'recipe': {await first_result(port, 'recipe')}", file=sys.stderr)
    phases = {n: Phase() for n in ("baseline", "hostile pages", "stuffing", "costly queries")}
    await person(port, trio.current_time() + min(seconds, 10.0), phases["baseline"])
    hostile = ["recipe", "party"]  # the queries that list the pages of megabytes
    await person(
        port, trio.current_time() + min(seconds, 10.0), phases["hostile pages"], None, hostile
    )
    for name, attacker, clients in (
        ("stuffing", stuffer, STUFFERS),
        ("costly queries", costly, COSTLY_CLIENTS),
    ):
        phase = phases[name]
        stop = trio.current_time() + seconds
        async with trio.open_nursery() as nursery:
            nursery.start_soon(memory, pid, stop + AFTER, phase)
            for n in range(clients):
                nursery.start_soon(attacker, port, stop, phase, n)
            await trio.sleep(1.0)  # the attack is under way
            await person(port, stop, phase)
            await person(port, stop + AFTER, phase, after=stop + AFTER - 5.0)
    return phases


def measure(src: Path | None, pages: int, seconds: float) -> dict[str, Phase]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "crawl.db"
        env = dict(os.environ, PYTHONPATH=str(src)) if src is not None else None
        built = time.monotonic()
        subprocess.run(
            [sys.executable, __file__, "--build", str(db), "--pages", str(pages)],
            check=True, env=env,
        )  # fmt: skip
        print(f"  built in {time.monotonic() - built:.0f} s", file=sys.stderr)
        proc, port = start(src, db, folder)
        try:
            return trio.run(one_run, port, proc.pid, seconds)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def p(times: list[float], q: float) -> str:
    if not times:
        return "-"
    ordered = sorted(times)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.0f}"


def report(runs: dict[str, dict[str, Phase]], seconds: float, pages: int) -> None:
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"crawl: {pages} pages + {BIG_PAGES} pages of 4 MB + a stuffed 4 MB page; each")
    print(f"attack {seconds:g} s, descriptor limit {DESCRIPTORS}; times in ms")
    for name, phases in runs.items():
        print(f"\n{name}")
        print(f"  {'phase':16}{'p50':>7}{'p95':>7}{'max':>7}{'p50 after':>10}{'peak MiB':>9}")
        for label, ph in phases.items():
            after = f"{statistics.median(ph.after) * 1000:.0f}" if ph.after else "-"
            peak = f"{ph.peak_mib:.0f}" if ph.peak_mib else "-"
            print(
                f"  {label:16}{p(ph.person, 0.5):>7}{p(ph.person, 0.95):>7}"
                f"{p(ph.person, 1.0):>7}{after:>10}{peak:>9}"
            )
        for label, ph in phases.items():
            person_got = " ".join(f"{k}:{v}" for k, v in sorted(ph.statuses.items()))
            attackers = " ".join(f"{k}:{v}" for k, v in sorted(ph.attackers.items()))
            print(f"  {label}: person got {person_got}; attackers got {attackers or '-'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="each attack")
    parser.add_argument("--pages", type=int, default=3000, help="ordinary pages")
    parser.add_argument("--old", type=Path, help="another source tree's capsule, beside")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build is not None:
        build(args.build, args.pages)
        return
    limit_descriptors()
    runs: dict[str, dict[str, Phase]] = {}
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.old is not None:
        trees.insert(0, (f"old ({args.old})", args.old))
    for name, src in trees:
        print(f"{name}: building and attacking", file=sys.stderr)
        runs[name] = measure(src, args.pages, args.seconds)
    report(runs, args.seconds, args.pages)


if __name__ == "__main__":
    main()
