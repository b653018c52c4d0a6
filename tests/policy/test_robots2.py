"""robots2.txt v0.2.1: directives and values, override blocks, meta, chains, the ask protocol."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from geminibot.policy.robots2 import (
    CATEGORIES,
    DIRECTIVE_VALUES,
    MAX_CHAIN_DEPTH,
    parse_robots2,
    resolve_chain,
)
from geminibot.policy.robots2_ask import (
    ASK_ALLOW_CACHE,
    ASK_PATH,
    AskLedger,
    AskResponse,
    agent_identity,
    ask_outcome,
    ask_request,
)

EXAMPLE = (Path(__file__).parent / "data" / "robots2-example.txt").read_bytes()
NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def test_the_spec_example_reads_every_section() -> None:
    f = parse_robots2(EXAMPLE)
    assert f.diagnostics == ()
    values = {k: s.value for k, s in f.directives.items()}
    assert values == {
        "crawl": "yes",
        "read": "yes",
        "summarise": "yes",
        "quote": "short-only",
        "derivative": "no",
        "train": "no",
        "store": "session-only",
        "compete": "no",
        "personalise": "no",
        "monetise": "no",
        "attribution": "required",
        "link-back": "required",
        "rate": "polite",
        "announce": "yes",
        "honest": "yes",
    }
    assert f.directives["train"].line == 33
    assert f.market is not None and f.market.value == "reference-publishing"
    assert {k: s.value for k, s in f.signals.items()} == {
        "content-type": "reference",
        "editorialised": "yes",
        "ai-assisted": "no",
        "primary-language": "en-AU",
    }
    assert set(f.blocks) == set(CATEGORIES)
    assert [s.value for s in f.report_to] == [
        "webmaster@yourdomain.com",
        "https://robotsv2.org/report",
    ]
    assert f.chain is not None and f.chain.value == "https://robotsv2.org/community-baseline.txt"
    assert f.chain_id == "robotsv2-example-v0.2.1"
    assert ("last-update", "2026-04-07 08:00 UTC") in [(k, v) for _, k, v in f.meta]


@pytest.mark.parametrize(
    ("category", "directive", "value"),
    [
        ("data-harvester", "crawl", "no"),
        ("data-harvester", "train", "no"),  # not in the block: global value
        ("ai-researcher", "derivative", "ask"),
        ("code-assistant", "quote", "yes"),
        ("code-assistant", "attribution", "preferred"),
        ("monitoring", "store", "no"),
        ("monitoring", "quote", "short-only"),
        ("ad-network", "personalise", "no"),
        ("content-generator", "summarise", "no"),
        (None, "derivative", "no"),
    ],
)
def test_override_blocks_override_only_what_they_name(
    category: str | None, directive: str, value: str
) -> None:
    setting = parse_robots2(EXAMPLE).setting(directive, category)
    assert setting is not None and setting.value == value


def test_path_rules_keep_their_line_numbers() -> None:
    robots = parse_robots2(EXAMPLE).robots()
    d = robots.decide("/admin/x", "somebot")
    assert not d.allowed and d.rule is not None and d.rule.line == 17
    assert not robots.decide("/x", "GPTBot").allowed
    assert robots.decide("/admin", "ClaudeBot").allowed


@pytest.mark.parametrize("directive", sorted(DIRECTIVE_VALUES))
def test_every_value_of_every_directive(directive: str) -> None:
    for value in DIRECTIVE_VALUES[directive]:
        f = parse_robots2(f"{directive}: {value.upper()}\n")
        assert f.directives[directive].value == value and f.diagnostics == ()
    f = parse_robots2(f"# x\n{directive}: perhaps\n")
    assert f.directives[directive].value == DIRECTIVE_VALUES[directive][-1]
    assert [(d.line, d.code) for d in f.diagnostics] == [(2, "unknown-value")]


@pytest.mark.parametrize(
    ("text", "value", "codes"),
    [
        ("rate: 30", "30", []),
        ("rate: polite", "polite", []),
        ("rate: 0", "1", ["unknown-value"]),
        ("rate: lots", "1", ["unknown-value"]),
        ("rate: 10\nrate: 20", "10", ["repeated-directive"]),
    ],
)
def test_rate_values(text: str, value: str, codes: list[str]) -> None:
    f = parse_robots2(text)
    assert f.directives["rate"].value == value
    assert [d.code for d in f.diagnostics] == codes


def test_repeated_directive_keeps_the_most_restrictive() -> None:
    f = parse_robots2("train: no\ntrain: yes\nquote: yes\nquote: short-only\n")
    assert f.directives["train"].value == "no" and f.directives["train"].line == 1
    assert f.directives["quote"].value == "short-only" and f.directives["quote"].line == 4


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("[agent: spambot]", "unknown-category"),
        ("flavour: vanilla", "unknown-directive"),
        ("content-type: gossip", "unknown-value"),
        ("primary-language: english please", "unknown-value"),
        ("chain: https://a.example/next.txt", "chain-not-last"),
        ("monetize: no", "spelling"),
        ("this line has no colon", "no-colon"),
    ],
)
def test_lint_finds_planted_error_on_its_line(line: str, code: str) -> None:
    text = f"# meta: spec-version: 0.2.1\ncrawl: yes\n{line}\nread: yes\n"
    found = [d for d in parse_robots2(text).diagnostics if d.code == code]
    assert found and found[0].line == 3


def test_chain_counts_only_on_the_last_line() -> None:
    assert parse_robots2("crawl: yes\nchain: /next.txt\n\n\n").chain is not None
    assert parse_robots2("chain: /next.txt\ncrawl: yes\n").chain is None


def test_hostile_input_never_raises() -> None:
    f = parse_robots2(b"\xff\xfe[agent: \x00]\ncrawl:\nrate: 99999999999999999999999\n[agent:")
    assert f.directives["crawl"].value == "no"


# -- chains ------------------------------------------------------------------------------


def chained(name: str, nxt: str | None, *, chain_id: str | None = None, extra: str = "") -> str:
    meta = f"# meta: chain-id: {chain_id}\n" if chain_id else ""
    tail = f"chain: {nxt}\n" if nxt else ""
    return f"{meta}# {name}\n{extra}{tail}"


def test_chain_depth_is_limited_to_three_files() -> None:
    files = {f"https://c.example/{i}.txt": chained(str(i), f"/{i + 1}.txt") for i in range(1, 10)}
    first = parse_robots2(chained("0", "/1.txt"))
    chain = resolve_chain(first, "https://c.example/0.txt", files)
    assert len(chain.links) == MAX_CHAIN_DEPTH == 3
    assert [link.url for link in chain.links][-1] == "https://c.example/2.txt"
    assert "depth" in chain.stop


def test_chain_loop_by_url_and_by_chain_id() -> None:
    files = {"https://c.example/b.txt": chained("b", "https://c.example/a.txt")}
    chain = resolve_chain(parse_robots2(chained("a", "/b.txt")), "https://c.example/a.txt", files)
    assert len(chain.links) == 2 and "loop" in chain.stop
    # A CDN mirror of the first file: another URL, the same chain-id.
    mirror = {"https://cdn.example/a.txt": chained("a2", "/x.txt", chain_id="site-a")}
    first = parse_robots2(chained("a", "https://cdn.example/a.txt", chain_id="site-a"))
    chain = resolve_chain(first, "https://c.example/a.txt", mirror)
    assert len(chain.links) == 1 and "chain-id" in chain.stop


def test_chain_keeps_what_was_collected_and_first_file_wins() -> None:
    base = chained(
        "base", None, extra="train: yes\nmonetise: ask\n[agent: ai-assistant]\nquote: no\n"
    )
    fetched: list[str] = []

    def fetch(url: str) -> str | None:
        fetched.append(url)
        return base if url.endswith("/base.txt") else None

    first = parse_robots2("train: no\nchain: https://b.example/base.txt\n")
    chain = resolve_chain(first, "https://s.example/robots2.txt", fetch)
    assert fetched == ["https://b.example/base.txt"]
    train = chain.setting("train")
    assert (
        train is not None
        and train.value == "no"
        and train.source == "https://s.example/robots2.txt"
    )
    monetise = chain.setting("monetise")
    assert monetise is not None and monetise.source == "https://b.example/base.txt"
    assert monetise.line == 3
    quote = chain.setting("quote", "ai-assistant")
    assert quote is not None and quote.value == "no"
    broken = resolve_chain(parse_robots2("chain: /gone.txt\n"), "https://s.example/r2", fetch)
    assert len(broken.links) == 1 and "could not fetch" in broken.stop


# -- the ask protocol ---------------------------------------------------------------------


def test_ask_request_description() -> None:
    identity = agent_identity("geminibot", "0.1", "search-indexer")
    req = ask_request("summarise", identity)
    assert req.method == "HEAD" and req.path == ASK_PATH
    assert req.target == "/.well-known/robots2-ask?directive=summarise&agent=geminibot/0.1"
    assert req.headers == (("X-Agent-Identity", "geminibot/0.1 (search-indexer)"),)
    with pytest.raises(ValueError):
        ask_request("quote", identity)


def response(status: int | None, *headers: tuple[str, str]) -> AskResponse:
    return AskResponse(status, tuple(headers))


def test_ask_allow_site_wide_is_cached_24h() -> None:
    out = ask_outcome(response(200, ("x-robots2-decision", " Allow ")), NOW)
    assert out.kind == "allow" and out.proceed and out.scopes == ()
    assert out.cache_until == NOW + ASK_ALLOW_CACHE == NOW + timedelta(hours=24)
    assert out.covers("/anything")


def test_ask_scopes_are_respected() -> None:
    out = ask_outcome(
        response(
            200,
            ("X-Robots2-Decision", "allow"),
            ("X-Robots2-Scope", "/blog/*"),
            ("X-Robots2-Scope", "/docs/public/*"),
        ),
        NOW,
    )
    assert out.scopes == ("/blog/*", "/docs/public/*")
    assert out.covers("/blog/2026/post") and out.covers("https://h.example/docs/public/a")
    assert not out.covers("/docs/private") and not out.covers("/blogroll")
    ledger = AskLedger()
    ledger.record("summarise", out)
    assert ledger.answer("summarise", "/blog/x", NOW) is not None
    answer = ledger.answer("summarise", "/blog/x", NOW)
    assert answer is not None and answer[0]
    outside = ledger.answer("summarise", "/docs/x", NOW)
    assert outside is not None and not outside[0]
    assert ledger.answer("summarise", "/blog/x", NOW + timedelta(hours=24)) is None


def test_ask_allow_once_is_never_cached() -> None:
    out = ask_outcome(response(200, ("X-Robots2-Decision", "allow-once")), NOW)
    assert out.kind == "allow-once" and out.proceed and out.cache_until is None
    ledger = AskLedger()
    ledger.record("train", out)
    assert ledger.answer("train", "/x", NOW) is None


@pytest.mark.parametrize(
    ("resp", "kind", "cached"),
    [
        (response(200, ("X-Robots2-Decision", "deny")), "deny", True),
        (response(404), "not-found", True),
        (response(200), "unparseable", False),
        (response(200, ("X-Robots2-Decision", "maybe")), "unparseable", False),
        (
            response(200, ("X-Robots2-Decision", "allow"), ("X-Robots2-Decision", "deny")),
            "unparseable",
            False,
        ),
        (
            response(200, ("X-Robots2-Decision", "allow"), ("X-Robots2-Scope", "blog/*")),
            "unparseable",
            False,
        ),
        (response(500), "unparseable", False),
        (response(None), "no-endpoint", False),
    ],
)
def test_ask_refusals_do_not_proceed(resp: AskResponse, kind: str, cached: bool) -> None:
    out = ask_outcome(resp, NOW)
    assert out.kind == kind and not out.proceed
    assert (out.cache_until is not None) is cached
    if cached:
        assert out.cache_until is not None and out.cache_until <= NOW + timedelta(hours=24)
        ledger = AskLedger()
        ledger.record("crawl", out)
        answer = ledger.answer("crawl", "/x", NOW)
        assert answer is not None and not answer[0]


def test_ask_429_retry_later() -> None:
    out = ask_outcome(response(429, ("Retry-After", "120")), NOW)
    assert out.kind == "retry" and not out.proceed and out.retry_at == NOW + timedelta(seconds=120)
    ledger = AskLedger()
    ledger.record("crawl", out)
    waiting = ledger.answer("crawl", "/x", NOW + timedelta(seconds=119))
    assert waiting is not None and not waiting[0]
    assert ledger.answer("crawl", "/x", NOW + timedelta(seconds=120)) is None
    default = ask_outcome(response(429, ("Retry-After", "soon")), NOW)
    assert default.retry_at == NOW + timedelta(seconds=60)
    capped = ask_outcome(response(429, ("Retry-After", "99999999")), NOW)
    assert capped.retry_at == NOW + timedelta(hours=24)


def test_size_limit_edge() -> None:
    from geminibot.policy.robots2 import MAX_ROBOTS2_BYTES

    head = b"train: no\n"
    tail = b"crawl: no\n"
    filler = b"#" + b"x" * (MAX_ROBOTS2_BYTES - len(head) - len(tail) - 2) + b"\n"
    inside = head + filler + tail
    assert len(inside) == MAX_ROBOTS2_BYTES
    assert parse_robots2(inside).directives["crawl"].value == "no"
    outside = head + b"#" + filler + tail
    f = parse_robots2(outside)
    assert "crawl" not in f.directives and f.directives["train"].value == "no"
    assert [d.code for d in f.diagnostics] == ["size-limit"]


def test_chain_walker_is_driven_by_the_caller() -> None:
    from geminibot.policy.robots2 import ChainWalker

    walker = ChainWalker(parse_robots2("train: no\nchain: /b.txt\n"), "https://w.example/a.txt")
    assert walker.next_url() == "https://w.example/b.txt"
    with pytest.raises(ValueError):
        walker.feed("https://w.example/other.txt", "x: y\n")
    walker.feed("https://w.example/b.txt", "store: no\nchain: c.txt\n")
    assert walker.next_url() == "https://w.example/c.txt"
    assert "unfinished" in walker.result().stop  # may stop early: keeps what it has
    walker.feed("https://w.example/c.txt", "chain: /d.txt\n")
    assert walker.next_url() is None  # three files: the depth limit
    chain = walker.result()
    assert [link.url.rsplit("/", 1)[1] for link in chain.links] == ["a.txt", "b.txt", "c.txt"]
    assert "depth" in chain.stop


def test_relative_chain_on_a_gemini_host_resolves_and_loops_are_loops() -> None:
    # urllib's urljoin leaves relative references unresolved for gemini://; the chain
    # must resolve them (RFC 3986) or a loop back to the first file is never seen.
    files = {
        "gemini://h/robots2.txt": b"crawl: yes\nchain: more/b.txt\n",
        "gemini://h/more/b.txt": b"train: no\nchain: ../robots2.txt\n",
    }
    first = parse_robots2(files["gemini://h/robots2.txt"])
    chain = resolve_chain(first, "gemini://h/robots2.txt", files)
    assert [link.url for link in chain.links] == ["gemini://h/robots2.txt", "gemini://h/more/b.txt"]
    assert chain.stop == "loop: gemini://h/robots2.txt was already read"


@pytest.mark.parametrize("header", ["[Agent: data-harvester]", "[AGENT : Data-Harvester]"])
def test_block_keyword_is_case_insensitive(header: str) -> None:
    # '[Agent: ...]' is a block header in any case: its 'crawl: no' is the block's alone.
    parsed = parse_robots2(f"crawl: yes\n{header}\ncrawl: no\n")
    assert parsed.setting("crawl").value == "yes"  # type: ignore[union-attr]
    assert parsed.setting("crawl", "data-harvester").value == "no"  # type: ignore[union-attr]
    assert parsed.setting("crawl", "search-indexer").value == "yes"  # type: ignore[union-attr]
