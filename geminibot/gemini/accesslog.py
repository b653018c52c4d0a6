"""The access log: one JSON object per connection, one per line (JSON Lines), written
when the connection ends (so concurrent connections may appear out of ``time`` order).

Fields: ``time`` (ISO 8601 UTC, when the connection was accepted), ``client`` (address),
``host`` (from the request URL; null before a request was read), ``path`` (path and
query as the URL parser normalised them, still percent-encoded), ``status`` (the status sent; null if no complete header went out), ``bytes`` (body
bytes sent), ``duration`` (seconds from accept to close). Optional: ``meta`` (the meta of a
non-20 answer), ``limited`` (``rate`` or ``busy`` for a 44 the server chose), ``error`` (why
a connection ended without an answer), ``request`` (the start of a malformed request line).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO


@dataclass(slots=True)
class AccessRecord:
    """One line of the access log: one connection, its request and how it was answered."""

    client: str
    host: str | None = None
    path: str | None = None
    status: int | None = None
    bytes: int = 0
    duration: float = 0.0
    meta: str | None = None
    limited: str | None = None
    error: str | None = None
    request: str | None = None
    time: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "time": self.time or now_iso(),
            "client": self.client,
            "host": self.host,
            "path": self.path,
            "status": self.status,
            "bytes": self.bytes,
            "duration": round(self.duration, 6),
        }
        for key in ("meta", "limited", "error", "request"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> AccessRecord:
        def opt_str(key: str) -> str | None:
            value = obj.get(key)
            return None if value is None else str(value)

        status = obj.get("status")
        return cls(
            client=str(obj.get("client", "")),
            host=opt_str("host"),
            path=opt_str("path"),
            status=int(status) if isinstance(status, int) else None,
            bytes=int(obj.get("bytes", 0) or 0),
            duration=float(obj.get("duration", 0.0) or 0.0),
            meta=opt_str("meta"),
            limited=opt_str("limited"),
            error=opt_str("error"),
            request=opt_str("request"),
            time=str(obj.get("time", "")),
        )


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonLinesLog:
    """Writes records to a text stream, one line each, flushed per record."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def __call__(self, record: AccessRecord) -> None:
        self._stream.write(json.dumps(record.as_dict(), ensure_ascii=False) + "\n")
        self._stream.flush()


class LogFormatError(ValueError):
    """A line of an access log that is not a record (the message names the line)."""

    pass


def read_log(path: Path) -> Iterator[tuple[int, AccessRecord]]:
    """(line number, record) for each non-blank line. Raises LogFormatError on a bad line."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LogFormatError(f"{path}:{number}: not JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise LogFormatError(f"{path}:{number}: not a JSON object")
            yield number, AccessRecord.from_dict(obj)
