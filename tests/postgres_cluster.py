"""A throwaway PostgreSQL cluster for tests: a real server, never a mock.

``running_postgres()`` runs ``initdb`` in a temporary folder, starts ``postgres`` on a free
loopback port with its socket in that folder, yields a libpq connection string, and stops
the cluster afterwards (its folder is deleted in the background). The server binaries come from Debian's ``postgresql``
package (``make setup`` installs it when missing). PostgreSQL refuses to run as root, so
as root the cluster belongs to the ``postgres`` system user that package creates.

``tests/conftest.py`` puts this folder on ``sys.path``: ``from postgres_cluster import
running_postgres``.
"""

from __future__ import annotations

import contextlib
import glob
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


def server_bin_dir() -> Path | None:
    """The folder of the newest installed PostgreSQL server binaries, if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version_key)
    return Path(found[-1]).parent if found else None


def _version_key(path: str) -> int:
    version = Path(path).parent.parent.name
    return int(version) if version.isdigit() else 0


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


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    """Start a fresh cluster; yield ``postgresql://USER@127.0.0.1:PORT/postgres``."""
    bindir = server_bin_dir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found: run `make setup`")
    root = Path(tempfile.mkdtemp(prefix="geminibot-pg-"))
    data = root / "data"
    user = pwd.getpwuid(os.geteuid()).pw_name if os.geteuid() != 0 else "postgres"
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(root, entry.pw_uid, entry.pw_gid)
    port = _free_port()
    try:
        subprocess.run(
            _as_owner([str(bindir / "initdb"), "-D", str(data), "-U", user, *INITDB_OPTIONS]),
            check=True,
            capture_output=True,
            timeout=START_SECONDS,
        )
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
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
        try:
            yield f"postgresql://{user}@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                _as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                check=False,
                capture_output=True,
                timeout=START_SECONDS + 10,
            )
    finally:
        _remove_in_background(root)


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
