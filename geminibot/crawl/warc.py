"""``--as archiver``: every response (header line and body) into WARC files, via warcio.

One gzipped WARC file per run, ``geminibot-<UTC time>-<run id>.warc.gz`` in the archive
folder, each response a ``response`` record of type ``application/gemini; msgtype=response``
whose payload is the response as received: the header line, then the body (an http(s)
response is an ``application/http; msgtype=response`` record holding the HTTP message). A
record is written before the page is committed to the database, so a crash can repeat a
record in the next run's file but never lose one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import BinaryIO

from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]

from geminibot.crawl.adapters import FetchResult
from geminibot.urls import scheme_of

GEMINI_RESPONSE_TYPE = "application/gemini; msgtype=response"
HTTP_RESPONSE_TYPE = "application/http; msgtype=response"
#: Headers that describe the bytes on the wire, not the (decoded) body kept.
_WIRE_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length"})


def http_payload(response: FetchResult) -> bytes:
    """An http(s) response as an HTTP/1.1 message: status line, headers, body. The body
    was decoded by the client, so the length and encoding headers are rewritten to match."""
    try:
        reason = HTTPStatus(response.status or 0).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {response.status} {reason}".rstrip()]
    lines += [f"{k}: {v}" for k, v in response.headers if k.lower() not in _WIRE_HEADERS]
    lines.append(f"Content-Length: {len(response.body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "replace") + response.body


class WarcArchive:
    """One gzipped WARC file of a run, a response record per answer fetched."""

    def __init__(self, directory: Path, run_id: str, now: float) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
        self.path = directory / f"geminibot-{stamp}-{run_id[:8]}.warc.gz"
        self._file: BinaryIO = self.path.open("ab")
        self._writer = WARCWriter(self._file, gzip=True)
        self.records = 0

    def write(self, url: str, response: FetchResult, fetched_at: float) -> None:
        if scheme_of(url) == "http":
            payload, kind = http_payload(response), HTTP_RESPONSE_TYPE
        else:
            payload = f"{response.status} {response.meta}\r\n".encode() + response.body
            kind = GEMINI_RESPONSE_TYPE
        date = datetime.fromtimestamp(fetched_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = self._writer.create_warc_record(
            url,
            "response",
            payload=BytesIO(payload),
            length=len(payload),
            warc_content_type=kind,
            warc_headers_dict={"WARC-Date": date},
        )
        self._writer.write_record(record)
        self._file.flush()
        self.records += 1

    def close(self) -> None:
        self._file.close()
