"""The derived search index following the store: each change applied in a small commit.

The store logs every page that enters or leaves the searchable text (``index_changes``,
:mod:`geminibot.store.db`): written, re-fetched with another body, delisted, deleted.
An :class:`IndexUpdater` reads the log from the last change its index recorded
(``manifest.json``'s ``applied``), and per batch of at most :data:`COMMIT_PAGES` changes
deletes those pages' documents and adds back the ones the store still holds, as they are
now (:func:`~geminibot.index.documents.page_document`), commits, records the last
change applied, then deletes the applied rows of the log. Applying a change twice gives the
same index, so a crash anywhere (``kill -9``) loses nothing: the next start applies again
from the recorded change (catch-up). :func:`follow` does that every
:data:`COMMIT_INTERVAL` seconds until told to stop.

A page's link text (the ``anchors`` field, from other hosts' links to it) is read as a
rebuild reads it, for the batch's pages only (through the ``links_target`` index); link
text that another page's change adds or takes away reaches a page already indexed at its
own next change, or at the next ``index rebuild``, which stays as the repair: it builds
the whole index anew, and :func:`verify` compares the index's pages with the store's.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack

import tantivy

from geminibot.index.documents import DocumentBuilder, anchor_table, page_document, page_rows
from geminibot.index.tantivy_index import (
    IndexUnavailable,
    db_path_of,
    forget_applied,
    index_dir,
    open_index,
    pending,
    read_manifest,
    rebuild_locked,
    write_manifest,
    writing,
)

#: Most changes applied in one commit.
COMMIT_PAGES = 500
#: Seconds between two looks at the change log while following: a change becomes
#: searchable within about this long, plus the commit's own time.
COMMIT_INTERVAL = 2.0
#: Seconds without a commit after which a following updater says it still follows (well
#: within :data:`~geminibot.index.tantivy_index.FOLLOW_GRACE`).
HEARTBEAT = 15.0
#: Bytes of memory the updater's writer may use (its commits are small).
UPDATE_HEAP = 64_000_000


class IndexUpdater:
    """The one writer of a database's derived index while it follows the store: use it as
    a context manager (it holds :func:`~geminibot.index.tantivy_index.writing`); it builds
    the index first when there is none of this format."""

    def __init__(
        self, conn: sqlite3.Connection, progress: Callable[[str], None] | None = None
    ) -> None:
        db = db_path_of(conn)
        if db is None:
            raise IndexUnavailable("the database is in memory: nowhere to put a derived index")
        self.conn = conn
        self.db = db
        self.folder = index_dir(db)
        self.progress = progress
        self.builder = DocumentBuilder()
        self._stack = ExitStack()

    def __enter__(self) -> IndexUpdater:
        self._stack.enter_context(writing(self.db))
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if hasattr(self, "writer"):
                self.writer.wait_merging_threads()  # and gives tantivy's writer lock back
                del self.writer
        finally:
            self._stack.close()

    def _open(self) -> None:
        for stale in self.folder.parent.glob(self.folder.name + ".*-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a rebuild cut short (we hold the lock)
        manifest = read_manifest(self.folder)
        if manifest is None:
            rebuild_locked(self.conn, self.db, self.progress)
            manifest = read_manifest(self.folder)
        if manifest is None:
            raise IndexUnavailable(f"{self.folder}: cannot read the index just built")
        try:
            self.index = open_index(self.folder)
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexUnavailable(f"{self.folder}: {exc}") from None
        self.manifest = manifest
        self.writer = self.index.writer(UPDATE_HEAP, 1)

    @property
    def applied(self) -> int:
        return int(str(self.manifest["applied"]))

    def _languages(self) -> dict[str, int]:
        """The manifest's pages per language with the pages this updater has added (a
        language met first here has its stems searched from the next commit on)."""
        counts = Counter(self.builder.languages)
        old = self.manifest.get("languages")
        if isinstance(old, dict):
            counts.update({str(k): int(v) for k, v in old.items()})
        self.builder.languages.clear()
        return dict(counts.most_common())

    def pending(self) -> int:
        """Changes of the store not applied yet."""
        return pending(self.conn, self.applied)

    def step(self) -> int:
        """Apply the next :data:`COMMIT_PAGES` changes at most in one commit; returns how
        many changes it applied (0: the index holds every change)."""
        changes = self.conn.execute(
            "SELECT seq, page_id FROM index_changes WHERE seq > ? ORDER BY seq LIMIT ?",
            (self.applied, COMMIT_PAGES),
        ).fetchall()
        if not changes:
            return 0
        ids = sorted({int(page_id) for _, page_id in changes})
        self.writer.delete_documents_by_query(
            tantivy.Query.term_set_query(self.index.schema, "id", ids)
        )
        marks = ", ".join("?" * len(ids))
        urls = [
            str(u)
            for (u,) in self.conn.execute(f"SELECT url FROM pages WHERE id IN ({marks})", ids)
        ]
        anchor_table(self.conn, urls)
        where = f"p.id IN ({marks})"
        for row in self.conn.execute(page_rows(where), ids):
            self.writer.add_document(page_document(self.builder, row))
        self.conn.execute("DROP TABLE temp.anchor_text")
        self.writer.commit()
        self.index.reload()
        last = int(changes[-1][0])
        self.manifest = {
            **self.manifest,
            "applied": last,
            "pages": self.index.searcher().num_docs,
            "languages": self._languages(),
            "updated_at": time.time(),
        }
        write_manifest(self.folder, self.manifest)
        # Locked past the busy timeout by a crawl's batch of writes: the rows stay, read
        # past (seq > applied), and are deleted with a later step's.
        with contextlib.suppress(sqlite3.OperationalError):
            forget_applied(self.conn, last)
        return len(changes)

    def beat(self) -> None:
        """Say in the manifest that this updater follows the store, with nothing to apply:
        a search then keeps to the index when the next change comes, for the seconds until
        its commit (:func:`~geminibot.index.tantivy_index.is_followed`)."""
        self.manifest = {**self.manifest, "updated_at": time.time()}
        write_manifest(self.folder, self.manifest)

    def catch_up(self) -> int:
        """Apply every change the store has logged; returns how many."""
        total = 0
        while done := self.step():
            total += done
        return total


def follow(
    updater: IndexUpdater,
    stopping: Callable[[], bool],
    wait: Callable[[float], object],
    interval: float = COMMIT_INTERVAL,
) -> int:
    """Apply the store's changes as they come until ``stopping()``: all there are, then
    ``wait(interval)`` (a sleep that a stop may cut short); once stopped, every change
    committed by then (a stop leaves the index current); returns the changes applied.
    It says it follows (:meth:`IndexUpdater.beat`) when it starts, so that the first
    changes after a rebuild or a restart keep searches on the index until their commit,
    then whenever it had nothing to apply for :data:`HEARTBEAT` seconds."""
    total = 0
    updater.beat()
    beat = time.monotonic()
    while not stopping():
        done = updater.step()
        total += done
        now = time.monotonic()
        if done:
            beat = now
        elif now - beat >= HEARTBEAT:
            updater.beat()
            beat = now
        if done < COMMIT_PAGES:
            wait(interval)
    return total + updater.catch_up()


def verify(conn: sqlite3.Connection) -> dict[str, object]:
    """Compare the derived index's pages with the store's searchable pages: the counts,
    and the first few ids found only in one of them or twice in the index."""
    db = db_path_of(conn)
    folder = index_dir(db) if db is not None else None
    manifest = read_manifest(folder) if folder is not None else None
    if folder is None or manifest is None:
        raise IndexUnavailable(f"no search index of this format at {folder}")
    index = open_index(folder)
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False).hits
    in_index = [int(i or 0) for i in searcher.fast_field_values("id", [a for _, a in hits])]
    in_store = {
        int(row[0])
        for row in conn.execute(
            "SELECT p.id FROM pages p JOIN pages_fts f ON f.rowid = p.id WHERE p.text_indexed"
        )
    }
    indexed = set(in_index)
    missing = sorted(in_store - indexed)
    extra = sorted(indexed - in_store)
    twice = len(in_index) - len(indexed)
    waiting = pending(conn, int(str(manifest["applied"])))
    return {
        "store_pages": len(in_store),
        "index_pages": len(in_index),
        "pending": waiting,
        "missing": missing[:10],
        "missing_count": len(missing),
        "extra": extra[:10],
        "extra_count": len(extra),
        "duplicated": twice,
        "agree": not (missing or extra or twice or waiting),
    }
