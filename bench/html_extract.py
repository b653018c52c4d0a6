"""HTML extraction speed: the standard library's html.parser (what the crawler uses,
``geminibot.http.html.parse_html``) beside selectolax (lexbor), on the same generated pages.

Both extract the title, the visible text and the links (resolved against the page URL).
selectolax is not a geminibot dependency: install it into the venv to get its column
(``.venv/bin/pip install selectolax``); without it the column says n/a. Each cell runs for
about ``--seconds`` seconds.

    .venv/bin/python bench/html_extract.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable

from geminibot.http.html import MAX_LINKS, parse_html
from geminibot.urls import resolve_reference

URL = "https://bench.test/dir/page.html"


def page(paragraphs: int) -> str:
    parts = ["<!doctype html><html lang=en><head><title>Bench page</title>"]
    parts.append("<style>p{margin:0}</style><script>var x = 1;</script></head><body>")
    for i in range(paragraphs):
        parts.append(
            f"<h2>Section {i}</h2><p>Some <b>text</b> about hedgehogs, number {i}, "
            f"with a <a href='/p/{i}.html'>link {i}</a> and <a href='rel{i}'>another</a>.</p>"
            f"<ul><li>item one<li>item two</ul>"
        )
    parts.append("</body></html>")
    return "".join(parts)


def ours(text: str) -> tuple[str, int]:
    doc = parse_html(text, URL)
    return doc.title, len(doc.links)


def selectolax_extract() -> Callable[[str], tuple[str, int]] | None:
    try:
        from selectolax.lexbor import LexborHTMLParser  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None

    def extract(text: str) -> tuple[str, int]:
        tree = LexborHTMLParser(text)
        for node in tree.css("script, style, noscript, template, svg"):
            node.decompose()
        title_node = tree.css_first("title")
        title = title_node.text(strip=True) if title_node else ""
        links = [
            resolve_reference(URL, a.attributes.get("href") or "")
            for a in tree.css("a[href], area[href]")
        ]
        body = tree.body
        _ = body.text(separator="\n") if body is not None else ""
        return title, len(links)

    return extract


def rate(fn: Callable[[str], tuple[str, int]], text: str, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn(text)
        n += 1
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    other = selectolax_extract()
    with open("/proc/cpuinfo") as fh:
        cpu = next((line.split(":", 1)[1].strip() for line in fh if "model name" in line), "?")
    print(f"python {platform.python_version()}, {cpu}")
    print("| page | KiB | html.parser pages/s | MiB/s | selectolax pages/s | MiB/s | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, paragraphs in (("small", 20), ("medium", 200), ("large", 2000)):
        text = page(paragraphs)
        kib = len(text.encode()) / 1024
        a = rate(ours, text, args.seconds)
        if other is not None:
            assert ours(text)[1] == min(other(text)[1], MAX_LINKS), "the same links"
            b = rate(other, text, args.seconds)
            cells = f"{b:,.0f} | {b * kib / 1024:.1f} | {b / a:.1f}x"
        else:
            cells = "n/a | n/a | n/a"
        print(f"| {name} | {kib:.0f} | {a:,.0f} | {a * kib / 1024:.1f} | {cells} |")


if __name__ == "__main__":
    main()
