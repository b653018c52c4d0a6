"""A top-k search index (tantivy) derived from the crawl store, beside the database.

SQLite stays the store: the pages, their text (``pages_fts``) and links. This index is a
copy built for ranked retrieval at Geminispace scale: tantivy's collector keeps the best
``limit`` documents and skips blocks of postings that cannot enter them (block-max WAND),
where FTS5's bm25 scores every matching page before sorting (see docs/benchmarks.md).

It lives in the folder ``DB.search/``, built whole from the store (:func:`rebuild`,
``geminibot index rebuild --db DB``) and then, while an updater follows the store
(:mod:`geminibot.index.updater`), kept current page by page: deleting the folder loses
nothing.
Fields: title, headings, **anchors** (the text of links from other hosts pointing to the
page, one copy per linking host and label), body and url, each scored by bm25 and summed
with :data:`FIELD_BOOSTS`; beside each, a **pair field** (``body_pairs``...) holding
every two neighbouring words of it as one token (``ba_babore``), so that a phrase becomes
term lookups (:func:`word_pairs`); **stems**, the page's own words stemmed in its
language (:mod:`geminibot.index.languages`), matched by a query word's stem in each
language the index holds (:data:`STEM_BOOST`); **lang**, the page's language, which
``lang:CODE`` requires; and the page's link authority as a fast field.
:func:`page_document` makes one page's document, for a rebuild and an updater alike.

Ranking is in two stages (:meth:`TantivyIndex.search`): tantivy's collector keeps the
best :data:`RERANK_WINDOW` pages by text alone, with block-max pruning intact, then those
are re-ranked by text score × ``log2(2 + authority)`` × a keyword-stuffing penalty
(:data:`STUFFED_SHARE`) outside the collector. Weighting
inside the collector (``weight_by_field``) made every matching page's score depend on a
per-document factor, so no block could be skipped: 38 ms instead of 8 ms for the most
common word at 600,000 pages (docs/benchmarks.md).

The store logs each page that enters or leaves the searchable text (``index_changes``,
:mod:`geminibot.index.db`); the index records in ``manifest.json`` the last change it has
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
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import tantivy

from geminibot.index.authority import has_authority, weight_of
from geminibot.index.db import transaction
from geminibot.index.languages import STEMMERS, page_language
from geminibot.index.query import ParsedQuery, Term
from geminibot.index.text import url_words

#: Index format of this module (a folder written by another is rebuilt, not read).
FORMAT = 4
#: bm25 boosts per field (FTS5's column weights, plus anchor text).
FIELD_BOOSTS = {"title": 10.0, "headings": 5.0, "anchors": 1.0, "body": 1.0, "url": 2.0}
#: The fields holding the page's own words (not others' link text, nor its URL).
OWN_FIELDS = ("title", "headings", "body")
#: bm25 boost of the stems field (the page's own words stemmed in its language), matched
#: by a query word's stems: a page saying "gardens" is found by "garden", and ranked by
#: its other words. At 0 a stem finds pages without lifting them: on real capsules any
#: weight on stems let pages sharing a rare word's stem outrank the page that has the
#: word (known-item MRR 0.988 at 1.0, 0.991 at 0.25, 0.992 at 0; docs/benchmarks.md).
STEM_BOOST = 0.0
#: The pair field beside each text field (see :func:`word_pairs`).
PAIR_FIELDS = {name: name + "_pairs" for name in FIELD_BOOSTS}
#: Joins two words into one token of a pair field: the analyzer's words are letters and
#: digits only, so it cannot occur inside one.
PAIR_JOINER = "_"
#: Pages ranked by text alone that are then re-ranked by text × authority: the first
#: stage keeps tantivy's top-k pruning; a page outside this window is never lifted into it
#: by its authority (those beyond it follow, in text order).
RERANK_WINDOW = 500
#: Keyword stuffing: a page whose most frequent word makes up more than this share of its
#: own words (title, headings, body), and occurs at least STUFFED_MIN_COUNT times, has its
#: re-ranked score multiplied by ``STUFFED_SHARE / share`` (1/3 for a page of one word
#: repeated). Natural text stays below it: the commonest English word is about 6% of
#: running text, and text whose words follow Zipf's law stays well below 25%.
#: bm25 saturates a word's frequency per field and then tantivy sums the fields, so a
#: page repeating a word in title, headings and body gains in each (docs/benchmarks.md).
STUFFED_SHARE = 0.3
STUFFED_MIN_COUNT = 20
#: Bytes of memory the index writer may use, and its threads: at 1 GB an index of 600,000
#: pages is written as one segment (a query visits each segment once).
WRITER_HEAP = 1_000_000_000
WRITER_THREADS = 1
#: Documents read from SQLite per batch while building.
BATCH = 5_000
#: Seconds since an updater's last commit within which a lagging index is still searched
#: (a live updater commits every few seconds while changes are pending).
FOLLOW_GRACE = 60.0
#: Longest anchor text kept per page (characters): a page linked from everywhere gets a
#: representative sample, not an unbounded field.
MAX_ANCHOR_CHARS = 20_000
_TOKENIZER = "geminibot"
_PAIR_TOKENIZER = "geminibot_pairs"
_RAW_TOKENIZER = "raw"


class IndexUnavailable(Exception):
    """The derived index cannot be built or used; the message says why."""


def index_dir(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".search")


def db_path_of(conn: sqlite3.Connection) -> Path | None:
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main" and file:
            return Path(file)
    return None


def text_analyzer() -> tantivy.TextAnalyzer:
    # FTS5's unicode61 remove_diacritics: words of letters and digits, lower case, folded.
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


def _stem_analyzer(code: str) -> tantivy.TextAnalyzer:
    """Words as :func:`text_analyzer` makes them, stemmed by language ``code``'s stemmer."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer(STEMMERS[code]))
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


