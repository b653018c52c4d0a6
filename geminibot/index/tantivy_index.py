"""A top-k search index (tantivy) derived from the crawl store, beside the database.

SQLite stays the store: the pages, their text (``pages_fts``) and links. This index is a
copy built for ranked retrieval at Geminispace scale: tantivy's collector keeps the best
``limit`` documents and skips blocks of postings that cannot enter them (block-max WAND),
where FTS5's bm25 scores every matching page before sorting (see docs/benchmarks.md).

It lives in the folder ``DB.search/``, built whole from the store (:func:`rebuild`,
``geminibot index rebuild --db DB``) and then, while an updater follows the store
(:mod:`geminibot.index.updater`), kept current page by page: deleting the folder loses
nothing. What a document holds: :mod:`geminibot.index.documents`; the query a search
runs: :mod:`geminibot.index.tantivy_query`.

Ranking is in two stages (:meth:`TantivyIndex.search`): tantivy's collector keeps the
best :data:`RERANK_WINDOW` pages by text alone, with block-max pruning intact, then those
are re-ranked by text score × their host's link-authority weight ``log2(2 + authority)``
× a keyword-stuffing penalty (:data:`~geminibot.index.documents.STUFFED_SHARE`) outside
the collector; the window's pages of hosts with no trust path (authority computed, and
their host's weight that of a score of 0) are first scored again with
:data:`~geminibot.index.documents.UNTRUSTED_BOOSTS` (search spam: their title, headings
and incoming link text do not lift them by themselves), by one more search over those
pages alone. The weights are not in the documents but in the folder's weights file
(:mod:`geminibot.index.weights`), replaced whenever authority is computed again and read
by the next search: new weights never rebuild or re-add a document. Weighting
inside the collector (``weight_by_field``) made every matching page's score depend on a
per-document factor, so no block could be skipped: 38 ms instead of 8 ms for the most
common word at 600,000 pages (docs/benchmarks.md).

The store logs each page that enters or leaves the searchable text (``index_changes``,
:mod:`geminibot.store.db`); the index records in ``manifest.json`` the last change it has
applied. :func:`open_current` returns the index when nothing is pending, or when an
updater has committed within :data:`FOLLOW_GRACE` seconds (it is following: a changed page
is missing for the seconds until its next commit); otherwise None, and search falls back to
FTS5 rather than miss pages. A page deleted from the store is never shown, since results
are read back from it. Searches read the newest commit: a new manifest reloads the index.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import tantivy

from geminibot.cliutil import counted
from geminibot.index.documents import (
    FIELD_BOOSTS,
    FIELD_ORDER,
    UNTRUSTED_BOOSTS,
    DocumentBuilder,
    anchor_table,
    page_document,
    page_rows,
    register,
    schema,
    stuffing_factor,
    text_analyzer,
)
from geminibot.index.explain import (
    AUTHORITY,
    STUFFING,
    ScoreParts,
    field_parts,
    scaled,
    with_factors,
)
from geminibot.index.languages import STEMMERS
from geminibot.index.query import ParsedQuery
from geminibot.index.tantivy_query import QueryBuilder
from geminibot.index.weights import (
    WEIGHTS_FILE,
    HostWeights,
    read_weights,
    weights_lock,
    write_weights,
)
from geminibot.store.authority import last_computed
from geminibot.store.db import transaction

if TYPE_CHECKING:
    from geminibot.store.database import Database

#: Index format of this module (a folder written by another is rebuilt, not read).
FORMAT = 6
#: Pages ranked by text alone that are then re-ranked by text × authority: the first
#: stage keeps tantivy's top-k pruning; a page outside this window is never lifted into it
#: by its authority (those beyond it follow, in text order).
RERANK_WINDOW = 500
#: Bytes of memory the index writer may use, and its threads: at 1 GB an index of 600,000
#: pages is written as one segment (a query visits each segment once).
WRITER_HEAP = 1_000_000_000
WRITER_THREADS = 1
#: Documents read from SQLite per batch while building.
BATCH = 5_000
#: Seconds since an updater's last commit within which a lagging index is still searched
#: (a live updater commits every few seconds while changes are pending).
FOLLOW_GRACE = 60.0


class IndexUnavailable(Exception):
    """The derived index cannot be built or used; the message says why."""


def index_dir(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".search")


def db_path_of(conn: sqlite3.Connection) -> Path | None:
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main" and file:
            return Path(file)
    return None


@dataclass(frozen=True)
class Hit:
    """One page found: its id in the store, its score, its language (None: unknown),
    and when asked for, the parts its score adds up from (:mod:`geminibot.index.explain`)."""

    page_id: int
    score: float
    lang: str | None
    parts: ScoreParts | None = None


@dataclass
class TantivyIndex:
    """An opened tantivy index of the store's pages: the index, its schema and analyzer,
    its hosts' link-authority weights, and the manifest of its build."""

    index: tantivy.Index
    schema: tantivy.Schema
    analyzer: tantivy.TextAnalyzer
    weights: HostWeights

    #: This build's identity (a rebuild writes another) and the manifest it was read from.
    build: str
    manifest: dict[str, object]
    _stemmers: dict[str, tantivy.TextAnalyzer] = field(default_factory=dict)

    @property
    def applied(self) -> int:
        """The last store change (``index_changes.seq``) this index holds."""
        return int(str(self.manifest["applied"]))

    @property
    def languages(self) -> tuple[str, ...]:
        """The languages with a stemmer that the index's pages are in (their stems are
        searched)."""
        counts = self.manifest.get("languages")
        return tuple(str(c) for c in counts if c in STEMMERS) if isinstance(counts, dict) else ()

    def search(
        self,
        parsed: ParsedQuery,
        limit: int,
        *,
        offset: int = 0,
        authority: bool = True,
        window: int = RERANK_WINDOW,
        explain: bool = False,
    ) -> list[Hit]:
        """The ``limit`` pages from the ``offset``-th on, best first.

        With ``authority``, the best ``window`` pages by text are ordered by text score ×
        their host's weight (the newest :class:`~geminibot.index.weights.HostWeights`;
        1.0 without any) × :func:`~geminibot.index.documents.stuffing_factor`, and any asked for beyond them follow in text order, so
        that pages of results never overlap or skip; scores are text × those factors
        throughout. Without it: text relevance alone. With ``explain``, each hit's
        score in parts (text fields from tantivy's explanation, then the factors)."""
        query = self._query(parsed)
        if query is None:
            return []
        searcher = self.index.searcher()
        wanted = offset + limit
        hits = searcher.search(query, max(wanted, window) if authority else wanted, count=False)
        ranked: list[tuple[float, tantivy.DocAddress]] = hits.hits
        # Per document: its text score and the factors applied to it, by address.
        applied: dict[tuple[int, int], tuple[float, list[tuple[str, float]]]] = {}
        if authority and ranked:
            addresses = [addr for _, addr in ranked]
            stuffed = [
                stuffing_factor(float(share or 0.0))
                for share in searcher.fast_field_values("stuffing", addresses)
            ]
            lifted = [1.0] * len(ranked)
            weights = self.weights.current()
            if weights is not None and weights.by_key:
                hosts = [int(h or 0) for h in searcher.fast_field_values("host", addresses)]
                lifted = [weights.of(h) for h in hosts]
                untrusted = [n for n, h in enumerate(hosts[:window]) if not weights.trusted(h)]
                ranked = self._untrusted_rescored(searcher, parsed, ranked, untrusted)
            scored = []
            for (s, addr), f, w in zip(ranked, stuffed, lifted, strict=True):
                scored.append((s * f * w, addr))
                if explain:
                    applied[_key(addr)] = (s, [(STUFFING, f), (AUTHORITY, w)])
            head = sorted(scored[:window], key=lambda hit: -hit[0])  # stable: text order
            ranked = head + scored[window:]
        page = ranked[offset:wanted]
        ids = searcher.fast_field_values("id", [addr for _, addr in page])
        return [
            Hit(
                int(i or 0),
                float(score),
                _stored_lang(searcher.doc(addr)),
                self._parts(searcher, parsed, addr, score, applied) if explain else None,
            )
            for i, (score, addr) in zip(ids, page, strict=True)
        ]

    def _parts(
        self,
        searcher: tantivy.Searcher,
        parsed: ParsedQuery,
        addr: tantivy.DocAddress,
        score: float,
        applied: dict[tuple[int, int], tuple[float, list[tuple[str, float]]]],
    ) -> ScoreParts:
        """The parts of the hit at ``addr``'s ``score``: its text score by field, from
        the explanation of the query that gave it (the untrusted boosts' when that
        re-score lowered it), then its factors."""
        text, factors = applied.get(_key(addr), (score, []))
        if parsed.scope_only:
            return {AUTHORITY: score}
        query = self._query(parsed)
        if query is None:
            return {}
        parts = field_parts(query.explain(searcher, addr).to_json(), FIELD_ORDER)
        if abs(sum(parts.values()) - text) > 1e-3 * max(1.0, text):
            untrusted = self._query(parsed, UNTRUSTED_BOOSTS)
            if untrusted is not None:
                parts = field_parts(untrusted.explain(searcher, addr).to_json(), FIELD_ORDER)
        return with_factors(scaled(parts, text), *factors)

    def _query(
        self, parsed: ParsedQuery, boosts: dict[str, float] = FIELD_BOOSTS
    ) -> tantivy.Query | None:
        """``parsed`` as a query of this index, stems searched in its languages."""
        builder = QueryBuilder(self.schema, self.analyzer, self.languages, self._stemmers)
        return builder.query(parsed, boosts)

    def _untrusted_rescored(
        self,
        searcher: tantivy.Searcher,
        parsed: ParsedQuery,
        ranked: list[tuple[float, tantivy.DocAddress]],
        untrusted: list[int],
    ) -> list[tuple[float, tantivy.DocAddress]]:
        """``ranked`` with the pages at the positions ``untrusted`` scored as the query
        with :data:`~geminibot.index.documents.UNTRUSTED_BOOSTS` scores them (never
        above their score), by one search restricted to those pages."""
        if not untrusted:
            return ranked
        query = self._query(parsed, UNTRUSTED_BOOSTS)
        ids = searcher.fast_field_values("id", [ranked[n][1] for n in untrusted])
        if query is None:
            return ranked
        only = tantivy.Query.const_score_query(
            tantivy.Query.term_set_query(self.schema, "id", [int(i or 0) for i in ids]), 0.0
        )
        restricted = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, query), (tantivy.Occur.Must, only)]
        )
        found = searcher.search(restricted, len(untrusted), count=False).hits
        flat = {(a.segment_ord, a.doc): score for score, a in found}
        rescored = list(ranked)
        for n in untrusted:
            score, addr = ranked[n]
            rescored[n] = (min(score, flat.get((addr.segment_ord, addr.doc), 0.0)), addr)
        return rescored


