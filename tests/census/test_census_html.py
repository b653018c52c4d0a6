"""``census --html``: the report's charts bounded (bars capped with "other", series
thinned, labels cleaned and clipped), every text from the network escaped in the page
and in the SVG, the files written, the command's refusals.

The report of the whole crawl is drawn once, by the command, for the module
(:func:`written`); the tests read its files."""

from __future__ import annotations

import base64
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from census_report_store import HOSTILE, fill
from commands import run_main

from geminibot.census.charts import (
    LABEL_CHARS,
    MAX_BARS,
    MAX_POINTS,
    OTHER,
    Chart,
    bar_chart,
    capped,
    chart_label,
    series_chart,
    thinned,
)
from geminibot.census.html import data_uri

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("report") / "crawl.db"
    fill(db)
    return db


@pytest.fixture(scope="module")
def written(store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The folder ``census --html`` wrote the report of the whole crawl into (over a
    chart file an earlier report left there), and what it printed."""
    out = tmp_path_factory.mktemp("html") / "report"
    (out / "charts").mkdir(parents=True)
    (out / "charts" / "stale.svg").write_text("<svg/>")
    done = run_main(["census", "--db", str(store), "--html", str(out)])
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_bars_capped_at_the_limit_the_rest_as_other() -> None:
    exactly = {f"k{i}": i + 1 for i in range(MAX_BARS)}
    assert capped(exactly) == {
        k: float(v) for k, v in sorted(exactly.items(), key=lambda kv: -kv[1])
    }
    over = {f"k{i}": i + 1 for i in range(MAX_BARS + 5)}
    bars = capped(over)
    assert len(bars) == MAX_BARS and list(bars)[-1] == OTHER
    assert bars[OTHER] == sum(range(1, 7))  # the six smallest: 1..6
    assert sum(bars.values()) == sum(over.values())
    chart = bar_chart("k", "many", {f"host{i}.test": i for i in range(10_000)})
    assert chart.svg.count("host") == MAX_BARS - 1 and OTHER in chart.svg


def test_series_thinned_first_and_last_kept() -> None:
    points = [(float(i), float(i)) for i in range(MAX_POINTS * 3 + 1)]
    kept = thinned(points)
    assert len(kept) == MAX_POINTS and kept[0] == points[0] and kept[-1] == points[-1]
    assert thinned(points[:MAX_POINTS]) == points[:MAX_POINTS]
    assert "<svg" in series_chart("s", "a series", points).svg


def test_labels_cleaned_and_clipped() -> None:
    assert chart_label("a\x1b[31mb\u202ec\n") == "a\ufffd[31mb\ufffdc\ufffd"
    long = chart_label("x" * 1000)
    assert len(long) == LABEL_CHARS and long.endswith("\u2026")
    assert chart_label("x" * LABEL_CHARS) == "x" * LABEL_CHARS


def test_hostile_labels_escaped_in_svg_and_page(written: tuple[Path, str]) -> None:
    out, _ = written
    mime = (out / "charts" / "content.mime.svg").read_text()
    root = ET.fromstring(mime)  # well-formed XML: no raw control character, no markup
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    shown = chart_label(HOSTILE)
    assert shown in texts  # the dollars kept as text, not set as math
    assert "<script>" not in mime and root.find(f".//{SVG}script") is None
    page = (out / "index.html").read_text()
    assert "<script" not in page and "\x1b" not in page
    assert "text/x-&lt;script&gt;alert(&quot;$1$&quot;)&lt;/script&gt;" in page
    assert "Let&#x27;s &lt;Encrypt&gt;" in page
    # inline (the portal's page), a chart is its file's bytes
    inline = Chart("content.mime", "20 answers by MIME type", "", mime)
    assert base64.b64decode(data_uri(inline).split(",", 1)[1]).decode() == mime


def test_census_html_writes_the_report(
    written: tuple[Path, str], store: Path, tmp_path: Path
) -> None:
    written_out, stdout = written
    assert stdout.startswith(f"census: wrote {written_out / 'index.html'} and ")
    charts = sorted(p.name for p in (written_out / "charts").glob("*.svg"))
    assert "stale.svg" not in charts
    assert "content.mime.svg" in charts and "tls.versions.svg" in charts
    assert "uris.answered.svg" in charts  # a series: four censuses kept
    index = (written_out / "index.html").read_text()
    for name in charts:
        assert f'src="charts/{name}"' in index
    assert index.count("<img ") == len(charts)
    assert "<script" not in index and "4 censuses kept" in index
    out = tmp_path / "report"
    shutil.copytree(written_out, out)
    host = run_main(["census", "--db", str(store), "--host", "beta.test", "--html", str(out)])
    assert host.returncode == 0, host.stderr
    index = (out / "index.html").read_text()
    assert "Census of beta.test" in index and "have no history" in index
    assert not (out / "charts" / "content.mime.svg").exists()  # the earlier report's


def test_census_html_refusals(store: Path, tmp_path: Path) -> None:
    history = run_main(["census", "--db", str(store), "--html", str(tmp_path), "--history"])
    assert history.returncode == 2 and "--html draws the history" in history.stderr
    both = run_main(["census", "--db", str(store), "--html", str(tmp_path), "--json"])
    assert both.returncode == 2 and "not allowed with" in both.stderr
    a_file = tmp_path / "file"
    a_file.write_text("")
    refused = run_main(["census", "--db", str(store), "--html", str(a_file)])
    assert refused.returncode == 2 and "not a directory" in refused.stderr
    assert "Traceback" not in refused.stderr
