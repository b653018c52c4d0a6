"""One page of the store as a document of the derived tantivy index: its schema, the
analyzers of its text, and the rows of the store a document is built from.

:func:`page_document` is the one place that says what a document holds, for a rebuild
and an updater alike (:mod:`geminibot.index.tantivy_index`,
:mod:`geminibot.index.updater`). Fields: title, headings, **anchors** (the text of links
from other hosts pointing to the page, one copy per linking host and label), body and
url, each scored by bm25 and summed with :data:`FIELD_BOOSTS`; beside each, a **pair
field** (``body_pairs``...) holding every two neighbouring words of it as one token
(``ba_babore``), so that a phrase becomes term lookups (:func:`word_pairs`); **stems**,
the page's own words stemmed in its language (:mod:`geminibot.index.languages`);
**lang**, the page's language, which ``lang:CODE`` requires; the fields the other operators of a
query filter on (:mod:`geminibot.index.query`): **site**, the host key in lower case
(``site:``), **mime**, the MIME type and its major type (``mime:image``), **size** in
bytes; and, as fast fields read by the re-rank, the page's keyword **stuffing** share
and its **host** key, by which the link-authority weights are looked up
(:mod:`geminibot.index.weights`).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from itertools import pairwise

import tantivy

from geminibot.index.languages import STEMMERS, page_language
from geminibot.index.text import url_words
from geminibot.index.weights import host_key
from geminibot.store.pages import indexed_text

#: bm25 boosts per field (FTS5's column weights, plus anchor text).
FIELD_BOOSTS = {"title": 10.0, "headings": 5.0, "anchors": 1.0, "body": 1.0, "url": 2.0}
#: The boosts a page of a host with no trust path is re-scored with (search spam): its
#: title, headings and URL count as its body, and link text to it counts for nothing, so
#: that none of them puts it first by itself (:mod:`geminibot.index.tantivy_index`).
UNTRUSTED_BOOSTS = {"title": 1.0, "headings": 1.0, "anchors": 0.0, "body": 1.0, "url": 1.0}
#: The fields holding the page's own words (not others' link text, nor its URL).
OWN_FIELDS = ("title", "headings", "body")

#: The pair field beside each text field (see :func:`word_pairs`).
PAIR_FIELDS = {name: name + "_pairs" for name in FIELD_BOOSTS}
#: Joins two words into one token of a pair field: the analyzer's words are letters and
#: digits only, so it cannot occur inside one.
PAIR_JOINER = "_"

#: Keyword stuffing: a page whose most frequent word makes up more than this share of its
#: own words (title, headings, body), and occurs at least STUFFED_MIN_COUNT times, has its
#: re-ranked score multiplied by ``STUFFED_SHARE / share`` (1/3 for a page of one word
#: repeated). Natural text stays below it: the commonest English word is about 6% of
#: running text, and text whose words follow Zipf's law stays well below 25%.
#: bm25 saturates a word's frequency per field and then tantivy sums the fields, so a
#: page repeating a word in title, headings and body gains in each (docs/benchmarks.md).
STUFFED_SHARE = 0.3
STUFFED_MIN_COUNT = 20

#: Longest anchor text kept per page (characters): a page linked from everywhere gets a
#: representative sample, not an unbounded field.
MAX_ANCHOR_CHARS = 20_000
_TOKENIZER = "geminibot"
_PAIR_TOKENIZER = "geminibot_pairs"
_RAW_TOKENIZER = "raw"


def text_analyzer() -> tantivy.TextAnalyzer:
    # FTS5's unicode61 remove_diacritics: words of letters and digits, lower case, folded.
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


def stem_analyzer(code: str) -> tantivy.TextAnalyzer:
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


#: The index's fields in the order :func:`schema` adds them: tantivy numbers them so
#: (an explanation of a score names a field by that number).
FIELD_ORDER = (
    "id",
    *[name for text in FIELD_BOOSTS for name in (text, PAIR_FIELDS[text])],
    *("stems", "lang", "site", "mime", "size", "host", "stuffing"),
)


def schema() -> tantivy.Schema:
    """The index's fields (see the module's docstring)."""
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
    builder.add_text_field("site", tokenizer_name=_RAW_TOKENIZER)
    builder.add_text_field("mime", tokenizer_name=_RAW_TOKENIZER)
    builder.add_unsigned_field("size", indexed=True, fast=True)
    builder.add_unsigned_field("host", fast=True)
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
            self._stemmers[code] = stem_analyzer(code)
        return self._stemmers[code]


def register(index: tantivy.Index, analyzer: tantivy.TextAnalyzer) -> None:
    """Give ``index`` the analyzers its text fields name."""
    index.register_tokenizer(_TOKENIZER, analyzer)
    index.register_tokenizer(_PAIR_TOKENIZER, _pair_analyzer())


def anchor_table(conn: sqlite3.Connection, targets: list[str] | None = None) -> None:
    """A temporary table: target URL -> text of links to it from other hosts (an
    unlabeled link's text: the words of the target's URL, :func:`url_words`); of every
    target, or of ``targets`` only (read through the ``links_target`` index). Once link
    authority has been computed, only from pages with a trust path (a score above 0):
    a farm of hosts nothing trusted links to gives no page its words (search spam)."""
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
        "   AND (NOT EXISTS (SELECT 1 FROM authority)"
        "    OR EXISTS (SELECT 1 FROM authority a WHERE a.url = p.url AND a.score > 0))"
        "  ) WHERE label != ''"
        " ) GROUP BY target",
        (MAX_ANCHOR_CHARS, *(targets or ())),
    )
    conn.execute("CREATE INDEX temp.anchor_target ON anchor_text (target)")


def page_rows(where: str) -> str:
    """The query of pages as :func:`page_document` takes them: id, title, headings, link
    text (from :func:`anchor_table`, which must exist), body, url, host, the MIME type's
    lang parameter, the MIME type, the size; for the pages with text matching ``where``."""
    return (
        "SELECT p.id, f.title, f.headings, coalesce(t.text, ''), f.body, f.url, p.host, p.lang,"
        " p.mime, p.size"
        " FROM pages p JOIN pages_fts f ON f.rowid = p.id"
        " LEFT JOIN temp.anchor_text t ON t.target = p.url"
        f" WHERE p.text_indexed AND {where}"
    )


#: One page as :func:`page_rows` reads it: id, title, headings, link text from other
#: hosts, body, URL, host (as ``pages.host`` spells it), the MIME type's lang parameter,
#: the MIME type (without parameters), the size in bytes.
PageRow = tuple[int, str, str, str, str, str, str, "str | None", "str | None", int]


def page_document(builder: DocumentBuilder, row: PageRow) -> tantivy.Document:
    """The index's document of one page, from a row of :func:`page_rows`: the one place
    that says what a document holds, for a rebuild and for an updater alike."""
    page_id, title, headings, anchors, body, url, host, mime_lang, mime, size = row
    # A store written before the bound holds longer texts: the index takes what it allows.
    headings, body = indexed_text(headings or ""), indexed_text(body or "")
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
    doc.add_text("site", host.lower())
    if mime:
        doc.add_text("mime", mime.lower())
        doc.add_text("mime", mime.lower().split("/", 1)[0])
    doc.add_unsigned("size", max(0, int(size or 0)))
    doc.add_unsigned("host", host_key(host))
    doc.add_float("stuffing", stuffing(own))
    return doc
