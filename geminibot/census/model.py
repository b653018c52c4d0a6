"""A census as data: sections of figures, each saying what it counts and over which window.

A census is computed once (:mod:`geminibot.census.figures`) and rendered by separate
renderers (:mod:`geminibot.census.render`: text, JSON, gemtext), so that another (an HTML
report) reads the same tree. A figure's ``value`` is a number, a text, None (not known
in this store), or a mapping of label to number (a distribution, in the order to show it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: A figure's value: a count or measure, a text (a fingerprint, a date), None (not known),
#: or a labelled distribution.
Value = int | float | str | None | dict[str, int | float]


def distribution(
    rows: Iterable[tuple[object, int]], limit: int | None = None
) -> dict[str, int | float]:
    """Rows of (label, count) as a distribution, largest first (ties by label), at most
    ``limit`` labels; the counts of a label given twice add up."""
    totals: Counter[str] = Counter()
    for label, n in rows:
        totals[str(label)] += int(n)
    pairs = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    return dict(pairs[:limit] if limit is not None else pairs)


@dataclass(frozen=True)
class Figure:
    """One figure: ``key`` (stable, for scripts and history), what it counts, its window."""

    key: str
    what: str
    value: Value
    window: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"what": self.what, "window": self.window, "value": self.value}


@dataclass(frozen=True)
class Section:
    """A titled group of figures, in the order a report shows them."""

    title: str
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Census:
    """A census of a crawl store, taken at ``taken_at`` (Unix seconds) over the crawl's
    window (``window_start`` to ``window_end``: its first and last recorded answers); for
    one host (``host``) or the whole crawl."""

    taken_at: float
    window_start: float | None
    window_end: float | None
    sections: tuple[Section, ...]
    host: str | None = None
    notes: tuple[str, ...] = field(default=())

    def figures(self) -> dict[str, Figure]:
        return {f.key: f for s in self.sections for f in s.figures}

    def value(self, key: str) -> Value:
        return self.figures()[key].value

    def as_json(self) -> dict[str, Any]:
        return {
            "taken_at": self.taken_at,
            "window": {"start": self.window_start, "end": self.window_end},
            "host": self.host,
            "figures": {k: f.as_json() for k, f in self.figures().items()},
            "sections": [
                {"title": s.title, "keys": [f.key for f in s.figures]} for s in self.sections
            ],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Census:
        """A census as :meth:`as_json` wrote it (the history keeps them so)."""
        figures = data.get("figures", {})
        sections = tuple(
            Section(
                str(s["title"]),
                tuple(
                    Figure(k, str(figures[k]["what"]), figures[k]["value"], figures[k]["window"])
                    for k in s["keys"]
                    if k in figures
                ),
            )
            for s in data.get("sections", [])
        )
        window = data.get("window", {})
        return cls(
            float(data["taken_at"]),
            window.get("start"),
            window.get("end"),
            sections,
            data.get("host"),
            tuple(data.get("notes", ())),
        )
