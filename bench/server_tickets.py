"""capsule-server's CPU per connection with and without TLS 1.3 session tickets.

capsule-server runs as a subprocess on 127.0.0.1 (as in ``bench/server_speed.py``, whose
server command, certificate and load client this reuses), once per value of
``geminibot.gemini.server.SESSION_TICKETS`` in TICKETS. The crawler's Gemini client
(``GeminiClient``) in this process makes connections one after another (one request
each, as Gemini does), for SECONDS_PER_CELL seconds, in two ways:

- ``full``: a new client for every connection, so every handshake is a full one (a client
  that keeps no session; with tickets the server still makes and sends them);
- ``resume``: one client, which keeps the session of its full handshake and offers it, as
  the crawler does; with tickets, every connection after the first resumes.

Reported per cell: connections, how many resumed, the server's CPU milliseconds per
connection (from /proc) and the client's (this process). Cells alternate between the servers, ROUNDS
times; the median counts (the machine is shared).

Then OpenSSL's server side of one handshake alone, over memory BIOs in this process (no
sockets, no Python server around it; CPU time of the server's ``do_handshake`` calls),
BIO_HANDSHAKES times per cell: full and resumed, with 0, 1 and 2 tickets, for the ECDSA
P-256 certificate capsule-server makes and for an RSA 2048 one (what many Gemini servers
present), whose signature costs far more.

Run: .venv/bin/python bench/server_tickets.py   (about a minute; loopback only)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio
from machine import cpu_model
from server_speed import (
    HOST,
    PAGE,
    ROOT,
    STARTUP_TIMEOUT,
    _server_commands,
    cpu_seconds,
    ensure_certificate,
    free_port,
    wait_listening,
)

from geminibot.gemini.server import SESSION_TICKETS

TICKETS = (0, SESSION_TICKETS)
MODES = ("full", "resume")
SECONDS_PER_CELL = 3.0
ROUNDS = 5
BIO_TICKETS = (0, 1, 2)
BIO_HANDSHAKES = 400


async def _connections(port: int, seconds: float, resume: bool) -> tuple[int, int, int]:
    """(answers, resumed handshakes, errors) of the crawler's Gemini client for
    ``seconds``: one client that keeps its session (``resume``), or a new client, with no
    session, for every connection."""
    from geminibot.gemini.client import GeminiClient
    from geminibot.net.errors import FetchError

    route = {HOST: ("127.0.0.1", port)}
    client = GeminiClient(connect_to=route)
    ok = resumed = errors = 0
    stop_at = trio.current_time() + seconds
    while trio.current_time() < stop_at:
        if not resume:
            client = GeminiClient(connect_to=route)
        try:
            response = await client.fetch(f"gemini://{HOST}{PAGE}")
        except FetchError:
            errors += 1
            continue
        if response.status != 20 or len(response.body) < 100:
            errors += 1
            continue
        ok += 1
        resumed += response.resumed
    return ok, resumed, errors


def _command(argv: list[str], tickets: int) -> list[str]:
    """capsule-server's command line, run with SESSION_TICKETS set to ``tickets``."""
    assert argv[1:3] == ["-m", "capsule_server.cli"]
    code = (
        "import runpy, geminibot.gemini.server as s; "
        f"s.SESSION_TICKETS = {tickets}; "
        "runpy.run_module('capsule_server.cli', run_name='__main__', alter_sys=True)"
    )
    return [argv[0], "-c", code, *argv[3:]]