def _key(addr: tantivy.DocAddress) -> tuple[int, int]:
    return (addr.segment_ord, addr.doc)


def _stored_lang(doc: tantivy.Document) -> str | None:
    values = doc.to_dict().get("lang") or []
    return str(values[0]) if values else None


def read_manifest(folder: Path) -> dict[str, object] | None:
    """The manifest of the index in ``folder`` when it is of this :data:`FORMAT`."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):  # missing, damaged
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    if not isinstance(manifest.get("build"), str) or not isinstance(manifest.get("applied"), int):
        return None
    return manifest


def write_manifest(folder: Path, manifest: dict[str, object]) -> None:
    """Replace ``folder``'s manifest atomically (a reader sees the old one or the new)."""
    part = folder / f"manifest.json.{os.getpid()}"
    with part.open("w") as out:
        out.write(json.dumps(manifest))
        out.flush()
        os.fsync(out.fileno())
    part.replace(folder / "manifest.json")


def open_index(folder: Path) -> tantivy.Index:
    """The tantivy index in ``folder`` with this module's analyzers registered."""
    index = tantivy.Index.open(str(folder / "tantivy"))
    register(index, text_analyzer())
    return index


def _open(folder: Path) -> TantivyIndex | None:
    manifest = read_manifest(folder)
    if manifest is None:
        return None
    try:
        index = tantivy.Index.open(str(folder / "tantivy"))
    except (OSError, ValueError, RuntimeError):  # missing, damaged
        return None
    analyzer = text_analyzer()
    register(index, analyzer)
    weights = HostWeights(folder / WEIGHTS_FILE)
    return TantivyIndex(index, index.schema, analyzer, weights, str(manifest["build"]), manifest)


