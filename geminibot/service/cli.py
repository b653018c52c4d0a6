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
import re
import sys
import time
from pathlib import Path
from typing import Any

from geminibot.cliutil import EXIT_OK, EXIT_USAGE, CommandError
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
from geminibot.store.database import open_database
from geminibot.store.errors import DatabaseError

#: How a command's usage error begins ("geminibot: ", "geminibot crawl: "): the
#: service's line names the component instead.
_OWN_PROG = re.compile(r"^geminibot(?: [a-z-]+)?: ")


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
    """A command of this geminibot in a child process: this interpreter, in safe-path
    mode (``-P``: neither the working directory nor the script's folder comes first on
    ``sys.path``), so that a folder named ``geminibot`` where the service was started
    cannot take the place of the installed package."""
    return (sys.executable, "-P", "-m", "geminibot", *argv)


def _reach(settings: Settings) -> list[str]:
    """The options of the crawl and the portal that say which addresses they may reach."""
    argv = []
    for rule in strings(settings, "crawl", "connect_to"):
        argv += ["--connect-to", rule]
    if settings["crawl"]["test_range"]:
        argv.append("--test-range")
    return argv


def _crawl(settings: Settings, db: str, nice: int) -> Component:
    argv = ["crawl", *strings(settings, "crawl", "seeds"), "--db", db, "--forever", "--json"]
    argv += ["--as", text(settings, "crawl", "role")]
    argv += ["--concurrency", text(settings, "crawl", "concurrency")]
    argv += ["--min-delay", text(settings, "crawl", "min_delay")]
    for pattern in strings(settings, "crawl", "allow_hosts"):
        argv += ["--allow-host", pattern]
    for network in strings(settings, "crawl", "allow_addresses"):
        argv += ["--allow-address", network]
    argv += _reach(settings)
    argv += strings(settings, "crawl", "args")
    return Component("crawl", _python(*argv), nice)


def _listening(settings: Settings, section: str) -> list[str]:
    return ["--host", text(settings, section, "host"), "--port", text(settings, section, "port")]


def components(settings: Settings, *, shared: bool = False) -> list[Component]:
    """The child processes ``settings`` (checked whole: :func:`~.config.load`) ask for,
    on a database that ``shared`` says is PostgreSQL's (which searches its own index: no
    tantivy index to keep)."""
    db = text(settings, "service", "db")
    background = int(number(settings, "service", "background_nice"))
    out = []
    if enabled(settings, "crawl"):
        out.append(_crawl(settings, db, background))
    if enabled(settings, "index") and not shared:
        argv = ["index", "update", "--db", db, "--follow"]
        # Stopped once the crawl has ended, so that it applies the crawl's last pages.
        out.append(Component("index", _python(*argv), background, stop_after=("crawl",)))
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
        argv = ["portal", *_listening(settings, "portal"), "--db", db, *_reach(settings)]
        out.append(Component("portal", _python(*argv, *strings(settings, "portal", "args"))))
    return out


def _prepare(db: str) -> bool:
    """Create or upgrade the database before any component opens it; whether several
    processes may share it (PostgreSQL)."""
    try:
        with open_database(db, write=True, make_folder=True) as database:
            return database.shared
    except DatabaseError as exc:
        raise DatabaseError(f"serve: {exc}") from None


def store_reader(db: str) -> Any:
    """What the metrics read from the store, on a connection of their own each time
    (imported here: a service without metrics does not import the index at each start)."""
    from geminibot.index.freshness import freshness
    from geminibot.index.tantivy_index import index_lag
    from geminibot.store import statements as q
    from geminibot.store.authority import last_computed

    def read() -> dict[str, Any]:
        with open_database(db) as database:
            now = time.time()
            data = freshness(database, now, index_lag(database))
            computed = last_computed(database)
            data["authority_age_seconds"] = None if computed is None else now - computed
            data["pages"] = int(database.run(q.COUNT_PAGES).fetchone()[0])
            data["queued"] = int(database.run(q.COUNT_QUEUED).fetchone()[0])
            return data

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
    children = components(settings, shared=_prepare(db))
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
    if supervisor.failed is not None:
        name, line = supervisor.failed
        log.write("service", message=f"stopped: {name} cannot start", exit=EXIT_USAGE)
        raise CommandError(f"serve: {name}: {_OWN_PROG.sub('', line)}")
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
