"""A census rendered: as text for a terminal (80 columns), as JSON for scripts, as gemtext
(tables in preformatted blocks) for a capsule; and the history of censuses as series.
Every label that came from the network (hosts, issuers, MIME types) is escaped for a
terminal in text, and in gemtext also kept inside its table's block
(:func:`~geminibot.gemini.gemtext.preformatted_line`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from geminibot.census.model import Census, Figure, Section, Value
from geminibot.cliutil import LINE_WIDTH, clipped, terminal_safe, wrapped
from geminibot.gemini.gemtext import TOGGLE, preformatted_line

#: Width of a distribution's labels in a table (the count takes the rest).
LABEL_WIDTH = 56


def when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _number(value: int | float | str) -> str:
    if isinstance(value, str):
        return terminal_safe(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def _table(
    value: dict[str, int | float], indent: str, escape: Callable[[str], str] = terminal_safe
) -> list[str]:
    """A distribution's lines, each label ``escape``-d then cut to fit 80 columns."""
    if not value:
        return [f"{indent}(none)"]
    width = LINE_WIDTH - len(indent) - 12
    return [
        f"{indent}{clipped(escape(label), width):<{width}} {_number(n):>11}"
        for label, n in value.items()
    ]


def _preformatted_label(label: str) -> str:
    """A label escaped for a terminal and kept inside a gemtext preformatted block."""
    return preformatted_line(terminal_safe(label))


def _value_lines(value: Value, indent: str) -> list[str]:
    if isinstance(value, dict):
        return _table(value, indent)
    text = "not known" if value is None else _number(value)
    width = LINE_WIDTH - len(indent)
    return [f"{indent}{text[i : i + width]}" for i in range(0, max(len(text), 1), width)]


def _heading(census: Census) -> list[str]:
    what = f"Census of {census.host}" if census.host else "Census of the crawl"
    return [
        what,
        f"taken {when(census.taken_at)}; crawl window",
        f"{when(census.window_start)} to {when(census.window_end)}",
    ]


def _figure_text(figure: Figure, shared: bool) -> list[str]:
    """A figure's lines; its window is said by the section's heading when ``shared``."""
    head = figure.what if shared or not figure.window else f"{figure.what} ({figure.window})"
    if not isinstance(figure.value, dict):
        line = f"  {head}: {_value_lines(figure.value, '')[0]}"
        if len(line) <= LINE_WIDTH:
            return [line]
    return [*wrapped(head, "  ", "    "), *_value_lines(figure.value, "    ")]


def shared_window(section: Section) -> str | None:
    """The window every figure of ``section`` counts over, or None when they differ."""
    windows = {f.window for f in section.figures}
    return windows.pop() if len(windows) == 1 else None


def as_text(census: Census) -> str:
    lines = _heading(census)
    for section in census.sections:
        window = shared_window(section)
        title = section.title.upper()
        lines += ["", *wrapped(f"{title} (over {window})" if window else title)]
        for figure in section.figures:
            lines += _figure_text(figure, window is not None)
    for note in census.notes:
        lines += ["", *wrapped(note)]
    return "\n".join(lines)


def as_json(census: Census) -> str:
    return json.dumps(census.as_json(), sort_keys=True)


def as_gemtext(census: Census) -> str:
    """Headings per section, each figure a line, each distribution a preformatted table."""
    title = f"Census of {census.host}" if census.host else "Census of Geminispace as crawled"
    lines = [f"# {title}", "", " ".join(_heading(census)[1:])]
    for section in census.sections:
        lines += ["", f"## {section.title}"]
        for figure in section.figures:
            head = f"{figure.what} ({figure.window})" if figure.window else figure.what
            if isinstance(figure.value, dict):
                table = _table(figure.value, "", _preformatted_label)
                lines += ["", head, f"{TOGGLE}{figure.key}", *table, TOGGLE]
            else:
                lines.append(f"* {head}: {_value_lines(figure.value, '')[0]}")
    lines += ["", *census.notes]
    return "\n".join(lines) + "\n"


def history_series(censuses: list[Census]) -> dict[str, list[tuple[float, Any]]]:
    """Each figure's values over time: ``key -> [(taken_at, value), ...]`` oldest first."""
    series: dict[str, list[tuple[float, Any]]] = {}
    for census in sorted(censuses, key=lambda c: c.taken_at):
        for key, figure in census.figures().items():
            series.setdefault(key, []).append((census.taken_at, figure.value))
    return series


def history_text(censuses: list[Census]) -> str:
    """The numeric figures over time, one block per figure (distributions: their total)."""
    if not censuses:
        return "no census kept yet: run 'geminibot census --keep' to keep one"
    lines = [f"{len(censuses)} censuses kept"]
    for key, points in history_series(censuses).items():
        lines += ["", key]
        for at, value in points:
            if isinstance(value, str):
                continue
            shown = sum(value.values()) if isinstance(value, dict) else value
            total = " (total)" if isinstance(value, dict) else ""
            text = "not known" if shown is None else _number(shown)
            lines.append(f"  {when(at)}  {text}{total}")
    return "\n".join(lines)
