"""A throwaway PostgreSQL cluster for tests: a real server, never a mock.

``running_postgres()`` runs ``initdb`` in a temporary folder (in memory, on ``/dev/shm``,
when there is room), starts ``postgres`` on a free loopback port with its socket in that
folder, yields a libpq connection string, and stops the cluster afterwards (its folder is
deleted in the background). The server binaries come from Debian's ``postgresql``
package (``make setup`` installs it when missing). PostgreSQL refuses to run as root, so
as root the cluster belongs to the ``postgres`` system user that package creates.

A test run starts one cluster for all its processes: ``shared_postgres(folder)`` (the
``pg_cluster`` fixture of ``tests/conftest.py``; the first pytest-xdist worker to need it
starts it) and ``stop_shared_postgres(folder)`` (the run's controller, at its end). Each
test makes its own databases in it: ``new_database``.

``tests/conftest.py`` puts this folder on ``sys.path``: ``from postgres_cluster import
running_postgres``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import glob
import itertools
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: Seconds ``pg_ctl`` may take to start or stop the server.
START_SECONDS = 60
#: initdb's options: trusted local logins, UTF-8, and (a throwaway cluster) nothing
#: flushed to disk, as the server then runs with fsync=off.
INITDB_OPTIONS = ("-A", "trust", "-E", "UTF8", "--no-sync")
#: The server's settings: nothing flushed (a throwaway cluster), and room for the
#: connections of a test run's workers, which share one cluster (100 each, as when each
#: had its own).
SERVER_OPTIONS = "-c fsync=off -c max_connections=400"

#: pg_ctl stop at once: nothing of a throwaway cluster needs keeping.
STOP = ("-m", "immediate", "-w", "stop")

#: Where a cluster's files go when there is room (:func:`_in_memory`): a test run's
#: databases and WAL are about a gigabyte.
MEMORY_DIR, MEMORY_NEEDED = "/dev/shm", 4 << 30

_numbers = itertools.count()


def server_bin_dir() -> Path | None:
    """The folder of the newest installed PostgreSQL server binaries, if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version_key)
    return Path(found[-1]).parent if found else None


def _version_key(path: str) -> int:
    version = Path(path).parent.parent.name
    return int(version) if version.isdigit() else 0


def _in_memory() -> str | None:
    """``/dev/shm`` when it has room for a test run's databases (a tmpfs: the cluster's
    files in memory), else None (the temporary folder). On this machine's ext4 each
    ``CREATE DATABASE`` of a test took 0.23-0.37 s of the server's CPU, on tmpfs 0.014-0.03
    s; initdb and start 1.36-1.80 s against 0.70-0.86 s."""
    try:
        free = shutil.disk_usage(MEMORY_DIR).free
    except OSError:
        return None
    return MEMORY_DIR if free >= MEMORY_NEEDED and os.access(MEMORY_DIR, os.W_OK) else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _as_owner(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A started cluster: its libpq connection string, its folder (the data in ``data``,
    the socket, the log) and the binaries that stop it."""

    url: str
    root: Path
    bindir: Path


def start_postgres() -> Cluster:
    """Start a fresh cluster (:func:`stop_postgres` stops it and deletes its folder)."""
    bindir = server_bin_dir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found: run `make setup`")
    root = Path(tempfile.mkdtemp(prefix="geminibot-pg-", dir=_in_memory()))
    data = root / "data"
    user = pwd.getpwuid(os.geteuid()).pw_name if os.geteuid() != 0 else "postgres"
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(root, entry.pw_uid, entry.pw_gid)
    port = _free_port()
    cluster = Cluster(f"postgresql://{user}@127.0.0.1:{port}/postgres", root, bindir)
    try:
        subprocess.run(
            _as_owner([str(bindir / "initdb"), "-D", str(data), "-U", user, *INITDB_OPTIONS]),
            check=True,
            capture_output=True,
            timeout=START_SECONDS,
        )
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} {SERVER_OPTIONS}"
        subprocess.run(
            _as_owner(
                [
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-o",
                    options,
                    "-l",
                    str(root / "server.log"),
                    "-w",
                    "-t",
                    str(START_SECONDS),
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=START_SECONDS + 10,
        )
    except BaseException:
        stop_postgres(cluster)
        raise
    return cluster


def stop_postgres(cluster: Cluster) -> None:
    """Stop the server (at once: nothing of a throwaway cluster needs keeping) if it runs,
    and delete its folder."""
    try:
        if (cluster.root / "data" / "postmaster.pid").exists():
            subprocess.run(
                _as_owner(
                    [str(cluster.bindir / "pg_ctl"), "-D", str(cluster.root / "data"), *STOP]
                ),
                check=False,
                capture_output=True,
                timeout=START_SECONDS + 10,
            )
    finally:
        _remove_in_background(cluster.root)


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    """Start a fresh cluster; yield ``postgresql://USER@127.0.0.1:PORT/postgres``."""
    cluster = start_postgres()
    try:
        yield cluster.url
    finally:
        stop_postgres(cluster)


#: The file, in a folder the processes of one test run share, that names their cluster.
SHARED_CLUSTER = "cluster.json"


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with (folder / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def shared_postgres(folder: Path) -> str:
    """The connection string of the one cluster of the processes given ``folder`` (a test
    run's pytest-xdist workers): the first to ask starts it, the others find it named in
    ``folder``; :func:`stop_shared_postgres` stops it once they are done."""
    with _locked(folder):
        named = folder / SHARED_CLUSTER
        if named.exists():
            return str(json.loads(named.read_text())["url"])
        cluster = start_postgres()
        state = {"url": cluster.url, "root": str(cluster.root), "bindir": str(cluster.bindir)}
        named.write_text(json.dumps(state))
        return cluster.url


def stop_shared_postgres(folder: Path) -> bool:
    """Stop the cluster :func:`shared_postgres` started in ``folder``, if any (whether it
    was started is returned)."""
    with _locked(folder):
        named = folder / SHARED_CLUSTER
        if not named.exists():
            return False
        state = json.loads(named.read_text())
        named.unlink()
    stop_postgres(Cluster(state["url"], Path(state["root"]), Path(state["bindir"])))
    return True


def new_database(cluster: str, template: str | None = None) -> str:
    """A new database in ``cluster`` (a copy of ``template`` if named): its connection
    string. Its name is new in the whole test run: the process's pytest-xdist worker
    (``gw0``; ``main`` without workers) and a number of this process's."""
    import psycopg  # here: the run's controller, which imports this module, never needs it

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"{worker}_t{next(_numbers)}"
    copy = "" if template is None else f" TEMPLATE {template}"
    with psycopg.connect(cluster, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}{copy}".encode())
    return cluster.rsplit("/", 1)[0] + "/" + name


def _remove_in_background(root: Path) -> None:
    """Delete the cluster's folder without waiting: a session's databases (one per store
    test) and their WAL are about a gigabyte of files, whose deletion took 15-35 s of a
    test run's end on a loaded machine. ``rm`` goes on after this process ends."""
    try:
        subprocess.Popen(
            ["rm", "-rf", "--", str(root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        shutil.rmtree(root, ignore_errors=True)