def _pair_analyzer() -> tantivy.TextAnalyzer:
    # A pair field's text is already analysed words joined in pairs, space-separated.
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()


def word_pairs(words: list[str]) -> list[str]:
    """Each two neighbouring words as one pair-field token: ``a b c`` -> ``a_b b_c``.

    A phrase of n words occurs in a field exactly when its n-1 pairs occur there in
    sequence; for two words that is one term lookup, where a positional phrase query
    reads the positions of every page holding both words (nearly all, for common ones)."""
    return [a + PAIR_JOINER + b for a, b in pairwise(words)]


def stuffing(words: list[str]) -> float:
    """The share of ``words`` that is its most frequent word, when that word occurs at least
    :data:`STUFFED_MIN_COUNT` times; else 0 (too short a page to tell)."""
    if len(words) < STUFFED_MIN_COUNT:
        return 0.0
    top = Counter(words).most_common(1)[0][1]
    return top / len(words) if top >= STUFFED_MIN_COUNT else 0.0


def stuffing_factor(share: float) -> float:
    """What a page's re-ranked score is multiplied by for its :func:`stuffing` share."""
    return STUFFED_SHARE / share if share > STUFFED_SHARE else 1.0


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    # Indexed, so that an update deletes a page's document by its id.
    builder.add_unsigned_field("id", stored=True, indexed=True, fast=True)
    for name in FIELD_BOOSTS:
        # Stored: an update carries a page's link text over to its next copy, by URL.
        stored = name in ("anchors", "url")
        builder.add_text_field(name, tokenizer_name=_TOKENIZER, stored=stored)
        builder.add_text_field(
            PAIR_FIELDS[name], tokenizer_name=_PAIR_TOKENIZER, index_option="freq"
        )
    builder.add_text_field("stems", tokenizer_name=_PAIR_TOKENIZER, index_option="freq")
    builder.add_text_field("lang", stored=True, tokenizer_name=_RAW_TOKENIZER)
    builder.add_float_field("authority", fast=True)
    builder.add_float_field("stuffing", fast=True)
    return builder.build()


class DocumentBuilder:
    """What :func:`page_document` needs beyond a page's row: the analyzer, a stemmer per
    language met, and how many pages of each language it has built (the manifest's
    ``languages``, whose stems a query searches)."""

    def __init__(self) -> None:
        self.analyzer = text_analyzer()
        self.languages: Counter[str] = Counter()
        self._stemmers: dict[str, tantivy.TextAnalyzer] = {}

    def stemmer(self, code: str) -> tantivy.TextAnalyzer:
        if code not in self._stemmers:
            self._stemmers[code] = _stem_analyzer(code)
        return self._stemmers[code]


