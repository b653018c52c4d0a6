"""--connect-to / --resolve rules (geminibot.net.connect): parsing, IDN and IPv6 hosts,
patterns, the loopback guard."""

from __future__ import annotations

import argparse

import pytest

from geminibot.cliutil import CommandError
from geminibot.net import connect as connect_module
from geminibot.net.connect import (
    ConnectRule,
    ConnectToError,
    Resolver,
    add_connect_to_option,
    connect_rules,
    parse_connect_to,
    parse_resolve,
    route,
)
from geminibot.net.errors import ConnectionFailed
from geminibot.urls import parse_url

PUNY = "xn--bcher-kva.test"  # bücher.test


def host_of(url: str) -> str:
    return parse_url(url).host


def test_connect_to_fields() -> None:
    assert parse_connect_to("H.Test:1965:127.0.0.1:2000") == ConnectRule(
        "h.test", 1965, "127.0.0.1", 2000
    )
    assert parse_resolve("h.test:1965:127.0.0.2") == ConnectRule("h.test", 1965, "127.0.0.2", 1965)


@pytest.mark.parametrize(
    "rule",
    [
        "bücher.test:1965:127.0.0.1:2000",
        f"{PUNY}:1965:127.0.0.1:2000",
        "BÜCHER.test.:1965:127.0.0.1:2000",
    ],
)
@pytest.mark.parametrize(
    "url", ["gemini://bücher.test/", f"gemini://{PUNY}/", "gemini://b%C3%BCcher.test/"]
)
def test_idn_host_matches_in_unicode_and_punycode(rule: str, url: str) -> None:
    resolver = Resolver([parse_connect_to(rule)])
    assert resolver(host_of(url), 1965) == ("127.0.0.1", 2000)
    assert resolver(host_of(url), 1966) == (PUNY, 1966)  # another port: not this rule


def test_idn_patterns_match_both_forms() -> None:
    resolver = Resolver([parse_connect_to("*.bücher.test:1965:127.0.0.1:2000")])
    assert resolver(host_of("gemini://www.bücher.test/"), 1965) == ("127.0.0.1", 2000)
    unicode_wildcard = Resolver([parse_connect_to("bü*.test:1965:127.0.0.1:2000")])
    assert unicode_wildcard(PUNY, 1965) == ("127.0.0.1", 2000)
    puny_wildcard = Resolver([parse_connect_to("xn--*.test:1965:127.0.0.1:2000")])
    assert puny_wildcard(PUNY, 1965) == ("127.0.0.1", 2000)
    assert puny_wildcard("plain.test", 1965) == ("plain.test", 1965)


def test_ipv6_address_and_host() -> None:
    assert parse_connect_to("h.test:1965:[::1]:2000").address == "::1"
    assert parse_resolve("h.test:1965:[::1]").address == "::1"
    rule = parse_connect_to("[2001:DB8:0::1]:1965:127.0.0.1:2000")
    assert rule.host == "2001:db8::1"
    assert Resolver([rule])(host_of("gemini://[2001:db8::1]/"), 1965) == ("127.0.0.1", 2000)


def test_first_matching_rule_wins() -> None:
    resolver = Resolver(
        [parse_connect_to("a.test:1965:127.0.0.1:1"), parse_connect_to("*.test:1965:127.0.0.2:2")]
    )
    assert resolver("a.test", 1965) == ("127.0.0.1", 1)
    assert resolver("b.test", 1965) == ("127.0.0.2", 2)


