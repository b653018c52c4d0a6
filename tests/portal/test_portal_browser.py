"""A real browser: headless Chromium (Debian's ``chromium``, installed by ``make browser``)
loads the portal served by its own HTTP/1.1 server on trio, in front of capsule_server on loopback.

The test asserts on the DOM Chromium built and takes screenshots of a
rendered capsule page and of a refusal page, light and dark. With GEMINIBOT_SCREENSHOTS=DIR
(``make portal-screenshots``) they are copied into DIR (docs/ holds the ones
docs/portal.md shows).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import trio
from chromium import PNG, browser
from portal_fixtures import make_app, serving

from geminibot.portal.limits import PortalLimits
from geminibot.portal.pages import COMMON_HEADERS
from geminibot.portal.server import PortalServer, listen


async def test_chromium_renders_the_portal(tmp_path: Path) -> None:
    shots = tmp_path / "shots"
    shots.mkdir()
    async with serving(tmp_path / "c", tmp_path / "certs") as served:
        app: Any = make_app(served.port)
        server = PortalServer(app, PortalLimits(), headers=list(COMMON_HEADERS), capacity=64)
        listeners = listen("127.0.0.1", 0, 30.0)
        async with trio.open_nursery() as nursery:
            stop = trio.Event()
            nursery.start_soon(server.serve, listeners, stop)
            base = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
            page = f"{base}/gemini/input.test/"
            readme = f"{base}/gemini/va-groups.test/README.gmi"
            refused = f"{base}/gemini/va-groups.test/proxy-no/a.gmi"
            async with browser(tmp_path / "profile") as tab:  # one Chromium for every page
                dom = await tab.load(page)
                await tab.load(readme)
                (shots / "portal-page.png").write_bytes(await tab.screenshot())
                await tab.load(readme, dark=True)
                (shots / "portal-page-dark.png").write_bytes(await tab.screenshot())
                refusal_dom = await tab.load(refused)
                (shots / "portal-refusal.png").write_bytes(await tab.screenshot())
            stop.set()
    # the DOM Chromium built from the rendered gemtext
    assert "<h1>Input &amp; &lt;tests&gt;</h1>" in dom
    assert "<script" not in dom.lower()
    hrefs = re.findall(r'<a [^>]*href="([^"]+)"', dom)
    assert "/gemini/input.test/page.gmi" in hrefs  # a relative link, rewritten
    assert "/gemini/va-groups.test/public/a.gmi" in hrefs  # another capsule, still here
    assert "https://example.org/" in hrefs  # external schemes left alone
    assert not [h for h in hrefs if h.startswith("javascript:")]
    assert 'aria-label="ascii art of a cat"' in dom
    assert '<meta name="robots" content="noindex,nofollow">' in dom
    # the refusal page
    assert "Not shown here" in refusal_dom
    assert "<code>Disallow: /proxy-no/</code>" in refusal_dom
    light, dark = (shots / name for name in ("portal-page.png", "portal-page-dark.png"))
    assert light.read_bytes() != dark.read_bytes()  # the page has a dark colour scheme
    for shot in shots.iterdir():
        data = shot.read_bytes()
        assert data.startswith(PNG), shot
        assert len(data) > 10_000, shot  # a real picture, not a blank page
    target = os.environ.get("GEMINIBOT_SCREENSHOTS")
    if target:
        for shot in shots.iterdir():
            shutil.copy(shot, Path(target) / shot.name)
