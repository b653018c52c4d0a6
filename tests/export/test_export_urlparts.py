"""A URL's parts in Common Crawl's columns (pure), the link targets' host keys, and the
documentation naming every file an export writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from geminibot.export.datasets import DATASETS, PAGE_TEXT
from geminibot.export.model import charset_of, target_host
from geminibot.export.urlparts import surt, url_parts
from geminibot.urls import parse_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("gemini://example.org/", "org,example)/"),
        ("gemini://www.Example.org/a/B.gmi?q=1", "org,example)/a/b.gmi?q=1"),
        ("gemini://example.org:1966/x", "org,example:1966)/x"),
        ("https://example.org/", "org,example)/"),
        ("http://www.org/", "org,www)/"),  # www. dropped only before a longer name
        ("gemini://192.0.2.7/p", "192.0.2.7)/p"),
        ("gemini://[2001:db8::1]:1970/", "[2001:db8::1]:1970)/"),
    ],
)
def test_surt_keys(url: str, key: str) -> None:
    assert surt(parse_url(url)) == key


def test_host_labels_and_port() -> None:
    parts = url_parts(parse_url("gemini://a.b.c.d.e.f.example:1966/p?x"))
    assert parts.labels == ("example", "f", "e", "d", "c")
    assert parts.host_name_reversed == "example.f.e.d.c.b.a"
    assert (parts.protocol, parts.port, parts.path, parts.query) == ("gemini", 1966, "/p", "x")
    address = url_parts(parse_url("https://192.0.2.7/"))
    assert address.labels == (None,) * 5 and address.host_name_reversed is None
    assert (address.protocol, address.port, address.query) == ("https", None, None)


@pytest.mark.parametrize(
    ("target", "key"),
    [
        ("gemini://example.org/a", "example.org"),
        ("gemini://example.org:1966?q", "example.org:1966"),
        ("gemini://example.org", "example.org"),
        ("https://example.org:443/x#f", "https://example.org"),
        ("mailto:a@example.org", None),
        ("gopher://example.org/", None),
        ("gemini:///nohost", None),
    ],
)
def test_target_host(target: str, key: str | None) -> None:
    assert target_host(target) == key


def test_charset_declared_or_gemini_default() -> None:
    assert charset_of("text/gemini; charset=ISO-8859-1", True) == "iso-8859-1"
    assert charset_of("text/gemini", True) == "utf-8"
    assert charset_of("text/html", False) is None
    assert charset_of("image/png", True) is None
    assert charset_of("not a mime type", True) is None


def test_the_docs_name_every_file() -> None:
    docs = (ROOT / "docs/export.md").read_text(encoding="utf-8")
    for dataset in (*DATASETS, PAGE_TEXT):
        assert f"`{dataset.file}`" in docs, dataset.file