def _register(index: tantivy.Index, analyzer: tantivy.TextAnalyzer) -> None:
    index.register_tokenizer(_TOKENIZER, analyzer)
    index.register_tokenizer(_PAIR_TOKENIZER, _pair_analyzer())


@dataclass(frozen=True)
class Hit:
    """One page found: its id in the store, its score, its language (None: unknown)."""

    page_id: int
    score: float
    lang: str | None


@dataclass
class TantivyIndex:
    """An opened tantivy index of the store's pages: the index, its schema and analyzer, and
    the manifest of its build."""

    index: tantivy.Index
    schema: tantivy.Schema
    analyzer: tantivy.TextAnalyzer
    has_authority: bool

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
    ) -> list[Hit]:
        """The ``limit`` pages from the ``offset``-th on, best first.

        With ``authority``, the best ``window`` pages by text are ordered by text score ×
        ``log2(2 + authority)`` (when the index was built with authority) ×
        :func:`stuffing_factor`, and any asked for beyond them follow in text order, so
        that pages of results never overlap or skip; scores are text × those factors
        throughout. Without it: text relevance alone."""
        query = self._query(parsed)
        if query is None:
            return []
        searcher = self.index.searcher()
        wanted = offset + limit
        hits = searcher.search(query, max(wanted, window) if authority else wanted, count=False)
        ranked: list[tuple[float, tantivy.DocAddress]] = hits.hits
        if authority and ranked:
            addresses = [addr for _, addr in ranked]
            factors = [
                stuffing_factor(float(share or 0.0))
                for share in searcher.fast_field_values("stuffing", addresses)
            ]
            if self.has_authority:
                weights = searcher.fast_field_values("authority", addresses)
                factors = [
                    f * weight_of(float(a or 0.0)) for f, a in zip(factors, weights, strict=True)
                ]
            scored = [(s * f, addr) for (s, addr), f in zip(ranked, factors, strict=True)]
            head = sorted(scored[:window], key=lambda hit: -hit[0])  # stable: text order
            ranked = head + scored[window:]
        page = ranked[offset:wanted]
        ids = searcher.fast_field_values("id", [addr for _, addr in page])
        return [
            Hit(int(i or 0), float(score), _stored_lang(searcher.doc(addr)))
            for i, (score, addr) in zip(ids, page, strict=True)
        ]

    def _stems(self, word: str, lang: str | None) -> list[tantivy.Query]:
        """Term queries for ``word``'s stem in each language searched (``lang``, else every
        language of the index that has a stemmer)."""
        codes = [lang] if lang in STEMMERS else [] if lang else list(self.languages)
        stems: set[str] = set()
        for code in codes:
            if code not in self._stemmers:
                self._stemmers[code] = _stem_analyzer(code)
            stems.update(self._stemmers[code].analyze(word))
        return [
            tantivy.Query.boost_query(
                tantivy.Query.term_query(self.schema, "stems", stem), STEM_BOOST
            )
            for stem in sorted(stems)
        ]

    def _term(self, term: Term, lang: str | None = None) -> tantivy.Query | None:
        words: list[str | tuple[int, str]] = list(self.analyzer.analyze(term.text))
        if not words:
            return None
        per_field = []
        if not term.prefix and len(words) == 1:
            per_field += [(tantivy.Occur.Should, q) for q in self._stems(term.text, lang)]
        for name, boost in FIELD_BOOSTS.items():
            if not term.prefix and len(words) > 1:
                q = self._phrase(name, words)
            elif term.prefix and len(words) == 1:
                escaped = "".join(c if c.isalnum() else "\\" + c for c in str(words[0]))
                q = tantivy.Query.regex_query(self.schema, name, escaped + ".*")
            elif term.prefix:
                q = tantivy.Query.phrase_prefix_query(self.schema, name, words)
            else:
                q = tantivy.Query.term_query(self.schema, name, words[0])
            per_field.append((tantivy.Occur.Should, tantivy.Query.boost_query(q, boost)))
        return tantivy.Query.boolean_query(per_field)

    def _phrase(self, field: str, words: list[str | tuple[int, str]]) -> tantivy.Query:
        """The phrase ``words`` in ``field``, through its pair field: one term for two
        words; for more, every pair required and the positional phrase checked only on
        the pages holding them all (scored by the pairs alone)."""
        pairs = [
            tantivy.Query.term_query(self.schema, PAIR_FIELDS[field], pair)
            for pair in word_pairs([str(w) for w in words])
        ]
        if len(pairs) == 1:
            return pairs[0]
        exact = tantivy.Query.const_score_query(
            tantivy.Query.phrase_query(self.schema, field, words), 0.0
        )
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, q) for q in pairs] + [(tantivy.Occur.Must, exact)]
        )

    def _query(self, parsed: ParsedQuery) -> tantivy.Query | None:
        groups = []
        for group in parsed.groups:
            terms = [self._term(t, parsed.lang) for t in group]
            if any(t is None for t in terms):
                continue  # a required word the index can never contain
            groups.append(
                tantivy.Query.boolean_query([(tantivy.Occur.Must, t) for t in terms if t])
            )
        if not groups:
            return None
        top = groups[0]
        if len(groups) > 1:
            top = tantivy.Query.boolean_query([(tantivy.Occur.Should, g) for g in groups])
        excluded = [q for q in (self._term(t) for t in parsed.excluded) if q is not None]
        if excluded:
            clauses = [(tantivy.Occur.Must, top)]
            clauses += [(tantivy.Occur.MustNot, q) for q in excluded]
            top = tantivy.Query.boolean_query(clauses)
        if parsed.lang:
            language = tantivy.Query.term_query(self.schema, "lang", parsed.lang)
            top = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, top), (tantivy.Occur.Must, language)]
            )
        return top


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
    _register(index, text_analyzer())
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
    _register(index, analyzer)
    authority = bool(manifest.get("authority"))
    return TantivyIndex(index, index.schema, analyzer, authority, str(manifest["build"]), manifest)


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


