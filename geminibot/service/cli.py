"""``geminibot serve``: the whole search engine as one supervised service.

The crawl that keeps going (``crawl --forever``), the index kept current (``index update
--follow``, SQLite only), link authority computed again on a schedule (``index authority
--every``), the search capsule (``serve-search``) and, when enabled, the web
portal (``portal``), each a child process of this one (:mod:`.supervisor`), and the
metrics (:mod:`.metrics`). Settings: :mod:`.config` (a TOML file, every setting also a
flag). Logs: one JSON object a line on standard output, per component.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from geminibot.cliutil import EXIT_OK, CommandError
from geminibot.index.authority import last_computed
from geminibot.index.freshness import freshness
from geminibot.index.tantivy_index import index_lag
from geminibot.service.config import (
    ConfigError,
    Settings,
    add_options,
    default_config,
    enabled,
    load,
    number,
    strings,
    text,
)
from geminibot.service.supervisor import Component, JsonLog, Supervisor
from geminibot.store import pg as pg_store
from geminibot.store.db import connect
from geminibot.store.errors import DatabaseError


def register(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="run crawl, index updates, search capsule and portal as one service",
        description=(
            "Run the crawl that keeps going, the search index kept current, the search "
            "capsule and (if enabled) the web portal as one supervised process tree, with "
            "metrics in the Prometheus format on loopback. A component that dies is "
            "restarted and logged; SIGTERM or Ctrl-C stops them all (exit 0). Settings come "
            "from --config FILE.toml ('--print-config' writes the commented defaults), and "
            "each also from its flag below, which wins. Logs: one JSON object a line on "
            "standard output. See docs/operating.md."
        ),
    )
    serve.add_argument("--config", metavar="FILE.toml", help="settings file (TOML)")
    serve.add_argument(
        "--print-config",
        action="store_true",
        help="write the settings file of the defaults, commented, and exit",
    )
    add_options(serve)
    serve.set_defaults(run=run_serve)


def _python(*argv: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "geminibot", *argv)


def _crawl(settings: Settings, db: str, nice: int) -> Component:
    seeds = strings(settings, "crawl", "seeds")
    if not seeds:
        raise CommandError("serve: crawl.seeds is empty (set it, or crawl.enabled = false)")
    argv = ["crawl", *seeds, "--db", db, "--forever", "--json"]
    argv += ["--as", text(settings, "crawl", "role")]
    argv += ["--concurrency", text(settings, "crawl", "concurrency")]
    argv += ["--min-delay", text(settings, "crawl", "min_delay")]
    for pattern in strings(settings, "crawl", "allow_hosts"):
        argv += ["--allow-host", pattern]
    for rule in strings(settings, "crawl", "connect_to"):
        argv += ["--connect-to", rule]
    if settings["crawl"]["test_range"]:
        argv.append("--test-range")
    argv += strings(settings, "crawl", "args")
    return Component("crawl", _python(*argv), nice)


def _background(settings: Settings) -> int:
    """The niceness of the components that work in the background."""
    nice = int(number(settings, "service", "background_nice"))
    if not 0 <= nice <= 19:
        raise CommandError(f"serve: service.background_nice must be 0 to 19, not {nice}")
    return nice


def _listening(settings: Settings, section: str) -> list[str]:
    return ["--host", text(settings, section, "host"), "--port", text(settings, section, "port")]


def components(settings: Settings) -> list[Component]:
    """The child processes ``settings`` ask for."""
    db = text(settings, "service", "db")
    background = _background(settings)
    out = []
    if enabled(settings, "crawl"):
        out.append(_crawl(settings, db, background))
    if enabled(settings, "index") and not pg_store.is_postgres(db):
        argv = ["index", "update", "--db", db, "--follow"]
        out.append(Component("index", _python(*argv), background))
    every = number(settings, "index", "authority_every")
    if enabled(settings, "index") and every > 0:
        argv = ["index", "authority", "--db", db, "--every", f"{every:g}", "--json"]
        out.append(Component("authority", _python(*argv), background))
    if enabled(settings, "search"):
        argv = ["serve-search", "--db", db, *_listening(settings, "search")]
        argv += ["--hostname", text(settings, "search", "hostname")]
        argv += ["--certs", text(settings, "search", "certs")]
        out.append(Component("search", _python(*argv, *strings(settings, "search", "args"))))
    if enabled(settings, "portal"):
        argv = ["portal", *_listening(settings, "portal"), "--db", db]
        out.append(Component("portal", _python(*argv, *strings(settings, "portal", "args"))))
    if not out:
        raise CommandError("serve: every component is disabled: nothing to run")
    return out


def _prepare(db: str) -> None:
    """Create or upgrade the database before any component opens it."""
    try:
        if pg_store.is_postgres(db):
            pg_store.connect(db).close()
        else:
            Path(db).parent.mkdir(parents=True, exist_ok=True)
            connect(db).close()
    except DatabaseError as exc:
        raise CommandError(f"serve: {exc}") from None
    except OSError as exc:
        raise CommandError(f"serve: {db}: {exc.strerror}") from None


def store_reader(db: str) -> Any:
    """What the metrics read from the store, on a connection of their own each time."""

    def read() -> dict[str, Any]:
        conn: Any = pg_store.connect(db) if pg_store.is_postgres(db) else connect(db, create=False)
        try:
            now = time.time()
            data = freshness(conn, now, index_lag(conn))
            computed = last_computed(conn)
            data["authority_age_seconds"] = None if computed is None else now - computed
            data["pages"] = int(conn.execute("SELECT count(*) FROM pages").fetchone()[0])
            data["queued"] = int(
                conn.execute("SELECT count(*) FROM urls WHERE state = 'queued'").fetchone()[0]
            )
            return data
        finally:
            conn.close()

    return read


def run_serve(args: argparse.Namespace) -> int:
    if args.print_config:
        sys.stdout.write(default_config())
        return EXIT_OK
    try:
        settings = load(args, Path(args.config) if args.config else None)
    except ConfigError as exc:
        raise CommandError(f"serve: {exc}") from None
    db = text(settings, "service", "db")
    children = components(settings)
    _prepare(db)
    log = JsonLog(sys.stdout)
    supervisor = Supervisor(
        children,
        log,
        restart_delay=number(settings, "service", "restart_delay"),
        restart_max=number(settings, "service", "restart_max"),
        stop_timeout=number(settings, "service", "stop_timeout"),
    )
    if enabled(settings, "metrics"):
        from geminibot.service.metrics import Metrics

        exporter = Metrics(supervisor.state, store_reader(db))
        log.on_event = exporter.on_event
        host, port = text(settings, "metrics", "host"), int(number(settings, "metrics", "port"))
        try:
            port = exporter.serve(host, port)
        except OSError as exc:
            raise CommandError(f"serve: metrics on {host}:{port}: {exc.strerror}") from None
        log.write("service", message="metrics", url=f"http://{host}:{port}/metrics")
    import trio

    trio.run(_supervise, supervisor)
    log.write("service", message="stopped")
    return EXIT_OK


async def _supervise(supervisor: Supervisor) -> None:
    import signal

    import trio

    async with trio.open_nursery() as nursery:

        async def on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    supervisor.log.write(
                        "service", message=f"{signal.Signals(signum).name}: stopping"
                    )
                    supervisor.stop()
                    return

        nursery.start_soon(on_signal)
        await supervisor.run()
        nursery.cancel_scope.cancel()
