"""Writing an export: each dataset of :mod:`geminibot.export.datasets` as a Parquet file,
batch by batch, then the README that says what each file holds.

The whole export reads one snapshot of the database (:meth:`Database.snapshot`: a crawl
writing meanwhile changes nothing of it), never writes it, and holds one batch of rows
at a time (and, for the link graph, one host's targets). Each file is written under a
``.partial`` name and renamed once complete, so a file with its final name is whole.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from geminibot.crawl.pipeline import may_store
from geminibot.export.datasets import DATASETS, PAGE_TEXT
from geminibot.export.model import BATCH, Context, Dataset
from geminibot.export.readme import README, readme
from geminibot.store.database import Database
from geminibot.why.explain import crawl_bot, site_policy
from geminibot.why.records import Reader

#: Parquet's compression of every column: small files, fast to read.
COMPRESSION = "zstd"
#: Every file an export may write (the README included): what --force replaces.
EXPORT_FILES = (*(d.file for d in DATASETS), PAGE_TEXT.file, README)


@dataclass(frozen=True)
class Written:
    """One file written: its name, its rows and its bytes."""

    file: str
    rows: int
    bytes: int

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "rows": self.rows, "bytes": self.bytes}


def text_keeper(database: Database) -> Callable[[str], bool]:
    """Whether a host's policy, as the crawl last fetched it, lets the crawl's bot keep
    its pages' text (robots2.txt ``store`` is neither ``no`` nor ``session-only``); asked
    once per host. The crawl kept no text where its policy said so when it fetched the
    page; this also leaves out the text of a host whose policy has said so since."""
    reader = Reader(database)
    settings = reader.settings()
    bot = crawl_bot(settings.agent, settings.role, settings.run.strict if settings.run else False)
    known: dict[str, bool] = {}

    def keeps(host: str) -> bool:
        if host not in known:
            policy = site_policy(host, reader.files(host))
            known[host] = policy is None or may_store(policy, bot)
        return known[host]

    return keeps


def export(
    database: Database,
    out: Path,
    *,
    text: bool = False,
    progress: Callable[[str], None] = lambda _: None,
    batch: int = BATCH,
) -> list[Written]:
    """Write the export of ``database`` into the folder ``out`` (which must exist); with
    ``text``, the pages' text too. Rows are read ``batch`` at a time; ``progress`` hears
    of each batch written."""
    datasets = (*DATASETS, PAGE_TEXT) if text else DATASETS
    written: list[Written] = []
    with database.snapshot():
        context = Context(text_keeper(database) if text else None, batch)
        for dataset in datasets:
            written.append(write_dataset(database, dataset, context, out, progress))
    (out / README).write_text(readme(datasets, [w.rows for w in written]), encoding="utf-8")
    return written


def write_dataset(
    database: Database,
    dataset: Dataset,
    context: Context,
    out: Path,
    progress: Callable[[str], None],
) -> Written:
    """Write one dataset's file; its rows and bytes."""
    schema = dataset.schema
    path = out / dataset.file
    partial = path.with_name(path.name + ".partial")
    rows = 0
    try:
        with pq.ParquetWriter(partial, schema, compression=COMPRESSION) as writer:
            for batch in dataset.read(database, context):
                if not batch:
                    continue
                columns = zip(*batch, strict=True)
                arrays = [
                    pa.array(values, type=field.type)
                    for values, field in zip(columns, schema, strict=True)
                ]
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
                rows += len(batch)
                progress(f"{dataset.file}: {rows:,} rows")
    except BaseException:  # a failure or Ctrl-C: no half-written file left behind
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)
    return Written(dataset.file, rows, path.stat().st_size)
