"""Why a result ranks where it does: its score in parts that add up to it.

A result's :class:`ScoreParts` are additive: each text field's share (title, headings,
link text, body, URL), then what each factor applied to the text score added (the
page's link authority, the keyword-stuffing penalty), so that their sum is the score
shown. Each engine fills them its own way:

- the tantivy index from tantivy's own explanation of the score (:func:`field_parts`):
  a sum over fields, exact;
- FTS5 and PostgreSQL from the score of each column alone (bm25, ``ts_rank_cd``): their
  formulas are not sums over columns (a word's frequency is summed over the columns
  before it saturates), so each column's share is its score alone scaled so that the
  shares add up to the text score (:func:`scaled`).

Scores here are relevance, higher is better (results carry it negated, lower is
better, as FTS5's bm25).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime

#: The names parts are shown under, by field of the index or column of a store.
SHOWN = {
    "title": "title",
    "headings": "headings",
    "anchors": "link text",
    "body": "body",
    "url": "url",
    "stems": "stems",
}
#: Part names of the factors applied to the text score.
AUTHORITY = "authority"
STUFFING = "stuffing"

ScoreParts = dict[str, float]

_FIELD = re.compile(r"field=(\d+)")


def field_parts(explanation: str, fields: tuple[str, ...]) -> ScoreParts:
    """The text score of a tantivy explanation (its JSON) by field: each term query's
    value goes to its field (``title_pairs`` to ``title``), and every sum, boost and
    product above it is spread over its fields in proportion; ``fields`` are the
    schema's fields in their order."""
    tree = json.loads(explanation)

    def walk(node: Mapping[str, object]) -> ScoreParts:
        value = float(str(node.get("value", 0.0)))
        for context in node.get("context", []) or []:  # type: ignore[attr-defined]
            found = _FIELD.search(str(context))
            if found is not None and int(found.group(1)) < len(fields):
                name = fields[int(found.group(1))].removesuffix("_pairs")
                return {SHOWN.get(name, name): value} if value else {}
        merged: ScoreParts = {}
        for child in node.get("details", []) or []:  # type: ignore[attr-defined]
            for name, part in walk(child).items():
                merged[name] = merged.get(name, 0.0) + part
        if not value:
            return {}
        return scaled(merged, value) if merged else {"other": value}

    return walk(tree)


def scaled(parts: ScoreParts, total: float) -> ScoreParts:
    """``parts`` multiplied so that they add up to ``total`` (all of it to "text" when
    they are all 0)."""
    whole = sum(parts.values())
    if not whole:
        return {"text": total} if total else {}
    return {name: part * total / whole for name, part in parts.items() if part}


def with_factors(text: ScoreParts, *factors: tuple[str, float]) -> ScoreParts:
    """The parts of a score that is the sum of ``text`` times each factor in turn: each
    factor's part is what it added (negative when it lowered the score)."""
    parts = dict(text)
    score = sum(text.values())
    for name, factor in factors:
        if factor != 1.0:
            parts[name] = parts.get(name, 0.0) + score * (factor - 1.0)
            score *= factor
    return parts


def explain_lines(score: float, parts: ScoreParts | None, fetched_at: float) -> list[str]:
    """How ``score`` (relevance) is made, and when the page was fetched:
    ``score 12.3 = title 10.1 + body 1.2 + authority 1.0``, ``fetched 2026-...``."""
    when = datetime.fromtimestamp(fetched_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    shown = f"score {score:.4g}"
    for n, (name, value) in enumerate((parts or {}).items()):
        sign = "-" if value < 0 else "+"
        shown += (" = " if n == 0 else f" {sign} ") + (
            f"{'-' if value < 0 else ''}{name} {abs(value):.4g}"
            if n == 0
            else f"{name} {abs(value):.4g}"
        )
    return [shown, f"fetched {when}"]
