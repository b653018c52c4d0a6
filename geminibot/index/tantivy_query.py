"""A parsed query (:mod:`geminibot.index.query`) as a tantivy query over the fields of
the index's documents (:mod:`geminibot.index.documents`).

Each word is searched in every text field with that field's boost (or only the one an
``intitle:``/``inurl:`` names), a single word also by its stems in the languages searched,
a phrase through the fields' word pairs; words typed side by side score more where a page
holds them so (:data:`PAIR_BOOST`); ``OR`` groups, excluded words, the language and the
scope operators (``site:``, ``mime:``, ``larger:``/``smaller:``) are clauses around them
that score nothing. The ranking of what it finds: :mod:`geminibot.index.tantivy_index`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tantivy

from geminibot.index.documents import FIELD_BOOSTS, PAIR_FIELDS, stem_analyzer, word_pairs
from geminibot.index.languages import STEMMERS
from geminibot.index.query import ParsedQuery, Scope, Term

#: bm25 boost of the stems field (the page's own words stemmed in its language), matched
#: by a query word's stems: a page saying "gardens" is found by "garden", and ranked by
#: its other words. At 0 a stem finds pages without lifting them: on real capsules any
#: weight on stems let pages sharing a rare word's stem outrank the page that has the
#: word (known-item MRR 0.988 at 1.0, 0.991 at 0.25, 0.992 at 0; docs/benchmarks.md).
STEM_BOOST = 0.0
#: Two words of a query typed side by side (``machine learning``) that a page holds so,
#: in a field, count PAIR_BOOST times that field's boost: in a body as much as a word of
#: the title and its heading together, so that the words side by side in a body outrank
#: one of them in a title ("The Machine Stops"), and in a title more still. Each pair is
#: one term of the field's pair field, an optional clause: pages without it are found
#: all the same. On the real capsules: heading MRR 1.000 and rare-word 0.995 at 15, as
#: without it; a boost of 15 in every field instead lost one heading query to a page
#: repeating its words ("the midi kit") in its body (docs/benchmarks.md).
PAIR_BOOST = 15.0


@dataclass
class QueryBuilder:
    """Builds the tantivy query of a parsed query for an index: its schema, its text
    analyzer, the languages whose stems a word is searched in when the query names none,
    and the stem analyzers made so far (by language)."""

    schema: tantivy.Schema
    analyzer: tantivy.TextAnalyzer
    languages: tuple[str, ...] = ()
    stemmers: dict[str, tantivy.TextAnalyzer] = field(default_factory=dict)

    def query(
        self, parsed: ParsedQuery, boosts: dict[str, float] = FIELD_BOOSTS
    ) -> tantivy.Query | None:
        """``parsed`` as one tantivy query, its text fields weighted by ``boosts``; None
        when it can match nothing (a required word the index can never contain)."""
        # Operators alone: every page in their scope, each scoring 1 (then its authority).
        groups = (
            []
            if parsed.groups
            else [tantivy.Query.const_score_query(tantivy.Query.all_query(), 1.0)]
        )
        for n, group in enumerate(parsed.groups):
            terms = [self._term(t, parsed.lang, boosts) for t in group]
            if any(t is None for t in terms):
                continue  # a required word the index can never contain
            run = parsed.runs[n] if n < len(parsed.runs) else ()
            clauses = [(tantivy.Occur.Must, t) for t in terms if t]
            groups.append(tantivy.Query.boolean_query(clauses + self._side_by_side(run, boosts)))
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
        filters = self._scope(parsed.scope)
        if parsed.lang:
            filters.append(
                (tantivy.Occur.Must, tantivy.Query.term_query(self.schema, "lang", parsed.lang))
            )
        if filters:
            top = tantivy.Query.boolean_query([(tantivy.Occur.Must, top), *filters])
        return top

    def _stems(self, word: str, lang: str | None) -> list[tantivy.Query]:
        """Term queries for ``word``'s stem in each language searched (``lang``, else every
        language of the index that has a stemmer)."""
        codes = [lang] if lang in STEMMERS else [] if lang else list(self.languages)
        stems: set[str] = set()
        for code in codes:
            if code not in self.stemmers:
                self.stemmers[code] = stem_analyzer(code)
            stems.update(self.stemmers[code].analyze(word))
        return [
            tantivy.Query.boost_query(
                tantivy.Query.term_query(self.schema, "stems", stem), STEM_BOOST
            )
            for stem in sorted(stems)
        ]

    def _term(
        self, term: Term, lang: str | None = None, boosts: dict[str, float] = FIELD_BOOSTS
    ) -> tantivy.Query | None:
        words: list[str | tuple[int, str]] = list(self.analyzer.analyze(term.text))
        if not words:
            return None
        per_field = []
        if term.field is not None:  # intitle:, inurl:
            boosts = {term.field: boosts[term.field]}
        elif not term.prefix and len(words) == 1:
            per_field += [(tantivy.Occur.Should, q) for q in self._stems(term.text, lang)]
        for name, boost in boosts.items():
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

    def _side_by_side(
        self, run: tuple[str, ...], boosts: dict[str, float]
    ) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        """Optional clauses scoring each two words of ``run`` (as typed) that a page
        holds side by side, in each field (:data:`PAIR_BOOST` times its boost)."""
        words = [str(w) for w in self.analyzer.analyze(" ".join(run))] if run else []
        return [
            (
                tantivy.Occur.Should,
                tantivy.Query.boost_query(
                    tantivy.Query.term_query(self.schema, PAIR_FIELDS[name], pair),
                    boost * PAIR_BOOST,
                ),
            )
            for pair in word_pairs(words)
            for name, boost in boosts.items()
            if boost
        ]

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

    def _scope(self, scope: Scope) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        """The clauses keeping the pages in ``scope`` (scoring nothing)."""
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []

        def either(queries: list[tantivy.Query]) -> tantivy.Query:
            if len(queries) == 1:
                return queries[0]
            return tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in queries])

        if scope.sites:
            clauses.append((tantivy.Occur.Must, either([self._site(s) for s in scope.sites])))
        clauses += [(tantivy.Occur.MustNot, self._site(s)) for s in scope.excluded_sites]
        if scope.mimes:
            types = [tantivy.Query.term_query(self.schema, "mime", m) for m in scope.mimes]
            clauses.append((tantivy.Occur.Must, either(types)))
        clauses += [
            (tantivy.Occur.MustNot, tantivy.Query.term_query(self.schema, "mime", m))
            for m in scope.excluded_mimes
        ]
        if scope.larger_than is not None or scope.smaller_than is not None:
            sizes = tantivy.Query.range_query(
                self.schema,
                "size",
                tantivy.FieldType.Unsigned,
                scope.larger_than,
                scope.smaller_than,
                include_lower=scope.larger_than is None,
                include_upper=scope.smaller_than is None,
            )
            clauses.append((tantivy.Occur.Must, sizes))
        return [
            (occur, tantivy.Query.const_score_query(q, 0.0) if occur == tantivy.Occur.Must else q)
            for occur, q in clauses
        ]

    def _site(self, pattern: str) -> tantivy.Query:
        """The pages whose host key matches the shell ``pattern``, or whose web origin's
        host name does (as :mod:`geminibot.index.scope`)."""
        if "*" not in pattern and "?" not in pattern:
            return tantivy.Query.term_set_query(
                self.schema,
                "site",
                [pattern, f"gemini://{pattern}", f"https://{pattern}", f"http://{pattern}"],
            )
        wild = {"*": ".*", "?": "."}
        body = "".join(wild.get(c) or (c if c.isalnum() else "\\" + c) for c in pattern)
        return tantivy.Query.regex_query(self.schema, "site", f"([a-z]+://)?{body}")
