"""One URL, one decision: ``geminibot policy check`` and a real crawl of a test capsule
decide every spelling of a URL alike (``%5F``, ``%7E``, ``%2F``, non-ASCII, ``$``), because
both normalise a URL with the one routine (``geminibot.urls.normalise_path_query``).

The capsule is written here for the purpose: a robots.txt whose rules each meet a
normalisation case, and a page linking to each spelling. Each row says which rule the
answer follows (docs/policy.md, section 2)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
import trio.testing
from commands import crawl_in_trio, run_main

from capsule_server.testing import running_server
from geminibot.urls import parse_url

HOST = "norm.test"
TIMEOUT = 120.0
ROBOTS = """\
User-agent: *
Disallow: /cv/nlegaillart_cv.pdf
Disallow: /~joe/
Disallow: /a%2Fb
Disallow: /caf\u00e9/
Disallow: /price$
Disallow: /cost$x
Disallow: /%62%61%7A/
"""
#: Each link as the page writes it, whether it is refused, and the rule that says so.
CASES: dict[str, tuple[bool, str]] = {
    "/cv/nlegaillart%5Fcv.pdf": (True, "RFC 9309 2.2.2: %5F is '_', unreserved: decoded"),
    "/cv/nlegaillart_cv.pdf": (True, "Google and RFC 9309 alike"),
    "/%7Ejoe/a.gmi": (True, "RFC 9309 2.2.2: %7E is '~', unreserved: decoded"),
    "/~joe/b.gmi": (True, "Google and RFC 9309 alike"),
    "/a%2fb": (True, "both: %2F is reserved, never decoded; hex digits upper-cased"),
    "/a/b": (False, "both: '/' is not %2F"),
    "/caf%c3%a9/x.gmi": (True, "RFC 9309 2.2.2: non-ASCII percent-encoded as UTF-8"),
    "/caf\u00e9/y.gmi": (True, "RFC 9309 2.2.2 (Google leaves encoding to its caller)"),
    "/price": (True, "both: a final '$' anchors"),
    "/price/list": (False, "both: a final '$' anchors"),
    "/price%24": (False, "both: %24 is reserved, never decoded"),
    "/cost$x": (True, "both: '$' inside a pattern is a plain character"),
    "/cost%24x": (False, "both: %24 is not the '$' of the pattern"),
    "/baz/a.gmi": (True, "RFC 9309 2.2.2: the pattern's %62%61%7A is 'baz'"),
    "/./price": (True, "RFC 3986: dot segments removed, as the crawl fetches it"),
}


@dataclass
class Crawled:
    robots: Path
    db: str
    #: Each URL's state after the crawl (``stats --urls``).
    states: dict[str, str]
    #: The crawl's own summary (``--json``).
    summary: dict[str, object]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    """The capsule crawled with --max-depth 1: its policy refuses what CASES says, and
    the depth bound (a trap bound) stops the link of /deeper.gmi."""
    tmp = tmp_path_factory.mktemp("one-decision")
    capsule = tmp / "capsules" / HOST
    capsule.mkdir(parents=True)
    (capsule / "robots.txt").write_text(ROBOTS, encoding="utf-8")
    links = "".join(f"=> {link}\n" for link in CASES)
    (capsule / "index.gmi").write_text(f"# Spellings\n{links}=> /deeper.gmi\n", encoding="utf-8")
    (capsule / "deeper.gmi").write_text("=> /deepest.gmi\n=> /private-deep/x\n", encoding="utf-8")
    db = str(tmp / "crawl.db")
    summary: dict[str, object] = {}

    async def main() -> None:
        async with running_server(tmp / "capsules", tmp / "certs", clock=trio.current_time) as s:
            argv = [f"gemini://{HOST}/", "--db", db, "--test-range", "--json"]
            argv += ["--connect-to", f"*.test:1965:127.0.0.1:{s.port}", "--max-depth", "1"]
            with trio.fail_after(TIMEOUT):
                proc = await crawl_in_trio(argv)
            assert proc.returncode == 0, proc.stderr
            summary.update(json.loads(proc.stdout.splitlines()[-1]))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.005))
    listed = run_main(["stats", "--db", db, "--urls", "--host", HOST, "--json"])
    assert listed.returncode == 0, listed.stderr
    states = {}
    for line in listed.stdout.splitlines():
        record = json.loads(line)
        states[record["url"]] = record["state"]
    return Crawled(capsule / "robots.txt", db, states, summary)


@pytest.mark.parametrize("link", list(CASES))
def test_policy_check_and_the_crawl_decide_alike(crawled: Crawled, link: str) -> None:
    robots, states = crawled.robots, crawled.states
    refused, rule = CASES[link]
    url = f"gemini://{HOST}{link}"
    checked = run_main(["policy", "check", str(robots), "--agent", "geminibot", url, "--json"])
    assert checked.returncode in (0, 1), checked.stderr
    verdict = json.loads(checked.stdout)
    assert verdict["allowed"] is not refused, (link, rule, verdict["reason"])
    crawl_state = states[str(parse_url(url))]
    assert (crawl_state == "refused") is refused, (link, rule, crawl_state)
    # The path both decided on is the crawl's URL.
    assert verdict["path"] == parse_url(url).path_query


def test_stats_counts_policy_refusals_apart_from_trap_bounds(crawled: Crawled) -> None:
    """``stats`` says how many URLs the site's policy refused as the crawl's summary does,
    and the URLs a trap bound stopped (here the depth bound) apart."""
    trapped = [url for url, state in crawled.states.items() if state == "trapped"]
    assert trapped  # the links of /deeper.gmi, one level too deep
    refused = len(
        {str(parse_url(f"gemini://{HOST}{link}")) for link, (no, _) in CASES.items() if no}
    )
    assert crawled.summary["refused"] == refused
    data = json.loads(run_main(["stats", "--db", crawled.db, "--json"]).stdout)
    assert (data["refusals"], data["trap_refusals"]) == (refused, len(trapped))
    text = run_main(["stats", "--db", crawled.db]).stdout
    line = f"refusals   {refused} URLs refused by site policy, {len(trapped)} more stopped by"
    assert line in text
