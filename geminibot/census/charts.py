"""A census drawn as static SVG charts (matplotlib's SVG backend): each distribution as a
bar chart, each numeric figure kept over time as a line chart. No script in them: a
browser, an image viewer or a document shows them as they are.

Every chart is bounded whatever the store or the kept history holds: at most
:data:`MAX_BARS` bars (the smallest categories summed as "other"), at most
:data:`MAX_POINTS` points in a series, labels clipped to :data:`LABEL_CHARS` characters
and stripped of control characters (labels come from the network: hosts, issuers, MIME
types), and matplotlib's math notation (``$...$``) never interpreted.
"""

from __future__ import annotations

import io
import textwrap
import threading
import unicodedata
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from geminibot.census.model import Census, Value

if TYPE_CHECKING:  # matplotlib is imported when a chart is drawn (commands start fast)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Most bars of a chart; the smallest categories beyond it are summed as "other".
MAX_BARS = 12
#: Most points of a series (more are thinned evenly, the first and last kept).
MAX_POINTS = 500
#: Longest label shown (longer ones end with an ellipsis).
LABEL_CHARS = 40
#: Most charts of one report (distributions and series together).
MAX_CHARTS = 80
#: The label of the bar that sums the categories beyond :data:`MAX_BARS`.
OTHER = "other"
#: Figures that are measures, not categories: shown as tables, not bars.
NOT_CATEGORIES = frozenset({"uris.size_bytes"})

_BAR = "#3b6ea8"
_LINE = "#a8553b"
_RC: dict[str, Any] = {
    "svg.fonttype": "none",  # text as <text>: small, selectable, the browser's fonts
    "svg.hashsalt": "geminibot-census",  # the same ids each time: reproducible files
    "text.parse_math": False,  # a "$" from the network stays a dollar sign
    "font.family": "DejaVu Sans",
    "font.size": 10.0,
}
#: matplotlib's global settings are read while drawing: one chart at a time.
_DRAWING = threading.Lock()


@dataclass(frozen=True)
class Chart:
    """One chart: the figure's ``key``, its title, a text alternative, the SVG itself."""

    key: str
    title: str
    alt: str
    svg: str

    @property
    def file_name(self) -> str:
        """A safe file name for it (its key is the census's own: letters, digits, dots)."""
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in self.key)
        return f"{safe}.svg"


def chart_label(text: str) -> str:
    """``text`` fit for a chart: control and format characters (line breaks, escapes,
    bidirectional overrides) replaced by U+FFFD, clipped to :data:`LABEL_CHARS`."""
    cleaned = "".join(
        "\ufffd" if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") else c
        for c in text[: LABEL_CHARS * 2]
    )
    return cleaned if len(cleaned) <= LABEL_CHARS else cleaned[: LABEL_CHARS - 1] + "\u2026"


def capped(distribution: dict[str, int | float], limit: int = MAX_BARS) -> dict[str, float]:
    """The ``limit - 1`` largest categories and the rest summed as :data:`OTHER` (when
    there are more than ``limit``), largest first."""
    pairs = sorted(
        ((str(k), float(v)) for k, v in distribution.items() if _is_number(v)),
        key=lambda kv: -kv[1],
    )
    if len(pairs) <= limit:
        return dict(pairs)
    kept = dict(pairs[: limit - 1])
    kept[OTHER] = kept.get(OTHER, 0.0) + sum(v for _, v in pairs[limit - 1 :])
    return kept


