"""``census --html`` and the portal's ``/census`` in a real browser: headless Chromium
(Debian's ``chromium``, ``make system-packages``) loads the report from its folder, and
the portal's page through its HTTP server, and shows every chart.

Each chart's image must load with a size (a probe copy of the report, its policy allowing
the probe's one script, measures them in the DOM Chromium built) and be painted (the
screenshots hold the bars' colour). With
GEMINIBOT_SCREENSHOTS=DIR the report's screenshot is copied into DIR (docs/ holds the one
docs/census.md shows: ``make census-screenshot``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import trio
from census_report_store import fill
from chromium import PNG, run_chromium
from PIL import Image

from geminibot.census.charts import _BAR
from geminibot.census.history import kept_censuses
from geminibot.census.html import build_report, write_report
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import PortalLimits
from geminibot.portal.pages import COMMON_HEADERS
from geminibot.portal.server import PortalServer, listen
from geminibot.portal.upstream import Upstream, UpstreamGuard
from geminibot.store.database import Database
from geminibot.store.db import connect
from geminibot.why.reads import CheckReads

#: Run after the page loads, in the probe copy only: each image's state into the DOM.
PROBE = """<script>
window.addEventListener("load", () => {
  const sizes = [...document.images].map(i => ({src: i.getAttribute("src"),
    complete: i.complete, natural: [i.naturalWidth, i.naturalHeight],
    shown: [i.getBoundingClientRect().width, i.getBoundingClientRect().height]}));
  const out = document.createElement("pre");
  out.id = "sizes";
  out.textContent = JSON.stringify(sizes);
  document.body.append(out);
});
</script>"""


def probed(page: str) -> str:
    """The report's ``page`` with :data:`PROBE` at the end of its body, and its
    Content-Security-Policy (kept for everything else) allowing that one script by its
    hash."""
    script = PROBE.removeprefix("<script>").removesuffix("</script>")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = re.compile(r'(<meta http-equiv="Content-Security-Policy" content="[^"]*)(">)')
    assert len(csp.findall(page)) == 1
    allowed = csp.sub(rf"\1; script-src 'sha256-{digest}'\2", page)
    return allowed.replace("</body>", PROBE + "</body>")


def bar_pixels(png: Path) -> int:
    """How many pixels of ``png`` have the bars' colour."""
    colour = [int(_BAR[i : i + 2], 16) for i in (1, 3, 5)]
    image = Image.open(png).convert("RGB")
    return sum(
        count
        for count, pixel in image.getcolors(image.width * image.height) or []
        if all(abs(a - b) <= 8 for a, b in zip(pixel, colour, strict=True))
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("browser") / "crawl.db"
    fill(db)
    return db


async def test_chromium_shows_the_reports_charts(store: Path, tmp_path: Path) -> None:
    conn = connect(store)
    censuses = kept_censuses(Database(store.name, conn, path=store))
    conn.close()
    report = build_report(censuses[-1], censuses)
    folder = tmp_path / "report"
    write_report(report, folder)
    index = (folder / "index.html").read_text()
    probe = folder / "probe.html"
    probe.write_text(probed(index))
    shot = tmp_path / "census-report.png"
    dom = (
        await run_chromium(
            tmp_path / "p1",
            "--window-size=1000,2000",
            f"--screenshot={shot}",
            "--virtual-time-budget=20000",
            "--dump-dom",
            probe.as_uri(),
        )
    ).decode()
    found = re.search(r'<pre id="sizes">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    images = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    charts = len(report.charts) + len(report.series)
    assert charts >= 20 and len(images) == charts
    for image in images:
        assert image["complete"] and min(image["natural"]) > 100, image  # the SVG loaded
        assert min(image["shown"]) > 100, image  # and is laid out with a size
    assert shot.read_bytes().startswith(PNG)
    assert bar_pixels(shot) > 20_000  # the bars painted, not their alt text
    target = os.environ.get("GEMINIBOT_SCREENSHOTS")
    if target:
        shutil.copy(shot, Path(target) / shot.name)


async def test_chromium_shows_the_portals_census(store: Path, tmp_path: Path) -> None:
    """The portal's page: its charts inline as data: images, which its CSP allows."""
    limits = PortalLimits()
    app = PortalApp(Upstream(limits, guard=UpstreamGuard(test_range=True)))
    app.checks = CheckReads.of(str(store))
    server = PortalServer(app, limits, headers=list(COMMON_HEADERS), capacity=16)
    listeners = listen("127.0.0.1", 0, 30.0)
    shot = tmp_path / "portal-census.png"
    async with trio.open_nursery() as nursery:
        stop = trio.Event()
        nursery.start_soon(server.serve, listeners, stop)
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/census"
        # the DOM and the screenshot of one load
        args = ("--window-size=1000,2000", f"--screenshot={shot}", "--dump-dom", url)
        dom = (await run_chromium(tmp_path / "p1", *args)).decode()
        stop.set()
    app.checks.reads.close()
    assert dom.count('src="data:image/svg+xml;base64,') >= 20
    assert "<script" not in dom.lower()
    assert bar_pixels(shot) > 20_000
