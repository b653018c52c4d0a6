"""A census drawn as static SVG charts (matplotlib's SVG backend): each distribution as a
bar chart, each numeric figure kept over time as a line chart. No script in them: a
browser, an image viewer or a document shows them as they are.

Every chart is bounded whatever the store or the kept history holds: at most
:data:`MAX_BARS` bars (the smallest categories summed as "other"), at most
:data:`MAX_POINTS` points in a series, labels clipped to :data:`LABEL_CHARS` characters
and stripped of control characters (labels come from the network: hosts, issuers, MIME
types), and matplotlib's math notation (``$...$``) never interpreted.

Each figure is laid out by :func:`_laid_out` and drawn once: the texts that stand out of
its axes (tick labels, the title) are measured and the axes placed to leave them room.
Matplotlib's constrained layout would do the same from the tight box of every artist,
twice, in a full draw of the figure before the one written: twice the CPU
(docs/benchmarks.md, "Census charts: CPU per report").
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
    from matplotlib.backend_bases import RendererBase
    from matplotlib.container import BarContainer
    from matplotlib.figure import Figure
    from matplotlib.text import Text

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
#: A chart's width (inches).
WIDTH = 7.2
#: Space left between a chart's contents and its edges (points).
EDGE = 3.0
#: Space between a bar and its count (points).
COUNT_PAD = 3.0
#: A title's lines are at most this many characters (fewer when its chart is narrower).
TITLE_CHARS = 72

_BAR = "#3b6ea8"
_LINE = "#a8553b"
_RC: dict[str, Any] = {
    "svg.fonttype": "none",  # text as <text>: small, selectable, the browser's fonts
    "svg.hashsalt": "geminibot-census",  # the same ids each time: reproducible files
    "text.parse_math": False,  # a "$" from the network stays a dollar sign
    "font.family": "DejaVu Sans",
    "font.size": 10.0,
    "figure.autolayout": False,  # laid out by _laid_out, not by a layout engine
    "figure.constrained_layout.use": False,
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
        figure, axes = _figure(height)
        positions = list(range(len(bars)))
        drawn = axes.barh(positions, values, color=_BAR)
        axes.set_yticks(positions, labels=labels)
        axes.invert_yaxis()
        counts = axes.bar_label(
            drawn, labels=[_count(v) for v in values], padding=COUNT_PAD, fontsize=9
        )
        axes.margins(x=0.15)
        _plain(axes)
        axes.xaxis.set_visible(False)
        renderer = _laid_out(figure, axes, title)
        _room_for_counts(axes, drawn, counts, renderer)
        svg = _svg(figure)
    alt = f"{title}: " + "; ".join(f"{k} {_count(v)}" for k, v in zip(labels, values, strict=True))
    return Chart(key, title, alt, svg)


def series_chart(key: str, title: str, points: Sequence[tuple[float, float]]) -> Chart:
    """A line chart of one figure over the censuses kept (dates on the x axis)."""
    kept = thinned(points)
    with _DRAWING, _rc():
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
        from matplotlib.ticker import MaxNLocator, StrMethodFormatter

        figure, axes = _figure(2.6)
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
        _laid_out(figure, axes, title)
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


def _wrapped(title: str, chars: int) -> str:
    """A chart's title (the census's own words) in lines of at most ``chars``."""
    return "\n".join(textwrap.wrap(title, chars)) or " "


def _rc() -> AbstractContextManager[None]:
    import matplotlib

    return matplotlib.rc_context(_RC)  # type: ignore[arg-type]


def _figure(height: float) -> tuple[Figure, Axes]:
    """A figure :data:`WIDTH` wide and ``height`` high (inches) with one axes, at 72 dots
    an inch (what the SVG is written at: positions measured in it are points)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH, height), dpi=72, layout=None)
    axes = figure.subplots()
    # the axes have no axis labels: not placed from the tick labels' sizes at each draw
    axes.xaxis.set_label_coords(0.5, 0.0)
    axes.yaxis.set_label_coords(0.0, 0.5)
    return figure, axes


def _laid_out(figure: Figure, axes: Axes, title: str) -> RendererBase:
    """``axes`` placed in ``figure`` so that its tick labels and offset texts fit
    :data:`EDGE` points inside the figure's edges, with ``title`` above them, left-aligned
    with the axes and wrapped to the width it has there. The renderer that measured them
    (an SVG one: the metrics the file is written with).

    Placed twice or more (at most four times), until nothing moves: the ticks a locator
    chooses depend on the axes' height, a title's lines on its width."""
    from matplotlib.backends.backend_svg import RendererSVG
    from matplotlib.transforms import Bbox

    renderer = RendererSVG(figure.bbox.width, figure.bbox.height, io.StringIO())  # type: ignore[no-untyped-call]
    chars, margins = TITLE_CHARS, (-1.0, -1.0, -1.0, -1.0)
    for _ in range(4):
        box = axes.get_window_extent(renderer)
        axis_boxes = [a.get_tightbbox(renderer) for a in (axes.xaxis, axes.yaxis)]
        out = Bbox.union([box, *(b for b in axis_boxes if b is not None)])
        # the title above the y axis's offset text (a "1e8" over its tick labels), if any
        offset = axes.yaxis.get_offset_text()
        above = offset.get_window_extent(renderer).y1 - box.y1 if offset.get_text() else 0.0
        heading = axes.set_title(_wrapped(title, chars), loc="left", y=1.0, pad=6.0 + above)
        heading_box = heading.get_window_extent(renderer)
        left, bottom = EDGE + box.x0 - out.x0, EDGE + box.y0 - out.y0
        right, top = EDGE + out.x1 - box.x1, EDGE + max(out.y1, heading_box.y1) - box.y1
        room = figure.bbox.width - EDGE - left
        fits = heading_box.width <= room or chars <= 10
        moved = max(abs(a - b) for a, b in zip((left, bottom, right, top), margins, strict=True))
        if moved < 0.1 and fits:
            break
        if not fits:
            chars = max(10, int(chars * room / heading_box.width))
        margins = (left, bottom, right, top)
        width, height = figure.bbox.width, figure.bbox.height
        figure.subplots_adjust(
            left=left / width, bottom=bottom / height, right=1 - right / width, top=1 - top / height
        )
    return renderer


def _room_for_counts(
    axes: Axes, bars: BarContainer, counts: Sequence[Text], renderer: RendererBase
) -> None:
    """The value axis of a bar chart extended, if need be, so that each bar's count fits
    beside it inside the axes."""
    width = axes.get_window_extent(renderer).width
    needed = max(
        (
            bar.get_width()
            * width
            / max(width - COUNT_PAD - count.get_window_extent(renderer).width, 1.0)
            for bar, count in zip(bars, counts, strict=True)
        ),
        default=0.0,
    )
    if needed > axes.get_xlim()[1]:
        axes.set_xlim(right=needed)


def _plain(axes: Axes) -> None:
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None}, facecolor="white")
    return out.getvalue()
