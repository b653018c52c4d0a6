"""Trust on first use: certificate pins per host *and port*, in a known-hosts store.

Gemini certificates are usually self-signed, so the client checks no CA. Instead the
first certificate seen for ``(host, port)`` is pinned (its SHA-256 fingerprint), and
later connections compare against the pin:

- same fingerprint: ``trusted``;
- no pin yet: pinned, ``new``;
- a different fingerprint: by default the new certificate is pinned in place of the old
  one and a warning is logged (logger ``geminibot.gemini``), and the response says
  ``changed``; in strict mode the connection is refused with
  :class:`~geminibot.gemini.errors.CertificateChanged` and the old pin is kept.

Stores: :class:`MemoryKnownHosts` (tests, one-off runs) and :class:`FileKnownHosts`
(one ``host port fingerprint`` line per pin).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from enum import Enum
from pathlib import Path
from typing import Protocol

from geminibot.gemini.errors import CertificateChanged

log = logging.getLogger("geminibot.gemini")


class Trust(Enum):
    NEW = "new"
    TRUSTED = "trusted"
    CHANGED = "changed"


def fingerprint(der: bytes) -> str:
    """SHA-256 of a DER certificate as colon-separated upper-case hex (as openssl prints it)."""
    return hashlib.sha256(der).digest().hex(":").upper()


class KnownHosts(Protocol):
    def get(self, host: str, port: int) -> str | None: ...

    def put(self, host: str, port: int, fingerprint: str) -> None: ...


class MemoryKnownHosts:
    """Pins kept in memory only."""

    def __init__(self) -> None:
        self.pins: dict[tuple[str, int], str] = {}

    def get(self, host: str, port: int) -> str | None:
        return self.pins.get((host, port))

    def put(self, host: str, port: int, fingerprint: str) -> None:
        self.pins[(host, port)] = fingerprint


class FileKnownHosts(MemoryKnownHosts):
    """Pins in a text file, one ``host port fingerprint`` per line; ``#`` starts a comment.

    The file is read once when the store is made (a missing file is an empty store,
    malformed lines are skipped, an unreadable file raises OSError) and rewritten
    atomically on every change.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) == 3 and fields[1].isascii() and fields[1].isdigit():
                self.pins[(fields[0], int(fields[1]))] = fields[2]

    def put(self, host: str, port: int, fingerprint: str) -> None:
        """Pin, then rewrite the file; if it cannot be written, log a warning and keep
        the pin in memory (fetching goes on)."""
        super().put(host, port, fingerprint)
        lines = [f"{h} {p} {fp}\n" for (h, p), fp in sorted(self.pins.items())]
        tmp: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".known_hosts.")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write("# geminibot known hosts: host port sha256-fingerprint\n")
                fh.writelines(lines)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("cannot write known hosts file %s: %s", self.path, exc)
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)


def check_pin(
    store: KnownHosts, host: str, port: int, seen: str, *, strict: bool = False
) -> tuple[Trust, str | None]:
    """Apply the policy above; returns (trust, previously pinned fingerprint or None)."""
    pinned = store.get(host, port)
    if pinned is None:
        store.put(host, port, seen)
        return Trust.NEW, None
    if pinned == seen:
        return Trust.TRUSTED, pinned
    if strict:
        raise CertificateChanged(
            f"certificate of {host}:{port} changed (pinned {pinned}, offered {seen});"
            " refused in strict mode",
            host=host,
            port=port,
            pinned=pinned,
            seen=seen,
        )
    log.warning(
        "certificate of %s:%d changed from %s to %s; pinned the new one", host, port, pinned, seen
    )
    store.put(host, port, seen)
    return Trust.CHANGED, pinned
