"""A census as an HTML report: every figure in tables, each distribution and each figure
kept over time as a static SVG chart (:mod:`geminibot.census.charts`), readable without
JavaScript and offline.

:func:`build_report` draws the charts once; :func:`report_body` is the report as an HTML
fragment (the portal's ``/census`` puts it in its own page, the charts inline as ``data:``
images), :func:`report_document` a page of its own, :func:`write_report` writes
``index.html`` and ``charts/*.svg`` into a folder (``geminibot census --html DIR``).
Every text that came from the network (hosts, issuers, MIME types) is escaped.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from geminibot.census.charts import NOT_CATEGORIES, Chart, census_charts, history_charts
from geminibot.census.model import Census, Figure, Section, Value
from geminibot.census.render import when
from geminibot.cliutil import counted

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: The order of a measure's rows (the sizes of ``uris.size_bytes``).
MEASURES = {name: i for i, name in enumerate(("mean", "p50", "p90", "p99", "max"))}
#: The folder of ``DIR`` that holds the chart files.
CHARTS = "charts"
#: The report's own style sheet (a page of its own; the portal uses its own).
STYLE = """
body{margin:0 auto;max-width:52rem;padding:1rem;background:#fdfdfb;color:#1d1d1f;
font:1rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
h1{font-size:1.8rem}h2{font-size:1.35rem;margin-top:2rem;border-bottom:1px solid #d5d9e0}
table{border-collapse:collapse;margin:.5rem 0}
td,th{padding:.15rem .6rem;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.window{color:#5b5b66;font-size:.85rem}
figure{margin:1rem 0}img{max-width:100%;height:auto;border:1px solid #e5e7eb}
figcaption{color:#5b5b66;font-size:.9rem}
""".strip()
#: What a page of its own may load: its style sheet, its images (files or inline), no
#: script, no connection anywhere.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:"


@dataclass(frozen=True)
class Report:
    """A census with its charts drawn: a bar chart per distribution (by figure key), a
    line chart per figure kept over time, and how many censuses the history holds."""

    census: Census
    charts: dict[str, Chart]
    series: tuple[Chart, ...]
    kept: int


def build_report(census: Census, history: Sequence[Census] = ()) -> Report:
    """The report of ``census``, with the series of ``history`` (the censuses kept)."""
    charts = {chart.key: chart for chart in census_charts(census)}
    return Report(census, charts, tuple(history_charts(history)), len(history))


def esc(text: str) -> str:
    """``text`` for HTML content or a quoted attribute: markup escaped, control characters
    (escape sequences, line breaks) shown as U+FFFD, a lone surrogate as ``?``."""
    text = _CONTROLS.sub("\ufffd", text.encode("utf-8", "replace").decode("utf-8"))
    return html.escape(text, quote=True)


def data_uri(chart: Chart) -> str:
    """``chart`` as a ``data:`` URL, to put it inline in a page."""
    return "data:image/svg+xml;base64," + base64.b64encode(chart.svg.encode()).decode()


def chart_file(chart: Chart) -> str:
    """Where :func:`write_report` puts ``chart``, relative to ``index.html``."""
    return f"{CHARTS}/{chart.file_name}"


def title_of(census: Census) -> str:
    return f"Census of {census.host}" if census.host else "Census of Geminispace as crawled"


def report_body(report: Report, src: Callable[[Chart], str] = chart_file) -> str:
    """The report as an HTML fragment, each chart an ``<img>`` whose address is
    ``src(chart)``."""
    census = report.census
    parts = [
        f"<h1>{esc(title_of(census))}</h1>",
        f"<p>Taken {esc(when(census.taken_at))}, over the crawl's window from "
        f"{esc(when(census.window_start))} to {esc(when(census.window_end))}."
        + ("" if census.host else f" {counted(report.kept, 'census', 'censuses')} kept.")
        + "</p>",
    ]
    for section in census.sections:
        parts.append(_section(section, report, src))
    parts.append(_history(report, src))
    parts += [f"<p>{esc(note)}</p>" for note in census.notes]
    return "\n".join(parts) + "\n"


def report_document(report: Report, src: Callable[[Chart], str] = chart_file) -> str:
    """The report as a page of its own (its style sheet inline, no script)."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title_of(report.census))}</title>\n<style>{STYLE}</style>\n"
        f"</head>\n<body>\n{report_body(report, src)}</body>\n</html>\n"
    )


def write_report(report: Report, folder: Path) -> list[Path]:
    """``folder/index.html`` and each chart as ``folder/charts/KEY.svg`` (the folder made
    if missing; chart files of an earlier report in ``charts/`` removed); the files
    written."""
    charts_dir = folder / CHARTS
    charts_dir.mkdir(parents=True, exist_ok=True)
    for stale in charts_dir.glob("*.svg"):
        stale.unlink()
    written = []
    for chart in (*report.charts.values(), *report.series):
        path = charts_dir / chart.file_name
        path.write_text(chart.svg, encoding="utf-8")
        written.append(path)
    index = folder / "index.html"
    index.write_text(report_document(report), encoding="utf-8")
    return [index, *written]


def _section(section: Section, report: Report, src: Callable[[Chart], str]) -> str:
    scalars = [f for f in section.figures if not isinstance(f.value, dict)]
    parts = [f"<section>\n<h2>{esc(section.title)}</h2>"]
    if scalars:
        rows = "\n".join(
            f'<tr><td>{esc(f.what)}</td><td class="n">{esc(_shown(f.key, f.value))}</td>'
            f'<td class="window">{esc(f.window)}</td></tr>'
            for f in scalars
        )
        parts.append(
            f"<table>\n<tr><th>figure</th><th>value</th><th>window</th></tr>\n{rows}\n</table>"
        )
    for figure in section.figures:
        if isinstance(figure.value, dict):
            parts.append(_distribution(figure, report.charts.get(figure.key), src))
    parts.append("</section>")
    return "\n".join(parts)


def _distribution(figure: Figure, chart: Chart | None, src: Callable[[Chart], str]) -> str:
    assert isinstance(figure.value, dict)
    window = f'<span class="window">({esc(figure.window)})</span>'
    caption = f"{esc(figure.what)} {window}"
    rows = "\n".join(
        f'<tr><td>{esc(label)}</td><td class="n">{esc(_shown("", n))}</td></tr>'
        for label, n in _in_order(figure.key, figure.value)
    )
    table = f"<table>\n{rows}\n</table>" if rows else "<p>(none)</p>"
    if chart is None:
        return f'<figure id="{esc(figure.key)}">\n<figcaption>{caption}</figcaption>\n{table}\n</figure>'
    return (
        f'<figure id="{esc(figure.key)}">\n<img src="{esc(src(chart))}" alt="{esc(chart.alt)}">\n'
        f"<figcaption>{window}</figcaption>\n"
        f"<details><summary>The numbers</summary>\n{table}\n</details>\n</figure>"
    )


def _history(report: Report, src: Callable[[Chart], str]) -> str:
    parts = ["<section>\n<h2>History</h2>"]
    if report.census.host is not None:
        parts.append("<p>A capsule's census is not kept: its figures have no history.</p>")
    elif not report.series:
        parts.append(
            f"<p>{counted(report.kept, 'census', 'censuses')} kept: a figure is drawn over time from two on "
            "('geminibot census --keep' keeps one).</p>"
        )
    for chart in report.series:
        parts.append(
            f'<figure id="history-{esc(chart.key)}">\n<img src="{esc(src(chart))}" '
            f'alt="{esc(chart.alt)}">\n<figcaption>over the '
            f"{counted(report.kept, 'census', 'censuses')} kept</figcaption>\n</figure>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def _in_order(key: str, value: dict[str, int | float]) -> list[tuple[str, int | float]]:
    """A distribution's rows largest first (a census read back from the store has its
    labels in alphabetical order); a measure's (sizes) as :data:`MEASURES` lists them."""
    if key in NOT_CATEGORIES:
        return sorted(value.items(), key=lambda kv: MEASURES.get(kv[0], len(MEASURES)))
    return sorted(value.items(), key=lambda kv: (-kv[1], kv[0]))


def _shown(key: str, value: Value) -> str:
    if value is None:
        return "not known"
    if isinstance(value, bool | str):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.2%}" if key.endswith("_share") else f"{value:,.1f}"
    return str(value)