def index_lag(conn: object) -> int | None:
    """Changes of the store the derived index has not applied (None: no index of this
    format, or not an SQLite store: PostgreSQL's own index never lags)."""
    if not isinstance(conn, sqlite3.Connection):
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
    ``pending`` changes of the store not yet applied, ``following`` while an updater is."""
    db = db_path_of(conn)
    folder = index_dir(db) if db is not None else None
    if folder is None or not folder.is_dir():
        return {"built": False, "current": False, "path": str(folder)}
    opened = _open(folder)
    if opened is None:
        return {"built": False, "current": False, "path": str(folder), "unreadable": True}
    waiting = pending(conn, opened.applied)
    return {
        **opened.manifest,
        "built": True,
        "current": waiting == 0,
        "pending": waiting,
        "following": is_followed(opened.manifest, time.time()),
        "path": str(folder),
    }


@contextmanager
def writing(db: Path) -> Iterator[None]:
    """Hold the right to write ``db``'s derived index (a lock file beside it) for the
    block: one rebuild or updater at a time; :class:`IndexUnavailable` if another has it."""
    lock = db.with_name(db.name + ".search.lock")
    with lock.open("a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexUnavailable(
                f"another process (an index updater or rebuild) is writing {index_dir(db)}"
            ) from None
        yield


#: The join of :func:`page_rows` that reads :func:`anchor_table`'s link text.
ANCHOR_JOIN = " LEFT JOIN temp.anchor_text t ON t.target = p.url"


def anchor_table(conn: sqlite3.Connection, targets: list[str] | None = None) -> None:
    """A temporary table: target URL -> text of links to it from other hosts (an
    unlabeled link's text: the words of the target's URL, :func:`url_words`); of every
    target, or of ``targets`` only (read through the ``links_target`` index)."""
    only = "" if targets is None else f" AND l.target IN ({', '.join('?' * len(targets))})"
    conn.execute("DROP TABLE IF EXISTS temp.anchor_text")
    conn.create_function("geminibot_url_words", 1, url_words, deterministic=True)
    conn.execute(
        "CREATE TEMP TABLE anchor_text AS"
        " SELECT target, substr(group_concat(label, ' | '), 1, ?) AS text FROM ("
        "  SELECT DISTINCT target, host, label FROM ("
        "   SELECT l.target AS target, p.host AS host, CASE WHEN l.label != '' THEN l.label"
        "   ELSE geminibot_url_words(l.target) END AS label"
        "   FROM links l JOIN pages p ON p.id = l.page_id"
        "   WHERE l.target NOT LIKE 'gemini://' || p.host || '/%'"
        f"   AND l.target != 'gemini://' || p.host{only}"
        "  ) WHERE label != ''"
        " ) GROUP BY target",
        (MAX_ANCHOR_CHARS, *(targets or ())),
    )
    conn.execute("CREATE INDEX temp.anchor_target ON anchor_text (target)")


def page_rows(conn: sqlite3.Connection, anchors: str, join: str, where: str) -> str:
    """The query of pages as :func:`page_document` takes them: id, title, headings,
    ``anchors`` (an expression over ``join``), body, url, authority score, the MIME type's
    lang parameter; for the pages with text matching ``where``."""
    authority = (
        "(SELECT score FROM authority a WHERE a.url = p.url)" if has_authority(conn) else "0.0"
    )
    return (
        f"SELECT p.id, f.title, f.headings, {anchors}, f.body, f.url,"
        f" coalesce({authority}, 0.0), p.lang"
        f" FROM pages p JOIN pages_fts f ON f.rowid = p.id{join}"
        f" WHERE p.text_indexed AND {where}"
    )


#: One page as :func:`page_rows` reads it: id, title, headings, link text from other
#: hosts, body, URL, authority score, the MIME type's lang parameter.
PageRow = tuple[int, str, str, str, str, str, float, "str | None"]


def page_document(builder: DocumentBuilder, row: PageRow) -> tantivy.Document:
    """The index's document of one page, from a row of :func:`page_rows`: the one place
    that says what a document holds, for a rebuild and for an updater alike."""
    page_id, title, headings, anchors, body, url, score, mime_lang = row
    doc = tantivy.Document()
    doc.add_unsigned("id", int(page_id))
    own: list[str] = []  # the page's own words: title, headings, body
    for name, value in (
        ("title", title),
        ("headings", headings),
        ("anchors", anchors),
        ("body", body),
        ("url", url),
    ):
        doc.add_text(name, value or "")
        words = builder.analyzer.analyze(value) if value else []
        doc.add_text(PAIR_FIELDS[name], " ".join(word_pairs(words)))
        if name in OWN_FIELDS:
            own += words
    lang = page_language(mime_lang, body or title or "")
    if lang is not None:
        doc.add_text("lang", lang)
        builder.languages[lang] += 1
        if lang in STEMMERS:
            own_text = "\n".join((title or "", headings or "", body or ""))
            doc.add_text("stems", " ".join(builder.stemmer(lang).analyze(own_text)))
    doc.add_float("authority", float(score))
    doc.add_float("stuffing", stuffing(own))
    return doc


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
    with_authority = has_authority(conn)
    build = folder.with_name(folder.name + f".building-{os.getpid()}")
    shutil.rmtree(build, ignore_errors=True)
    try:
        (build / "tantivy").mkdir(parents=True)
        index = tantivy.Index(_schema(), path=str(build / "tantivy"))
        builder = DocumentBuilder()
        _register(index, builder.analyzer)
        writer = index.writer(WRITER_HEAP, WRITER_THREADS)
        say("collecting link text")
        anchor_table(conn)
        sql = page_rows(conn, "coalesce(t.text, '')", ANCHOR_JOIN, "1")
        rows = conn.execute(sql)
        count = 0
        while batch := rows.fetchmany(BATCH):
            for row in batch:
                writer.add_document(page_document(builder, row))
            count += len(batch)
            say(f"indexed {count} pages")
        writer.commit()
        writer.wait_merging_threads()
        conn.execute("DROP TABLE IF EXISTS temp.anchor_text")
        manifest: dict[str, object] = {
            "format": FORMAT,
            "build": secrets.token_hex(8),
            "applied": applied,
            "pages": count,
            "authority": with_authority,
            "languages": dict(builder.languages.most_common()),
            "built_at": time.time(),
            "seconds": round(time.perf_counter() - started, 3),
        }
        write_manifest(build, manifest)
        old = folder.with_name(folder.name + f".old-{os.getpid()}")
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