def _rsa_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed RSA 2048 certificate for HOST (by the openssl command): (certificate
    file, key file)."""
    cert_path, key_path = folder / "rsa.crt", folder / "rsa.key"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30"]
    subject = ["-subj", f"/CN={HOST}", "-addext", f"subjectAltName=DNS:{HOST}"]
    files = ["-keyout", str(key_path), "-out", str(cert_path)]
    subprocess.run([*request, *subject, *files], check=True, capture_output=True)
    return cert_path, key_path


def _bio_handshakes(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, n: int, resume: bool
) -> tuple[float, float, int, float]:
    """(server CPU ms per handshake, client CPU ms per handshake, handshakes resumed,
    ticket lifetime in seconds) of ``n`` handshakes in memory."""
    session: ssl.SSLSession | None = None
    server_cpu = client_cpu = 0.0
    resumed = 0
    lifetime = 0.0
    for _ in range(n):
        c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
        client = client_ctx.wrap_bio(c_in, c_out, server_hostname=HOST, session=session)
        server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
        client_done = server_done = False
        while not (client_done and server_done):
            if not client_done:
                started = time.thread_time()
                try:
                    client.do_handshake()
                    client_done = True
                except ssl.SSLWantReadError:
                    pass
                client_cpu += time.thread_time() - started
            s_in.write(c_out.read())
            if not server_done:
                started = time.thread_time()
                try:
                    server.do_handshake()  # with TLS 1.3, its tickets go out here too
                    server_done = True
                except ssl.SSLWantReadError:
                    pass
                server_cpu += time.thread_time() - started
            c_in.write(s_out.read())
        started = time.thread_time()
        with contextlib.suppress(ssl.SSLWantReadError):
            client.read(1)  # takes the tickets in
        client_cpu += time.thread_time() - started
        if client.session_reused:
            resumed += 1
        elif resume:
            kept = client.session
            session = kept if kept is not None and kept.has_ticket else None
            lifetime = kept.timeout if session is not None else 0.0
    return 1000 * server_cpu / n, 1000 * client_cpu / n, resumed, lifetime


#: One handshake cell: (certificate, tickets, mode, server CPU ms per handshake, client
#: CPU ms per handshake, handshakes resumed, ticket lifetime s).
BioCell = tuple[str, int, str, float, float, int, float]


def _bio_cells(folder: Path) -> list[BioCell]:
    """One :data:`BioCell` per certificate, number of tickets and mode."""
    from geminibot.gemini.client import make_ssl_context

    ec = ensure_certificate(folder / "ec", HOST)
    certificates = {
        "ECDSA P-256": (ec.cert_path, ec.key_path),
        "RSA 2048": _rsa_certificate(folder),
    }
    client_ctx = make_ssl_context()
    cells = []
    for label, (cert_path, key_path) in certificates.items():
        for tickets in BIO_TICKETS:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(cert_path, key_path)
            ctx.num_tickets = tickets
            for mode in MODES:
                _bio_handshakes(ctx, client_ctx, 20, mode == "resume")  # warm up
                runs = [
                    _bio_handshakes(ctx, client_ctx, BIO_HANDSHAKES, mode == "resume")
                    for _ in range(ROUNDS)
                ]
                server = statistics.median(r[0] for r in runs)
                client = statistics.median(r[1] for r in runs)
                cells.append((label, tickets, mode, server, client, runs[-1][2], runs[-1][3]))
    return cells


#: One cell: (answers, resumed, errors, server CPU ms/connection, client CPU ms/connection).
Cell = tuple[int, int, int, float, float]


def main() -> int:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()  # no options: --help shows what it measures
    tmp = Path(tempfile.mkdtemp(prefix="server-tickets-"))
    argv = _server_commands(tmp, "jetforce")["capsule-server"]
    servers: dict[int, tuple[subprocess.Popen[bytes], int]] = {}
    cells: dict[tuple[int, str], list[Cell]] = {}
    load = os.getloadavg()
    try:
        for tickets in TICKETS:
            port = free_port()
            proc = subprocess.Popen(
                [*_command(argv, tickets), "--port", str(port)],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            servers[tickets] = (proc, port)
            wait_listening(port, proc, f"capsule-server (tickets {tickets})", STARTUP_TIMEOUT)
            trio.run(_connections, port, 0.5, True)  # warm up
        for _ in range(ROUNDS):
            for mode in MODES:
                for tickets, (proc, port) in servers.items():
                    server0, client0 = cpu_seconds(proc.pid), time.process_time()
                    ok, resumed, errors = trio.run(
                        _connections, port, SECONDS_PER_CELL, mode == "resume"
                    )
                    server = cpu_seconds(proc.pid) - server0
                    client = time.process_time() - client0
                    n = max(ok, 1)
                    cell = (ok, resumed, errors, 1000 * server / n, 1000 * client / n)
                    cells.setdefault((tickets, mode), []).append(cell)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
    bio = _bio_cells(tmp)
    _print(cells, load, os.getloadavg())
    print(
        f"\nOpenSSL server side of one handshake over memory BIOs, median of {ROUNDS} x "
        f"{BIO_HANDSHAKES} (CPU ms)\n"
    )
    print(
        f"{'certificate':<13}{'tickets':>8} {'client':>7}{'resumed':>9}{'server ms':>11}"
        f"{'client ms':>11}{'ticket lifetime s':>19}"
    )
    for label, tickets, mode, server, client, resumed, lifetime in bio:
        print(
            f"{label:<13}{tickets:>8} {mode:>7}{resumed:>9}{server:>11.3f}{client:>11.3f}"
            f"{lifetime:>19.0f}"
        )
    return 0


def _print(
    cells: dict[tuple[int, str], list[Cell]],
    before: tuple[float, float, float],
    after: tuple[float, float, float],
) -> None:
    print(
        f"machine: nproc={os.cpu_count()} cpu={cpu_model()} python={platform.python_version()} "
        f"openssl={ssl.OPENSSL_VERSION}"
    )
    print(
        "load average (1, 5, 15 min) before: "
        + ", ".join(f"{x:.2f}" for x in before)
        + "; after: "
        + ", ".join(f"{x:.2f}" for x in after)
    )
    print(
        f"page: gemini://{HOST}{PAGE}, one client, connections one after another, "
        f"{ROUNDS} rounds of {SECONDS_PER_CELL:g} s per cell, median round\n"
    )
    print(
        f"{'tickets':>7} {'client':>7}{'connections':>13}{'resumed':>9}{'errors':>8}"
        f"{'server ms/conn':>16}{'client ms/conn':>16}"
    )
    for mode in MODES:
        for tickets in TICKETS:
            rounds = cells[(tickets, mode)]
            server_ms = statistics.median(c[3] for c in rounds)
            client_ms = statistics.median(c[4] for c in rounds)
            ok = sum(c[0] for c in rounds)
            resumed = sum(c[1] for c in rounds)
            errors = sum(c[2] for c in rounds)
            print(
                f"{tickets:>7} {mode:>7}{ok:>13}{resumed:>9}{errors:>8}"
                f"{server_ms:>16.3f}{client_ms:>16.3f}"
            )


if __name__ == "__main__":
    sys.exit(main())