def thinned(
    points: Sequence[tuple[float, float]], limit: int = MAX_POINTS
) -> list[tuple[float, float]]:
    """At most ``limit`` of ``points``, evenly spaced, the first and the last kept."""
    if len(points) <= limit:
        return list(points)
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def bar_chart(key: str, title: str, distribution: dict[str, int | float]) -> Chart:
    """A horizontal bar chart of a distribution (largest at the top), its counts beside."""
    bars = capped(distribution)
    labels = [chart_label(k) for k in bars]
    values = list(bars.values())
    height = 0.9 + 0.32 * max(len(bars), 1)
    with _DRAWING, _rc():
        from matplotlib.figure import Figure

        figure = Figure(figsize=(7.2, height), layout="constrained")
        axes = figure.subplots()
        positions = list(range(len(bars)))
        drawn = axes.barh(positions, values, color=_BAR)
        axes.set_yticks(positions, labels=labels)
        axes.invert_yaxis()
        axes.bar_label(drawn, labels=[_count(v) for v in values], padding=3, fontsize=9)
        axes.margins(x=0.15)
        _plain(axes)
        axes.xaxis.set_visible(False)
        axes.set_title(_wrapped(title), loc="left")
        svg = _svg(figure)
    alt = f"{title}: " + "; ".join(f"{k} {_count(v)}" for k, v in zip(labels, values, strict=True))
    return Chart(key, title, alt, svg)


def series_chart(key: str, title: str, points: Sequence[tuple[float, float]]) -> Chart:
    """A line chart of one figure over the censuses kept (dates on the x axis)."""
    kept = thinned(points)
    with _DRAWING, _rc():
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator, StrMethodFormatter

        figure = Figure(figsize=(7.2, 2.6), layout="constrained")
        axes = figure.subplots()
        dates = [datetime.fromtimestamp(t, UTC) for t, _ in kept]
        axes.plot(dates, [v for _, v in kept], color=_LINE, marker="o", markersize=3)  # type: ignore[arg-type]
        locator = AutoDateLocator()  # type: ignore[no-untyped-call]
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
        top = max(v for _, v in kept)
        axes.set_ylim(bottom=0, top=None if top > 0 else 1)
        if all(float(v).is_integer() for _, v in kept):
            axes.yaxis.set_major_locator(MaxNLocator(integer=True))
            axes.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
        else:
            axes.ticklabel_format(axis="y", useOffset=False)
        axes.grid(axis="y", color="#dddddd")
        _plain(axes)
        axes.set_title(_wrapped(title), loc="left")
        svg = _svg(figure)
    first, last = kept[0], kept[-1]
    alt = (
        f"{title}: {len(points)} censuses, from {_count(first[1])} on {_day(first[0])} "
        f"to {_count(last[1])} on {_day(last[0])}"
    )
    return Chart(key, title, alt, svg)


def census_charts(census: Census) -> list[Chart]:
    """A bar chart of each distribution of ``census`` that has data, in the report's order
    (at most :data:`MAX_CHARTS`)."""
    charts = []
    for figure in census.figures().values():
        if figure.key in NOT_CATEGORIES or not _plottable(figure.value):
            continue
        assert isinstance(figure.value, dict)
        charts.append(bar_chart(figure.key, figure.what, figure.value))
        if len(charts) == MAX_CHARTS:
            break
    return charts


def history_charts(censuses: Sequence[Census], limit: int = MAX_CHARTS) -> list[Chart]:
    """A line chart of each numeric figure kept in two censuses or more (oldest first),
    at most ``limit``."""
    if len(censuses) < 2:
        return []
    series: dict[str, list[tuple[float, float]]] = {}
    titles: dict[str, str] = {}
    for census in sorted(censuses, key=lambda c: c.taken_at):
        for key, figure in census.figures().items():
            if _is_number(figure.value):
                assert isinstance(figure.value, int | float)
                series.setdefault(key, []).append((census.taken_at, float(figure.value)))
                titles[key] = figure.what
    charts = []
    for key, points in series.items():
        if len(points) < 2:
            continue
        charts.append(series_chart(key, titles[key], points))
        if len(charts) == limit:
            break
    return charts


def _plottable(value: Value) -> bool:
    return isinstance(value, dict) and any(_is_number(v) and v > 0 for v in value.values())


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d")


def _wrapped(title: str) -> str:
    """A chart's title (the census's own words) in lines that fit the chart's width."""
    return "\n".join(textwrap.wrap(title, 72)) or " "


def _rc() -> AbstractContextManager[None]:
    import matplotlib

    return matplotlib.rc_context(_RC)  # type: ignore[arg-type]


def _plain(axes: Axes) -> None:
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None}, facecolor="white")
    return out.getvalue()
