"""The portal against capsule_server serving the bundled capsules (and input.test), in
one trio run: what it shows, what it refuses, how it paces itself."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import trio
import trio.testing
from portal_fixtures import browser, make_app, portal, serving

from capsule_server.cli import main as capsule_server_main
from capsule_server.judge import build_report, load_policies
from geminibot.gemini.server import ServerLimits
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import PortalLimits

HTML = "text/html; charset=utf-8"
BIG = 16 * 1024 * 1024  # large-file.test/files/big.bin


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("certs")


def capsules_of(root: Path, hosts: Iterable[str], folder: Path) -> Path:
    """``folder`` holding only ``hosts``' capsules of ``root`` (links): what a report on
    their traffic alone judges by, without parsing every other capsule's policy files
    (robots-large.test's 600 KB robots.txt among them)."""
    folder.mkdir()
    for host in hosts:
        (folder / host).symlink_to((root / host).resolve(), target_is_directory=True)
    return folder


def assert_portal_headers(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    assert headers["x-robots-tag"] == "noindex, nofollow"
    if headers.get("content-type") == HTML:
        text = response.text  # type: ignore[attr-defined]
        assert '<meta name="robots" content="noindex,nofollow">' in text
        assert "<script" not in text.lower()
        assert "script-src" not in headers["content-security-policy"]
        assert headers["content-security-policy"].startswith("default-src 'none'")


async def test_allowed_page_renders(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        r = await web.get("/gemini/va-groups.test/public/a.gmi")
    assert r.status_code == 200
    assert_portal_headers(r)
    assert "<h1>/public/a.gmi</h1>" in r.text
    assert "A page of the va-groups.test test capsule." in r.text
    assert '<span class="url">gemini://va-groups.test/public/a.gmi</span>' in r.text
    assert '<a href="gemini://va-groups.test/public/a.gmi">open in a Gemini client</a>' in r.text
    assert re.search(r"certificate SHA-256 <code>([0-9A-F]{2}:){31}[0-9A-F]{2}</code>", r.text)
    # robots.txt first, then the page
    assert served.paths("va-groups.test")[0] == "/robots.txt"
    assert "/public/a.gmi" in served.paths("va-groups.test")


async def test_webproxy_only_disallow_is_refused_with_the_rule(
    tmp_path: Path, cert_dir: Path
) -> None:
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        r = await web.get("/gemini/va-groups.test/proxy-no/a.gmi")
    assert r.status_code == 403
    assert_portal_headers(r)
    assert '<a href="/gemini/va-groups.test/robots.txt">robots.txt, line 12</a>' in r.text
    assert "<code>Disallow: /proxy-no/</code>" in r.text
    assert '<a href="/gemini/va-groups.test/">The capsule' in r.text
    assert "/proxy-no/a.gmi" not in served.paths("va-groups.test")  # never fetched


async def test_indexer_only_disallow_is_served(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        r = await web.get("/gemini/va-groups.test/index-no/a.gmi")
    assert r.status_code == 200
    assert "/index-no/a.gmi" in served.paths("va-groups.test")


async def test_strict_mode_adds_the_star_group(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        default = await web.get("/gemini/va-groups.test/private/a.gmi")
        async with browser(make_app(served.port, strict=True)) as strict_web:
            strict = await strict_web.get("/gemini/va-groups.test/private/a.gmi")
    assert default.status_code == 200  # the webproxy group decides alone
    assert strict.status_code == 403
    assert "Disallow: /private/" in strict.text


async def test_input_through_a_form(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        prompt = await web.get("/gemini/input.test/ask")
        sent = await web.post("/gemini/input.test/ask", data={"input": "Ada Lovelace & co"})
        answer = await web.get(sent.headers["location"])
    assert prompt.status_code == 200
    assert "<h1>What is your name?</h1>" in prompt.text
    assert '<form method="post" action="/gemini/input.test/ask">' in prompt.text
    assert 'type="text"' in prompt.text
    assert sent.status_code == 303
    assert sent.headers["location"] == "/gemini/input.test/ask?Ada%20Lovelace%20%26%20co"
    assert answer.status_code == 200
    assert "/ask?Ada%20Lovelace%20%26%20co" in served.paths("input.test")


async def test_sensitive_input_is_a_password_field_kept_out_of_the_address(
    tmp_path: Path, cert_dir: Path
) -> None:
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        prompt = await web.get("/gemini/input.test/secret")
        shown = await web.post(
            "/gemini/input.test/secret", data={"input": "hunter2", "sensitive": "1"}
        )
        # a page that answers 20 whatever the query: its answer is not kept either
        found = await web.post(
            "/gemini/input.test/page.gmi", data={"input": "hunter2", "sensitive": "1"}
        )
        app: PortalApp = web._transport.app  # type: ignore[attr-defined]
    assert 'type="password"' in prompt.text
    assert "Password &lt;please&gt;" in prompt.text  # the meta is escaped
    assert shown.status_code == 200  # shown at once: no redirect puts it in the address bar
    assert "hunter2" not in shown.text
    assert shown.headers["cache-control"] == "no-store"
    assert "/secret?hunter2" in served.paths("input.test")
    assert "<h1>A page</h1>" in found.text
    assert "/page.gmi?hunter2" in served.paths("input.test")
    assert not [key for key in app.proxy.cache if "hunter2" in key]  # not kept


async def test_input_longer_than_a_gemini_request_is_refused(
    tmp_path: Path, cert_dir: Path
) -> None:
    async with portal(tmp_path / "c", cert_dir) as (_served, web):
        base = len("gemini://input.test/ask?")
        fits = await web.post("/gemini/input.test/ask", data={"input": "a" * (1024 - base)})
        over = await web.post("/gemini/input.test/ask", data={"input": "a" * (1025 - base)})
        big = await web.post("/gemini/input.test/ask", content=b"input=" + b"a" * 4096)
    assert fits.status_code == 303
    assert over.status_code == 400
    assert big.status_code == 413  # MAX_FORM_BYTES


async def test_gemtext_rendering_and_link_rewriting(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir) as (_served, web):
        r = await web.get("/gemini/input.test/")
    html = r.text
    assert "<h1>Input &amp; &lt;tests&gt;</h1>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<a href="/gemini/input.test/page.gmi">Relative page</a>' in html
    assert '<a href="/gemini/va-groups.test/public/a.gmi">Another capsule</a>' in html
    assert 'class="external" href="https://example.org/"' in html
    assert 'href="javascript:' not in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert "<blockquote><p>quoted &quot;text&quot;</p></blockquote>" in html
    assert '<pre aria-label="ascii art of a cat" tabindex="0"> /\\_/\\\n( o.o )</pre>' in html


async def test_capsule_mode_serves_one_capsule_at_the_root(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir, capsule="gemini://input.test/") as (_served, web):
        home = await web.get("/")
        page = await web.get("/page.gmi")
        refused = await web.get("/proxy-no/a.gmi")
        own_robots = await web.get("/robots.txt")
    assert '<a href="/page.gmi">Relative page</a>' in home.text
    # another capsule's link stays a gemini:// link
    assert 'href="gemini://va-groups.test/public/a.gmi"' in home.text
    assert "<h1>A page</h1>" in page.text
    assert refused.status_code == 403
    assert own_robots.text.endswith("User-agent: *\nDisallow: /\n")


async def test_redirects(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        moved = await web.get("/gemini/input.test/moved")
        sneaky = await web.get("/gemini/input.test/sneaky")
        away = await web.get("/gemini/input.test/away")
    assert moved.status_code == 200
    assert "<h1>A page</h1>" in moved.text
    assert '<span class="url">gemini://input.test/page.gmi</span>' in moved.text
    # a redirect into a path webproxy may not fetch is refused before it is followed
    assert sneaky.status_code == 403
    assert "/proxy-no/a.gmi" not in served.paths("input.test")
    # the page names the hop refused, not the address asked for
    assert "not to show <code>gemini://input.test/proxy-no/a.gmi</code>" in sneaky.text
    # another scheme: linked, not followed
    assert away.status_code == 200
    assert 'href="https://example.org/"' in away.text


async def test_error_statuses_are_readable_pages(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir) as (_served, web):
        missing = await web.get("/gemini/input.test/nothing-here")
        gone = await web.get("/gemini/input.test/gone")
        cert = await web.get("/gemini/input.test/cert")
        unknown_host = await web.get("/gemini/nowhere.test/")
    assert missing.status_code == 404
    assert "Gemini status 51: not found" in missing.text
    assert gone.status_code == 410
    assert "It went away" in gone.text
    assert cert.status_code == 403
    assert "client certificate" in cert.text
    assert unknown_host.status_code in (403, 502)  # 53 on robots.txt: unavailable -> page 53


async def test_other_charsets_are_decoded(tmp_path: Path, cert_dir: Path) -> None:
    async with portal(tmp_path / "c", cert_dir) as (_served, web):
        latin1 = await web.get("/gemini/non-utf8.test/latin1.gmi")
        sjis = await web.get("/gemini/non-utf8.test/sjis.txt")
    assert "<h1>Café crème</h1>" in latin1.text
    assert sjis.status_code == 200
    assert "<pre" in sjis.text
    assert "\ufffd" not in sjis.text


async def test_endless_body_stops_at_the_cap(tmp_path: Path, cert_dir: Path) -> None:
    cap = 1024 * 1024
    limits = PortalLimits(
        rate_per_second=1e6, rate_burst=1000, min_host_delay=0.0, max_body_bytes=cap
    )
    async with portal(tmp_path / "c", cert_dir, limits=limits) as (served, web):
        r = await web.get("/gemini/large-file.test/files/big.bin")
    assert r.status_code == 502
    assert f"at most {cap} bytes" in r.text
    (hit,) = [h for h in served.records if h.path == "/files/big.bin"]
    assert hit.bytes < 16 * 1024 * 1024  # the server was cut off well before the end


@pytest.mark.parametrize(("cap", "status"), [(BIG, 200), (BIG - 1, 502)])
async def test_binary_passes_through_up_to_the_cap(
    tmp_path: Path, cert_dir: Path, cap: int, status: int
) -> None:
    limits = PortalLimits(
        rate_per_second=1e6, rate_burst=1000, min_host_delay=0.0, max_body_bytes=cap
    )
    async with portal(tmp_path / "c", cert_dir, limits=limits) as (_served, web):
        r = await web.get("/gemini/large-file.test/files/big.bin")
    assert r.status_code == status
    if status == 200:
        assert len(r.content) == BIG
        assert r.headers["content-type"] == "application/octet-stream"
        assert r.headers["content-disposition"] == 'attachment; filename="big.bin"'
        assert "sandbox" in r.headers["content-security-policy"]


async def test_a_44_on_robots_txt_slows_the_portal_down(
    tmp_path: Path, cert_dir: Path, loopback_clock: trio.testing.MockClock
) -> None:
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        first = await web.get("/gemini/robots-44.test/a.gmi")
        again = await web.get("/gemini/robots-44.test/a.gmi")
        asked_once = list(served.paths("robots-44.test"))
        await trio.sleep(int(first.headers["retry-after"]))
        later = await web.get("/gemini/robots-44.test/a.gmi")
    assert first.status_code == 503
    assert int(first.headers["retry-after"]) >= 60  # "44 60"
    assert "44 SLOW DOWN" in first.text
    assert again.status_code == 503
    assert asked_once == ["/robots.txt"]  # the second web request sent nothing upstream
    assert later.status_code == 503
    times = [h.at for h in served.hits if h.host == "robots-44.test"]
    assert len(times) == 2
    assert times[1] - times[0] >= 60


async def test_a_rate_limited_capsule_is_obeyed(
    tmp_path: Path, cert_dir: Path, loopback_clock: trio.testing.MockClock
) -> None:
    server_limits = ServerLimits(rate_burst=2, rate_per_second=0.5)
    pages = ["/", "/public/a.gmi", "/index-no/a.gmi", "/research-no/a.gmi", "/archive-no/a.gmi"]
    async with portal(tmp_path / "c", cert_dir, server_limits) as (served, web):
        answers = [await web.get(f"/gemini/va-groups.test{p}") for p in pages]
    assert [a.status_code for a in answers] == [200] * len(pages)
    hits = [h for h in served.hits if h.host == "va-groups.test"]
    slow_downs = 0
    for hit, nxt in itertools.pairwise(hits):
        if hit.status == 44:
            slow_downs += 1
            assert nxt.at - hit.at >= float(hit.meta)
    assert slow_downs >= 1  # the server did slow the portal down ...
    judged = capsules_of(served.root, ["va-groups.test"], tmp_path / "judged")
    (report,) = build_report(served.records, load_policies(judged), judge_as="webproxy")
    assert not report.during_wait  # ... and it waited every time
    assert report.compliant, report.as_dict()


async def served_around(
    root: Path,
    cert_dir: Path,
    ttl: Callable[[PortalApp], float],
    first: str,
    then: str,
    counted: str,
) -> tuple[int, int]:
    """Through a portal, show va-groups.test's ``first`` page, then its ``then`` page a
    second before ``ttl(app)`` has passed and a second after: how often the capsule had
    served ``counted`` each time."""
    host = "va-groups.test"
    counts = []
    async with serving(root, cert_dir) as served:
        app = make_app(served.port)
        async with browser(app) as web:
            await web.get(f"/gemini/{host}{first}")
            start = trio.current_time()
            for moment in (start + ttl(app) - 1, start + ttl(app) + 1):
                await trio.sleep_until(moment)
                await web.get(f"/gemini/{host}{then}")
                counts.append(served.paths(host).count(counted))
    return counts[0], counts[1]


async def test_policy_cache_lasts_24_hours_at_most(
    tmp_path: Path, cert_dir: Path, loopback_clock: trio.testing.MockClock
) -> None:
    robots_before, robots_after = await served_around(
        tmp_path / "c",
        cert_dir,
        lambda _: 24 * 3600,
        "/public/a.gmi",
        "/index-no/a.gmi",
        "/robots.txt",
    )
    assert robots_before == 1
    assert robots_after == 2


async def test_page_cache(
    tmp_path: Path, cert_dir: Path, loopback_clock: trio.testing.MockClock
) -> None:
    fetched_before, fetched_after = await served_around(
        tmp_path / "c",
        cert_dir,
        lambda app: app.upstream.limits.page_cache_seconds,
        "/public/a.gmi",
        "/public/a.gmi",
        "/public/a.gmi",
    )
    assert fetched_before == 1
    assert fetched_after == 2


async def test_every_capsule_page_through_the_portal_is_webproxy_compliant(
    tmp_path: Path,
    cert_dir: Path,
    loopback_clock: trio.testing.MockClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A person clicks every link of every bundled capsule's home page; the server's
    compliance report judges the portal's traffic as webproxy's."""
    hosts = [
        "va-groups.test",
        "va-conflict.test",
        "own-token.test",
        "honeypot.test",
        "wildcards.test",
        "percent.test",
        "agents-good.test",
        "robots-v2.test",
    ]
    async with portal(tmp_path / "c", cert_dir) as (served, web):
        statuses = {}
        for host in hosts:
            home = await web.get(f"/gemini/{host}/")
            for link in re.findall(r'href="(/gemini/[^"]+)"', home.text):
                statuses[link] = (await web.get(link)).status_code
    assert 403 in statuses.values() and 200 in statuses.values()
    served.records = [r for r in served.records if r.host in hosts]
    judged = capsules_of(served.root, hosts, tmp_path / "judged")
    (report,) = build_report(served.records, load_policies(judged), judge_as="webproxy")
    assert report.compliant, report.as_dict()
    assert "webproxy" in report.consistent_with, report.as_dict()
    assert report.breaches == []  # no forbidden path, no honeypot, no 44 ignored
    # the same judgement from the command line, on the access log as a file
    log = tmp_path / "access.log"
    log.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in served.records))
    argv = ["report", str(log), "--capsules", str(judged), "--as", "webproxy"]
    assert capsule_server_main(argv) == 0
    assert "verdict: compliant" in capsys.readouterr().out
