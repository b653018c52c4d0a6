"""What every file of an export is made of: a :class:`Dataset` (its name, what it holds,
what one row is, its :class:`Column` s with their Arrow types and meanings, and how its
rows are read from the crawl database, batch by batch), the :class:`Context` its reads
share, and the conversions the datasets have in common (times, flags, a URL's parts, a
link target's host key, a page's charset).

Each dataset is described once (:mod:`geminibot.export.pages`, :mod:`geminibot.export.hosts`):
the writer (:mod:`geminibot.export.writer`) writes its rows, the README
(:mod:`geminibot.export.readme`) says what it holds, from the same description. Rows are
read in batches of :attr:`Context.batch` (never a whole table at once), each converted to
a list of tuples in the order of the columns.

Times are UTC timestamps in microseconds; the crawl's host key (``url_host_key``:
``host[:port]`` for Gemini, ``scheme://host[:port]`` for the web) joins the files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from geminibot.export.urlparts import UrlParts, url_parts
from geminibot.gemini.errors import InvalidMeta
from geminibot.gemini.response import parse_mime
from geminibot.store.database import Database
from geminibot.urls import InvalidURL, host_key, parse_url

#: Rows read, converted and written at once.
BATCH = 20_000

TIME = pa.timestamp("us", tz="UTC")
STRING = pa.string()
#: A batch of rows, each a tuple in the order of its dataset's columns.
Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class Column:
    """One column of a file: its name, its Arrow type, what it holds."""

    name: str
    type: pa.DataType
    about: str


@dataclass(frozen=True)
class Dataset:
    """One file: its name, what it holds, what one row is, its columns, and its rows
    (``read(database, context)``: batches of rows)."""

    file: str
    about: str
    row: str
    columns: tuple[Column, ...]
    read: Callable[[Database, Context], Iterator[Rows]]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type) for c in self.columns])


@dataclass(frozen=True)
class Context:
    """What the reads of one export share: which hosts' policy lets their pages' text be
    kept (``keeps_text``, asked once per host; None: no text wanted), and the rows read
    at once (``batch``)."""

    keeps_text: Callable[[str], bool] | None = None
    batch: int = BATCH


def converted(
    query: sa.TextClause, convert: Callable[[Any], tuple[Any, ...]]
) -> Callable[[Database, Context], Iterator[Rows]]:
    """The read of a dataset whose rows are those of ``query``, each passed through
    ``convert`` (to the dataset's columns, in order)."""

    def read(database: Database, context: Context) -> Iterator[Rows]:
        for rows in database.batches(query, context.batch):
            yield [convert(row) for row in rows]

    return read


def micros(seconds: float | None) -> int | None:
    """Epoch seconds as the microseconds of a :data:`TIME` column."""
    return None if seconds is None else round(seconds * 1_000_000)


#: A URL's authority: what follows ``//`` up to the path, query or fragment.
_AUTHORITY = re.compile(r"[^/?#]*")


@lru_cache(maxsize=65_536)
def _host_of(prefix: str) -> str | None:
    try:
        return host_key(prefix + "/")
    except InvalidURL:
        return None


def target_host(url: str) -> str | None:
    """The host key of a link's target, None for a URL of another scheme (``mailto:``,
    ``gopher://``) or one without a host: read once per scheme and authority."""
    start = url.find("://")
    if start < 0:
        return None
    authority = _AUTHORITY.match(url, start + 3)
    assert authority is not None  # the pattern matches the empty string
    return _host_of(url[: authority.end()])


@lru_cache(maxsize=1024)
def charset_of(meta: str, gemini: bool) -> str | None:
    """The charset a page's MIME type declares (lower-case); for a Gemini ``text/*``
    page that declares none, ``utf-8``, the protocol's default."""
    try:
        mime = parse_mime(meta)
    except InvalidMeta:
        return None
    declared = mime.params.get("charset")
    if declared is not None:
        return declared.lower()
    return mime.charset if gemini else None


def flag(value: object) -> bool | None:
    """A flag of either engine (0/1 or a boolean), None kept."""
    return None if value is None else bool(value)


def parts_of(url: str, key: str) -> UrlParts:
    """The URL's Common Crawl parts (a stored URL is normalised; one that does not parse
    keeps its text as its key, and no parts)."""
    try:
        return url_parts(parse_url(url))
    except InvalidURL:
        none = (None,) * 5
        return UrlParts(url.lower(), key, none, None, url.partition(":")[0], None, "", None)
