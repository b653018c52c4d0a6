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
(one ``host port fingerprint`` line per pin). Both keep at most :data:`MAX_PINS` pins, the
most recently used: a client sent to host names chosen by others (the portal's visitors,
links of pages) would otherwise keep one for every name.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import tempfile
from collections import OrderedDict
from enum import Enum
from pathlib import Path
from typing import Protocol

from geminibot.gemini.errors import CertificateChanged

log = logging.getLogger("geminibot.gemini")

#: Most pins a known-hosts store keeps. Past it, the least recently used pin is forgotten:
#: its host is pinned anew at its next connection (``new``, not ``changed``).
MAX_PINS = 10_000


class Trust(Enum):
    """What trust on first use made of a certificate: new, the pinned one, or another."""

    NEW = "new"
    TRUSTED = "trusted"
    CHANGED = "changed"


def fingerprint(der: bytes) -> str:
    """SHA-256 of a DER certificate as colon-separated upper-case hex (as openssl prints it)."""
    return hashlib.sha256(der).digest().hex(":").upper()


class KnownHosts(Protocol):
    """Where the pinned certificate fingerprints of (host, port) are kept."""

    def get(self, host: str, port: int) -> str | None: ...

    def put(self, host: str, port: int, fingerprint: str) -> None: ...


class MemoryKnownHosts:
    """Pins kept in memory only, at most ``max_pins`` (least recently used forgotten)."""

    def __init__(self, max_pins: int = MAX_PINS) -> None:
        if max_pins < 1:
            raise ValueError(f"max_pins must be at least 1, not {max_pins}")
        self.max_pins = max_pins
        #: (host, port) -> fingerprint, the least recently used first
        self.pins: OrderedDict[tuple[str, int], str] = OrderedDict()

    def get(self, host: str, port: int) -> str | None:
        pinned = self.pins.get((host, port))
        if pinned is not None:
            self.pins.move_to_end((host, port))
        return pinned

    def put(self, host: str, port: int, fingerprint: str) -> None:
        self.pins[(host, port)] = fingerprint
        self.pins.move_to_end((host, port))
        while len(self.pins) > self.max_pins:
            self.pins.popitem(last=False)


class NotKnownHostsFile(ValueError):
    """An existing file that is not a known-hosts file: it is never overwritten."""


_FINGERPRINT = re.compile(r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2})*")
HEADER = "# geminibot known hosts: host port sha256-fingerprint"


def _pin(fields: list[str]) -> tuple[str, int, str] | None:
    if len(fields) != 3:
        return None
    host, port, fp = fields
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        return None
    return (host, int(port), fp) if _FINGERPRINT.fullmatch(fp) else None


def _check_writable(path: Path, what: str) -> None:
    """Refuse up front a pin file that could never be written (read-only folder or file)."""
    if not os.access(path, os.W_OK):
        raise PermissionError(errno.EACCES, f"{what} {str(path)!r} is not writable")


class FileKnownHosts(MemoryKnownHosts):
    """Pins in a text file, one ``host port fingerprint`` per line; ``#`` starts a comment.

    The file is read once when the store is made and rewritten atomically (with
    :data:`HEADER` first) on every change; comments are not kept. A missing file is an
    empty store, but its folder must exist: no folder is ever created. An existing file
    must be a known-hosts file, or :class:`NotKnownHostsFile` is raised and the file is
    left alone: UTF-8 text in which every line is blank, a comment or a pin, and at least
    one pin or the header (an empty file counts too). An unreadable file raises OSError.
    Of a file with more than ``max_pins`` pins, the last ``max_pins`` are kept (a warning
    is logged), and the file is rewritten with them at the next change.
    """

    def __init__(self, path: str | os.PathLike[str], max_pins: int = MAX_PINS) -> None:
        super().__init__(max_pins)
        self.path = Path(path)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            folder = self.path.parent
            if not folder.is_dir():
                raise FileNotFoundError(
                    errno.ENOENT, f"no such folder {str(folder)!r} (it is not created)"
                ) from None
            _check_writable(folder, "the folder")
            return
        pins = _read_pins(data)
        if len(pins) > max_pins:
            log.warning(
                "known hosts file %s has %d pins: the last %d kept", self.path, len(pins), max_pins
            )
        self.pins.update(list(pins.items())[-max_pins:])
        _check_writable(self.path, "the file")

    def put(self, host: str, port: int, fingerprint: str) -> None:
        """Pin, then rewrite the file; if it cannot be written, log a warning and keep
        the pin in memory (fetching goes on)."""
        super().put(host, port, fingerprint)
        lines = [f"{h} {p} {fp}\n" for (h, p), fp in sorted(self.pins.items())]
        tmp: str | None = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".known_hosts.")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(HEADER + "\n")
                fh.writelines(lines)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("cannot write known hosts file %s: %s", self.path, exc)
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)


def _read_pins(data: bytes) -> dict[tuple[str, int], str]:
    """The pins of a known-hosts file; NotKnownHostsFile if it is not one."""
    if not data.strip():
        return {}
    if b"\0" in data:
        raise NotKnownHostsFile("not a known-hosts file (binary data)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotKnownHostsFile("not a known-hosts file (not UTF-8 text)") from None
    pins: dict[tuple[str, int], str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        pin = _pin(fields)
        if pin is None:
            raise NotKnownHostsFile(
                f"not a known-hosts file (line {number} is not 'host port fingerprint')"
            )
        pins[(pin[0], pin[1])] = pin[2]
    if not pins and not text.startswith(HEADER):
        raise NotKnownHostsFile("not a known-hosts file (no pins, and not written by geminibot)")
    return pins


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
