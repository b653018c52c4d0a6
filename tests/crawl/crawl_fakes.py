"""A scripted Gemini site for crawler tests: a fetch function over a dict, with an access log.

Not a mock of our own I/O: the crawler's fetcher is an injected dependency, and this is
the smallest honest server there is. End-to-end tests use the real capsule server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import trio

from geminibot.crawl.adapters import FetchResult

Answer = FetchResult | list[FetchResult]


class FakeSite:
    def __init__(self, pages: dict[str, Answer], *, latency: float = 0.0) -> None:
        self.pages = pages
        self.latency = latency
        self.log: list[tuple[float, str]] = []  # (trio time, url) per request
        self.in_flight: dict[str, int] = {}
        self.max_in_flight_per_host = 0
        self.max_in_flight = 0  # across hosts
        self.on_request: Callable[[str], None] | None = None

    async def fetch(self, url: str, *, max_body: int | None = None) -> FetchResult:
        host = url.split("/")[2]
        self.log.append((trio.current_time(), url))
        if self.on_request is not None:
            self.on_request(url)
        self.in_flight[host] = self.in_flight.get(host, 0) + 1
        self.max_in_flight_per_host = max(self.max_in_flight_per_host, self.in_flight[host])
        self.max_in_flight = max(self.max_in_flight, sum(self.in_flight.values()))
        try:
            if self.latency:
                await trio.sleep(self.latency)
            answer = self.pages.get(url, FetchResult(51, "not found"))
            if isinstance(answer, list):
                answer = answer.pop(0) if len(answer) > 1 else answer[0]
            if max_body is not None and len(answer.body) >= max_body:  # as a client cuts it
                return replace(answer, body=answer.body[:max_body], cut=True, error="cut")
            return answer
        finally:
            self.in_flight[host] -= 1

    def urls(self) -> list[str]:
        return [u for _, u in self.log]


def gmi(text: str) -> FetchResult:
    return FetchResult(20, "text/gemini", text.encode())


def generated_site(hosts: int, pages: int) -> dict[str, Answer]:
    """``hosts`` hosts of ``pages`` pages each; every page links to the next two and to
    the same page on the next host. robots.txt disallows /private/."""
    site: dict[str, Answer] = {}
    for h in range(hosts):
        name = f"h{h}.test"
        site[f"gemini://{name}/robots.txt"] = FetchResult(
            20, "text/plain", b"User-agent: *\nDisallow: /private/\n"
        )
        for p in range(pages):
            nxt = f"gemini://h{(h + 1) % hosts}.test/{p}.gmi"
            body = (
                f"# Page {p} of {name}\nword{p} common text\n"
                f"=> /{p + 1}.gmi next\n=> /{p + 2}.gmi skip\n=> {nxt} across\n"
                f"=> /private/{p}.gmi hidden\n"
            )
            site[f"gemini://{name}/{p}.gmi"] = gmi(body)
        site[f"gemini://{name}/"] = gmi(f"# {name}\n=> /0.gmi start\n")
    return site
