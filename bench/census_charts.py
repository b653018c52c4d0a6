"""What drawing a census report's charts costs: CPU per report of an old ``charts.py``
(by default main's, from git) beside this tree's, in one process, alternated round by
round, the median of the rounds per side. A report is what ``build_report`` draws: a bar
chart per distribution of the latest census, a line chart per number kept in two or more.

The censuses are those of the tests' report store (``tests/census_report_store.py``:
four kept a week apart, 12 bar charts and 30 line charts), or with ``--kept N`` N copies
of its latest census, each number grown by 1% a week (``census_speed.grown_history``).
CPU is this process's (``time.process_time``); matplotlib is imported, and each side
draws one report, before the clock starts.

    nice -n 10 .venv/bin/python bench/census_charts.py [--old main] [--reports 5] [--rounds 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from census_report_store import fill  # noqa: E402
from census_speed import grown_history  # noqa: E402
from machine import cpu_model  # noqa: E402

import geminibot.census.charts as new_charts  # noqa: E402
from geminibot.census.history import kept_censuses  # noqa: E402
from geminibot.census.model import Census  # noqa: E402
from geminibot.store.database import Database  # noqa: E402
from geminibot.store.db import connect  # noqa: E402

#: Where ``charts.py`` is in a tree.
CHARTS = "geminibot/census/charts.py"


def old_charts(old: str, folder: Path) -> ModuleType:
    """The charts module of ``old``: a file, else a git revision of this repository."""
    path = Path(old)
    if not path.is_file():
        text = subprocess.run(
            ["git", "show", f"{old}:{CHARTS}"],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        path = folder / "old_charts.py"
        path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_charts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_charts"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def censuses(folder: Path, kept: int | None) -> list[Census]:
    db = folder / "crawl.db"
    fill(db)
    conn = connect(db)
    found = kept_censuses(Database(db.name, conn, path=db))
    conn.close()
    return found if kept is None else grown_history(found[-1].as_json(), kept)


def report(charts: ModuleType, history: list[Census]) -> tuple[float, float, int]:
    """CPU seconds of the bar charts and of the line charts of one report; the charts."""
    start = time.process_time()
    bars = charts.census_charts(history[-1])
    middle = time.process_time()
    lines = charts.history_charts(history)
    end = time.process_time()
    for chart in (*bars, *lines):
        ET.fromstring(chart.svg)  # well-formed
    return middle - start, end - middle, len(bars) + len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", default="main", help="a charts.py, or a git revision")
    parser.add_argument("--reports", type=int, default=5, help="reports a side per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--kept", type=int, help="censuses kept (default: the store's 4)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="census-charts-") as tmp:
        old = old_charts(args.old, Path(tmp))
        history = censuses(Path(tmp), args.kept)
    sides = {"old": old, "new": new_charts}
    drawn = {name: report(module, history)[2] for name, module in sides.items()}  # warm
    load = [os.getloadavg()[0]]
    per_report: dict[str, list[float]] = {name: [] for name in sides}
    per_chart: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for round_ in range(args.rounds):
        order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
        for name in order:
            bars = lines = 0.0
            for _ in range(args.reports):
                b, line, _ = report(sides[name], history)
                bars, lines = bars + b, lines + line
            per_report[name].append((bars + lines) / args.reports)
            per_chart[name].append((bars, lines))
        load.append(os.getloadavg()[0])
    latest = history[-1]
    bar_count = len(new_charts.census_charts(latest))
    line_count = drawn["new"] - bar_count
    result = {
        "machine": f"nproc {os.cpu_count()}, {cpu_model()}",
        "old_from": args.old,
        "censuses_kept": len(history),
        "charts_per_report": drawn,
        "bar_charts": bar_count,
        "line_charts": line_count,
        "rounds": args.rounds,
        "reports_per_round": args.reports,
        "load_1min": [round(x, 1) for x in load],
    }
    for name in sides:
        runs = per_report[name]
        bars = statistics.median(b / (args.reports * bar_count) for b, _ in per_chart[name])
        lines = statistics.median(
            line / (args.reports * max(line_count, 1)) for _, line in per_chart[name]
        )
        result[name] = {
            "cpu_s_per_report": [round(x, 3) for x in runs],
            "median_s": round(statistics.median(runs), 3),
            "ms_per_bar_chart": round(bars * 1000, 1),
            "ms_per_line_chart": round(lines * 1000, 1),
        }
    result["new_over_old"] = round(result["new"]["median_s"] / result["old"]["median_s"], 3)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
