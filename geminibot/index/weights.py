"""Link authority as search applies it: one weight per host, in a file of the derived
index that is replaced whole when authority is computed again.

The tantivy index holds each page's host as a key (:func:`host_key`, a fast field of
its document); its re-rank looks the keys of its window's pages up in
:class:`HostWeights`, which reads the file again whenever it has been replaced. So new
weights reach every search without a restart and without re-adding any document, and a
page the updater adds has its host's current weight (1.0, the weight of a score of 0,
for a host the last computation did not know).

The file is ``weights.json`` in the index's folder (``DB.search/``), written from the
store's ``authority`` table (:func:`write_weights`) by each computation
(``geminibot index authority``) and by each rebuild, under a lock of its own
(:func:`weights_lock`), so that a rebuild replacing the folder and a computation
replacing the file never lose the newer weights.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from geminibot.index.authority import weight_of
from geminibot.store.authority import last_computed

#: The weights file in the index's folder.
WEIGHTS_FILE = "weights.json"
#: The weight of a host's score of 0 (``log2(2 + 0)``): a host with no trust path.
UNTRUSTED_WEIGHT = weight_of(0.0)
#: Format of the weights file (another is ignored: search ranks by text until the next
#: computation writes this one).
FORMAT = 1


def host_key(host: str) -> int:
    """The 64-bit key of a host (``pages.host``'s spelling) in the index's ``host`` field."""
    return int.from_bytes(hashlib.blake2b(host.encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class Weights:
    """One computation's weights: when it ran, and each host's weight by its key."""

    computed_at: float | None
    by_key: dict[int, float]

    def of(self, key: int) -> float:
        """The weight of the host with ``key`` (1.0 when unknown)."""
        return self.by_key.get(key, 1.0)

    def trusted(self, key: int) -> bool:
        """Whether the host with ``key`` has a trust path: a weight above that of a
        score of 0 (which a host no trusted host's links lead to has, and a host the
        computation did not know is given)."""
        return self.by_key.get(key, UNTRUSTED_WEIGHT) > UNTRUSTED_WEIGHT


def store_weights(conn: sqlite3.Connection) -> dict[str, float]:
    """Each host's weight in the store's ``authority`` table (a host's pages share it)."""
    rows = conn.execute(
        "SELECT p.host, max(a.weight) FROM authority a JOIN pages p ON p.url = a.url"
        " GROUP BY p.host"
    )
    return {str(host): float(weight) for host, weight in rows}


@contextmanager
def weights_lock(index_folder: Path) -> Iterator[None]:
    """Hold the right to replace the weights file of ``index_folder`` (or the folder)."""
    lock = index_folder.with_name(index_folder.name + ".weights.lock")
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def write_weights(conn: sqlite3.Connection, folder: Path) -> int:
    """Replace ``folder``'s weights file atomically by the store's weights (the caller
    holds :func:`weights_lock`); returns how many hosts it holds."""
    hosts = store_weights(conn)
    data = {"format": FORMAT, "computed_at": last_computed(conn), "hosts": hosts}
    part = folder / f"{WEIGHTS_FILE}.{os.getpid()}"
    with part.open("w") as out:
        out.write(json.dumps(data))
        out.flush()
        os.fsync(out.fileno())
    part.replace(folder / WEIGHTS_FILE)
    return len(hosts)


def read_weights(path: Path) -> Weights | None:
    """The weights file at ``path`` (None: missing, damaged or of another format)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    hosts, at = data.get("hosts"), data.get("computed_at")
    if not isinstance(hosts, dict) or not isinstance(at, float | int | None):
        return None
    try:
        by_key = {host_key(str(h)): float(w) for h, w in hosts.items()}
    except (TypeError, ValueError):
        return None
    return Weights(None if at is None else float(at), by_key)


class HostWeights:
    """The newest weights of an index: :meth:`current` reads the file again when it has
    been replaced since the last call (one ``stat`` per call otherwise)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._weights: Weights | None = None

    def current(self) -> Weights | None:
        """The weights now in the file (None: no usable file: text ranking alone)."""
        try:
            st = self.path.stat()
        except OSError:
            self._stamp, self._weights = None, None
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._weights = read_weights(self.path)
            self._stamp = stamp
        return self._weights
