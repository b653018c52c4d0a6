"""``--as archiver``: every response (header line and body) into WARC files, via warcio.

One gzipped WARC file per run, ``geminibot-<UTC time>-<run id>.warc.gz`` in the archive
folder, each response a ``response`` record of type ``application/gemini; msgtype=response``
whose payload is the response as received: the header line, then the body. A record is
written before the page is committed to the database, so a crash can repeat a record in
the next run's file but never lose one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import BinaryIO

from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]

from geminibot.crawl.crawler import Response

GEMINI_RESPONSE_TYPE = "application/gemini; msgtype=response"


class WarcArchive:
    def __init__(self, directory: Path, run_id: str, now: float) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
        self.path = directory / f"geminibot-{stamp}-{run_id[:8]}.warc.gz"
        self._file: BinaryIO = self.path.open("ab")
        self._writer = WARCWriter(self._file, gzip=True)
        self.records = 0

    def write(self, url: str, response: Response, fetched_at: float) -> None:
        payload = f"{response.status} {response.meta}\r\n".encode() + response.body
        date = datetime.fromtimestamp(fetched_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = self._writer.create_warc_record(
            url,
            "response",
            payload=BytesIO(payload),
            length=len(payload),
            warc_content_type=GEMINI_RESPONSE_TYPE,
            warc_headers_dict={"WARC-Date": date},
        )
        self._writer.write_record(record)
        self._file.flush()
        self.records += 1

    def close(self) -> None:
        self._file.close()