def test_routes_are_matched_once_per_host_up_to_max_routes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rules are matched once per host and port (the crawler asks on every request), and
    the memory of routes starts again empty past MAX_ROUTES."""
    monkeypatch.setattr(connect_module, "MAX_ROUTES", 2)
    matched: list[str] = []

    class Counting(ConnectRule):
        def matches(self, host: str, port: int) -> bool:
            matched.append(host)
            return super().matches(host, port)

    rule = parse_connect_to("*.test:1965:127.0.0.2:2")
    resolver = Resolver([Counting(rule.host, rule.port, rule.address, rule.to_port)])
    for host in ("a.test", "a.test", "b.test", "a.test", "b.test"):
        assert resolver(host, 1965) == ("127.0.0.2", 2)
    assert matched == ["a.test", "b.test"]  # two routes fit
    assert resolver("other.example", 1965) == ("other.example", 1965)  # the third: full
    assert resolver("a.test", 1965) == ("127.0.0.2", 2)
    assert matched == ["a.test", "b.test", "other.example", "a.test"]


@pytest.mark.parametrize(
    "bad",
    [
        "h.test:1965:127.0.0.1",  # no PORT2
        "h.test:1965",
        "h.test:x:127.0.0.1:2000",
        "h.test:0:127.0.0.1:2000",
        "h.test:1965:127.0.0.1:65536",
        "h.test:1965:[::1:2000",
        "[zz::1]:1965:127.0.0.1:2000",
        "-bad-:1965:127.0.0.1:2000",
        "",
    ],
)
def test_bad_connect_to_rules(bad: str) -> None:
    with pytest.raises(ConnectToError, match="--connect-to"):
        parse_connect_to(bad)


def test_bad_resolve_rules() -> None:
    for bad in ("h.test:1965", "h.test:1965:127.0.0.1:2000", "h.test:65536:127.0.0.1"):
        with pytest.raises(ConnectToError, match="--resolve"):
            parse_resolve(bad)


def test_a_command_line_s_rules() -> None:
    """--connect-to rules come before --resolve rules; a bad one is a usage error."""
    parser = argparse.ArgumentParser()
    add_connect_to_option(parser)
    args = parser.parse_args(["--connect-to", "*.test:1965:127.0.0.1:2000"] * 2)
    assert connect_rules(args.connect_to, ["a.test:1965:127.0.0.2"]) == [
        ConnectRule("*.test", 1965, "127.0.0.1", 2000),
        ConnectRule("*.test", 1965, "127.0.0.1", 2000),
        ConnectRule("a.test", 1965, "127.0.0.2", 1965),
    ]
    assert connect_rules([]) == []
    with pytest.raises(CommandError, match=r"--connect-to 'a\.test:1965'"):
        connect_rules(["a.test:1965"])
    with pytest.raises(CommandError, match="--resolve"):
        connect_rules([], ["a.test"])


def test_the_option_s_help_says_when_it_applies() -> None:
    plain, scoped = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_connect_to_option(plain)
    add_connect_to_option(scoped, "with --against gemini://...")
    helps = [next(a.help for a in p._actions if a.dest == "connect_to") for p in (plain, scoped)]
    assert helps[0] is not None and helps[0].startswith("connect to ADDR:PORT2 for HOST:PORT")
    assert helps[1] == f"with --against gemini://...: {helps[0]}"


def test_loopback_only_refuses_other_addresses() -> None:
    guarded = Resolver([parse_connect_to("*.test:1965:127.0.0.1:2000")], loopback_only=True)
    assert guarded("a.test", 1965) == ("127.0.0.1", 2000)
    assert guarded("localhost", 1965) == ("localhost", 1965)
    assert guarded("::1", 1965) == ("::1", 1965)
    for elsewhere in (("a.test", 1966), ("example.org", 1965), ("10.0.0.1", 1965)):
        with pytest.raises(ConnectionFailed, match="--test-range"):
            guarded(*elsewhere)


def test_route_accepts_a_mapping_or_a_function() -> None:
    assert route(None, "h.test", 1965) == ("h.test", 1965)
    mapping = {"h.test:1966": ("127.0.0.1", 1), "h.test": ("127.0.0.1", 2)}
    assert route(mapping, "h.test", 1966) == ("127.0.0.1", 1)
    assert route(mapping, "h.test", 1965) == ("127.0.0.1", 2)
    assert route(mapping, "o.test", 1965) == ("o.test", 1965)
    assert route(lambda host, port: (host.upper(), port + 1), "h.test", 1) == ("H.TEST", 2)