#: Indexes opened in this process, by folder, with their manifest's mtime: a new manifest
#: is a new commit of the same build (the reader reloads) or another build (reopened).
_OPENED: dict[Path, tuple[int, TantivyIndex]] = {}


def last_change(conn: sqlite3.Connection) -> int:
    """The last change the store has logged (``index_changes``; 0 before any)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'index_changes'").fetchone()
    return 0 if row is None else int(row[0])


def pending(conn: sqlite3.Connection, applied: int) -> int:
    """Changes logged after ``applied``: pages fetched, changed or gone not yet searchable."""
    return int(
        conn.execute("SELECT count(*) FROM index_changes WHERE seq > ?", (applied,)).fetchone()[0]
    )


def index_lag(database: Database) -> int | None:
    """Changes of the store the derived index has not applied (None: no index of this
    format, or not an SQLite store: PostgreSQL's own index never lags)."""
    conn = database.sqlite
    if conn is None:
        return None
    db = db_path_of(conn)
    manifest = read_manifest(index_dir(db)) if db is not None else None
    return None if manifest is None else pending(conn, int(str(manifest["applied"])))


def _reopened(folder: Path) -> TantivyIndex | None:
    """The index in ``folder`` as of its newest commit, opened once per build."""
    try:
        stamp = (folder / "manifest.json").stat().st_mtime_ns
    except OSError:
        return None
    cached = _OPENED.get(folder)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    manifest = read_manifest(folder)
    if manifest is None:
        return None
    if cached is not None and cached[1].build == manifest["build"]:
        index = cached[1]
        try:
            index.index.reload()
        except (OSError, ValueError, RuntimeError):
            return None
        index.manifest = manifest
    else:
        opened = _open(folder)
        if opened is None:
            return None
        index = opened
    _OPENED[folder] = (stamp, index)
    return index


def is_followed(manifest: dict[str, object], now: float) -> bool:
    """Whether an updater has committed to this index within :data:`FOLLOW_GRACE`."""
    updated = manifest.get("updated_at")
    return isinstance(updated, float | int) and now - float(updated) < FOLLOW_GRACE


def open_current(conn: sqlite3.Connection) -> TantivyIndex | None:
    """The derived index of ``conn``'s database, as of its newest commit, when it holds
    every change of the store or an updater is following it; else None."""
    db = db_path_of(conn)
    if db is None:
        return None
    index = _reopened(index_dir(db))
    if index is None:
        return None
    if is_followed(index.manifest, time.time()) or not pending(conn, index.applied):
        return index
    return None


def status(conn: sqlite3.Connection) -> dict[str, object]:
    """Whether the derived index exists and is current, for people (``index status``):
    ``pending`` changes of the store not yet applied; ``following`` while an updater (or
    a rebuild) holds the index (:func:`is_written`: a lock, not a guess); and, when
    changes are pending and none does, ``index_searched_for``: the seconds searches
    still keep to the index (:data:`FOLLOW_GRACE` after its last commit) before FTS5."""
    db = db_path_of(conn)
    folder = index_dir(db) if db is not None else None
    if folder is None or not folder.is_dir():
        return {"built": False, "current": False, "path": str(folder)}
    opened = _open(folder)
    if opened is None:
        return {"built": False, "current": False, "path": str(folder), "unreadable": True}
    waiting = pending(conn, opened.applied)
    following = is_written(db) if db is not None else False
    now = time.time()
    updated = opened.manifest.get("updated_at")
    left = FOLLOW_GRACE - (now - float(updated)) if isinstance(updated, float | int) else 0.0
    return {
        **opened.manifest,
        "built": True,
        "current": waiting == 0,
        "pending": waiting,
        "following": following,
        "index_searched_for": round(max(0.0, left), 1) if waiting and not following else 0.0,
        "path": str(folder),
        "authority": authority_status(conn, folder),
    }


def authority_status(conn: sqlite3.Connection, folder: Path) -> dict[str, object]:
    """When link authority was last computed into the store (``computed_at``, Unix
    seconds, None: never), the computation whose weights the index's searches apply
    (``applied_at``), their hosts, and whether those are the newest (``current``)."""
    stored = last_computed(conn)
    weights = read_weights(folder / WEIGHTS_FILE)
    applied = None if weights is None else weights.computed_at
    return {
        "computed_at": stored,
        "applied_at": applied,
        "hosts": 0 if weights is None else len(weights.by_key),
        "current": stored is not None and applied == stored,
    }


def apply_weights(conn: sqlite3.Connection) -> int | None:
    """Give the derived index of ``conn``'s database the store's authority weights
    (searches apply them from their next query on); returns how many hosts have one,
    or None when there is no index to give them to (a rebuild will)."""
    db = db_path_of(conn)
    folder = index_dir(db) if db is not None else None
    if folder is None:
        return None
    with weights_lock(folder):
        return write_weights(conn, folder) if read_manifest(folder) is not None else None


def _lock_file(db: Path) -> Path:
    return db.with_name(db.name + ".search.lock")


def is_written(db: Path) -> bool:
    """Whether a process (an updater, a rebuild) holds :func:`writing` of ``db``'s index
    now: the lock is asked for, not the manifest's age (a process killed holds none)."""
    try:
        fd = os.open(_lock_file(db), os.O_RDONLY)
    except OSError:
        return False  # never written, or unreadable: no writer to say of
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # and any lock taken with it
    return False


@contextmanager
def writing(db: Path) -> Iterator[None]:
    """Hold the right to write ``db``'s derived index (a lock file beside it) for the
    block: one rebuild or updater at a time; :class:`IndexUnavailable` if another has it."""
    lock = _lock_file(db)
    with lock.open("a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexUnavailable(
                f"another process (an index updater or rebuild) is writing {index_dir(db)}"
            ) from None
        yield


def forget_applied(conn: sqlite3.Connection, applied: int) -> None:
    """Delete the change log's rows up to ``applied``: the index holds them."""
    with transaction(conn):
        conn.execute("DELETE FROM index_changes WHERE seq <= ?", (applied,))


def rebuild(
    conn: sqlite3.Connection, progress: Callable[[str], None] | None = None
) -> dict[str, object]:
    """Build the derived index from the store, replacing any old one atomically; fails
    with :class:`IndexUnavailable` while an updater or another rebuild writes it."""
    db = db_path_of(conn)
    if db is None:
        raise IndexUnavailable("the database is in memory: nowhere to put a derived index")
    with writing(db):
        return rebuild_locked(conn, db, progress)


def rebuild_locked(
    conn: sqlite3.Connection, db: Path, progress: Callable[[str], None] | None = None
) -> dict[str, object]:
    """:func:`rebuild` by the holder of :func:`writing`."""
    import secrets  # a rebuild's alone: kept out of a search's start-up
    import shutil

    say = progress or (lambda _msg: None)
    folder = index_dir(db)
    started = time.perf_counter()
    applied = last_change(conn)  # before reading pages: a later change is applied again
    build = folder.with_name(folder.name + f".building-{os.getpid()}")
    shutil.rmtree(build, ignore_errors=True)
    try:
        (build / "tantivy").mkdir(parents=True)
        index = tantivy.Index(schema(), path=str(build / "tantivy"))
        builder = DocumentBuilder()
        register(index, builder.analyzer)
        writer = index.writer(WRITER_HEAP, WRITER_THREADS)
        say("collecting link text")
        anchor_table(conn)
        rows = conn.execute(page_rows("1"))
        count = 0
        while batch := rows.fetchmany(BATCH):
            for row in batch:
                writer.add_document(page_document(builder, row))
            count += len(batch)
            say(f"indexed {counted(count, 'page')}")
        writer.commit()
        writer.wait_merging_threads()
        conn.execute("DROP TABLE IF EXISTS temp.anchor_text")
        manifest: dict[str, object] = {
            "format": FORMAT,
            "build": secrets.token_hex(8),
            "applied": applied,
            "pages": count,
            "languages": dict(builder.languages.most_common()),
            "built_at": time.time(),
            "seconds": round(time.perf_counter() - started, 3),
        }
        write_manifest(build, manifest)
        old = folder.with_name(folder.name + f".old-{os.getpid()}")
        with weights_lock(folder):  # the newest weights go with the new folder
            write_weights(conn, build)
            if folder.exists():
                folder.rename(old)
            build.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    forget_applied(conn, applied)
    manifest["bytes"] = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return manifest
