"""The README of an export: what each file holds, what a row of it is, how many rows it
has, and its columns with their Arrow types and meaning, from the datasets' own
descriptions (:mod:`geminibot.export.datasets`)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

from geminibot.export.model import Dataset

README = "README.md"
#: Columns the README's paragraphs are wrapped to.
WIDTH = 88

INTRODUCTION = """\
# A geminibot crawl, as open data

These files are what one geminibot crawl database held when `geminibot export` read it
(one consistent snapshot), as Apache Parquet files. Any Parquet reader opens them:

    import pyarrow.parquet as pq
    index = pq.read_table("index.parquet")

    duckdb -c "SELECT url_host_name, count(*) FROM 'index.parquet' GROUP BY 1"

- Times are UTC timestamps (microseconds).
- `url_host_key` is the crawl's name for a host: `host[:port]` for Gemini,
  `scheme://host[:port]` for the web; it joins the files.
- Nothing of a page's text is here unless the export was asked for it (`--text`:
  page_text.parquet, and the titles of feeds and their entries), and never the text of
  a page whose host's robots2.txt forbids keeping it.
- Each section below is one file: what it holds, what one row is, its rows, and its
  columns (name, Arrow type, meaning).
"""


def readme(datasets: Sequence[Dataset], rows: Sequence[int]) -> str:
    """The README of the files of ``datasets``, written with ``rows`` rows each."""
    parts = [INTRODUCTION]
    for dataset, count in zip(datasets, rows, strict=True):
        parts.append(section(dataset, count))
    return "\n".join(parts)


def section(dataset: Dataset, rows: int) -> str:
    """One file's section: its heading, what it holds, a row, its columns."""
    lines = [f"## {dataset.file}", "", textwrap.fill(dataset.about, WIDTH), ""]
    lines.append(textwrap.fill(f"One row: {dataset.row}. Rows: {rows:,}.", WIDTH))
    lines += ["", "| column | type | what |", "|---|---|---|"]
    lines += list(column_rows(dataset))
    return "\n".join(lines) + "\n"


def column_rows(dataset: Dataset) -> Iterable[str]:
    for column in dataset.columns:
        yield f"| {column.name} | {column.type} | {column.about} |"
