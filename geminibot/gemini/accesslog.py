"""The access log: one JSON object per connection, one per line (JSON Lines), written
when the connection ends (so concurrent connections may appear out of ``time`` order).

Fields: ``time`` (ISO 8601 UTC, when the connection was accepted), ``client`` (address),
``host`` (from the request URL; null before a request was read), ``path`` (path and
query as the URL parser normalised them, still percent-encoded), ``status`` (the status sent; null if no complete header went out), ``bytes`` (body
bytes sent), ``duration`` (seconds from accept to close). Optional: ``meta`` (the meta of a
non-20 answer), ``limited`` (``rate`` or ``busy`` for a 44 the server chose), ``error`` (why
a connection ended without an answer), ``request`` (the start of a malformed request line).

What one client can add to the log is bounded (:class:`LogBudget`): the connections the
per-client rate lets through are each logged; the others (connections that sent no
request, malformed lines, refusals, ``44`` for the rate) are logged up to
:data:`LOG_BURST` at once and :data:`LOG_PER_MINUTE` a minute per client, and the rest
are counted into one record a minute per client (``error``: ``N more connections not
logged: ...``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from geminibot.gemini.ratelimit import MAX_TRACKED_CLIENTS, RateLimiter

#: Records of connections the rate does not bound logged at once per client.
LOG_BURST = 100
#: Such records logged a minute per client once its burst is spent.
LOG_PER_MINUTE = 60
#: Seconds between the records that count what was not logged.
SUMMARY_SECONDS = 60.0


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


class LogBudget:
    """Which records of connections the rate does not bound are written: ``burst`` per
    client at once, refilled at ``per_minute``; the others are counted, and
    :meth:`summaries` gives one record per client for them (the clock is passed in)."""

    def __init__(self, burst: int = LOG_BURST, per_minute: float = LOG_PER_MINUTE) -> None:
        self._bucket = RateLimiter(burst, per_minute / 60.0)
        self._unlogged: Counter[str] = Counter()

    def admits(self, client: str, now: float) -> bool:
        """Whether a record of ``client`` (its rate key) is written; if not, it is counted."""
        if self._bucket.take(client, now) is None:
            return True
        if client in self._unlogged or len(self._unlogged) < MAX_TRACKED_CLIENTS:
            self._unlogged[client] += 1
        else:
            self._unlogged["(other clients)"] += 1
        return False

    def summaries(self) -> list[AccessRecord]:
        """One record for each client with records not written since the last call."""
        out = [
            AccessRecord(client, error=f"{n} more connections not logged: over the log budget")
            for client, n in self._unlogged.items()
        ]
        self._unlogged.clear()
        return out


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
