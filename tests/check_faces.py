"""The two faces of ``/check`` asked in this process about a crawl database: the search
capsule's (gemtext) and the portal's (HTML); and what a host's page must show of its
census: ``geminibot census --host HOST --json``, each figure written out here as the page
says it (``what it counts: value``; a distribution's ``label: count`` pairs, ``; ``
between), independently of ``geminibot.why.render``."""

from __future__ import annotations

import html
import json
import re
import time
from contextlib import closing
from typing import Any
from urllib.parse import quote

import httpx
import trio
from commands import answer_of, run_main

from geminibot.gemini.status import Status
from geminibot.gemini.urls import parse_request
from geminibot.searchcap.app import SearchCapsule
from geminibot.why.reads import CheckReads


def capsule_check(db: str, target: str, now: float | None = None) -> str:
    """The search capsule's ``/check?TARGET`` page (it must answer ``20``); ``now``: its
    wall clock (default: the time)."""
    request = f"gemini://localhost/check?{quote(target, safe='')}"
    clock = time.time if now is None else lambda: now
    with closing(SearchCapsule.of(db, checks=CheckReads.of(db), wall_clock=clock)) as handler:
        answer = answer_of(handler, parse_request(request.encode()))
    assert answer.status == Status.SUCCESS, answer.meta
    return str(answer.body.decode("utf-8"))


async def portal_check(db: str, target: str, now: float | None = None) -> tuple[int, str]:
    """The portal's ``/check?q=TARGET``: its status and page."""
    from geminibot.portal.app import PortalApp
    from geminibot.portal.limits import PortalLimits
    from geminibot.portal.upstream import Upstream, UpstreamGuard

    upstream = Upstream(PortalLimits(), guard=UpstreamGuard([], test_range=True))
    clock = time.time if now is None else lambda: now
    app = PortalApp(upstream, checks=CheckReads.of(db), wall_clock=clock)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://portal.test") as web:
        response = await web.get("/check", params={"q": target})
    return response.status_code, response.text


def plain(page: str) -> str:
    """An HTML page's text: its tags removed, its entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def census_json(db: str, host: str) -> dict[str, Any]:
    """``geminibot census --db DB --host HOST --json``, read."""
    result = run_main(["census", "--db", db, "--host", host, "--json"])
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


#: The longest label of a distribution's item a page shows, and how many items.
LABEL, ITEMS = 200, 10


def shown(value: Any) -> str | dict[str, int]:
    """A figure's value as a page says it; a distribution as its items, each label cut as
    the page cuts it, with ``and N more`` for those not listed (``census --json`` sorts a
    distribution's labels; the page keeps the census's order, largest first)."""
    if value is None:
        return "not known"
    if not isinstance(value, dict):
        return f"{value:,}" if isinstance(value, int) else str(value)
    cut = {(k if len(k) <= LABEL else k[: LABEL - 1] + "…"): int(n) for k, n in value.items()}
    if len(cut) <= ITEMS:
        return cut
    ranked = sorted(cut.items(), key=lambda kv: (-kv[1], kv[0]))
    return dict(ranked[:ITEMS]) | {f"and {len(cut) - ITEMS} more": -1}


def read_items(items: list[str]) -> dict[str, int]:
    """A distribution's items read back (``label: 1,234``; ``and N more`` as -1)."""
    out = {}
    for item in items:
        if item.startswith("and ") and item.endswith(" more"):
            out[item] = -1
            continue
        label, _, count = item.rpartition(": ")
        out[label] = int(count.replace(",", ""))
    return out


def gemtext_value(lines: list[str], what: str, counts: bool) -> str | dict[str, int]:
    """What a gemtext page says of the figure ``what``: a line ``what: value``, or
    ``what:`` and its items, one a line (``* label: count``); ``counts``: whether the
    figure is a distribution (``none`` when empty)."""
    if f"{what}:" in lines:
        at = lines.index(f"{what}:") + 1
        items = []
        while at < len(lines) and lines[at].startswith("* "):
            items.append(lines[at][2:])
            at += 1
        return read_items(items)
    (line,) = [line for line in lines if line.startswith(f"{what}: ")]
    text = line.removeprefix(f"{what}: ")
    return {} if counts and text == "none" else text


def html_value(page: str, what: str, counts: bool) -> str | dict[str, int]:
    """What an HTML page says of the figure ``what`` (a ``<dt>``): its ``<dd>``'s text, or
    the items of its list (``counts``: as :func:`gemtext_value`)."""
    (said,) = re.findall(rf"<dt>{re.escape(html.escape(what))}</dt><dd>(.*?)</dd>", page)
    if said.startswith("<ul>"):
        return read_items([html.unescape(i) for i in re.findall(r"<li>(.*?)</li>", said)])
    text = html.unescape(said)
    return {} if counts and text == "none" else text


def census_sections(data: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Each section of a census (``census --json``) as a page shows it: its title (with
    the window its figures share), and each figure's what it counts (with its window when
    not shared) and value (:func:`shown`)."""
    figures = data["figures"]
    out = []
    for section in data["sections"]:
        windows = {figures[key]["window"] for key in section["keys"]}
        shared = windows.pop() if len(windows) == 1 else None
        title = f"{section['title']} (over {shared})" if shared else section["title"]
        rows = []
        for key in section["keys"]:
            figure = figures[key]
            what = figure["what"]
            if not shared and figure["window"]:
                what += f" ({figure['window']})"
            rows.append((what, shown(figure["value"])))
        out.append((title, rows))
    return out


def assert_census_shown(db: str, host: str) -> dict[str, Any]:
    """Both faces' ``/check?HOST``, asked at the census's own time, show every figure of
    ``census --host HOST --json`` in its section, as the census gives it: the figures,
    read."""
    data = census_json(db, host)
    now = float(data["taken_at"])
    gemtext = capsule_check(db, host, now)
    status, page = trio.run(portal_check, db, host, now)
    assert status == 200
    assert "## Capsule health" in gemtext.splitlines()
    assert "<h2>Capsule health</h2>" in page
    gem_sections = gemtext.split("\n### ")[1:]
    html_sections = page.split("<h3>")[1:]
    expected = census_sections(data)
    assert len(gem_sections) == len(html_sections) == len(expected)
    for (title, rows), gem, web in zip(expected, gem_sections, html_sections, strict=True):
        assert gem.splitlines()[0] == title
        assert web.startswith(f"{html.escape(title)}</h3>")
        for what, value in rows:
            counts = isinstance(value, dict)
            assert gemtext_value(gem.splitlines(), what, counts) == value, (what, gem)
            assert html_value(web, what, counts) == value, (what, web)
    return {key: figure["value"] for key, figure in data["figures"].items()}
