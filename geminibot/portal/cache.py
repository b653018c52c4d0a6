"""The portal's page cache: answers as rendered (HTML, or a passed-through body), by
Gemini URL, so a page is fetched and rendered once however often it is asked for.
Pure: times are parameters."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from geminibot.portal.pages import HTTPResponse


class PageCache:
    """Rendered answers kept ``seconds`` each, ``max_bytes`` of bodies in all (the least
    recently used dropped first; a bigger answer is not kept)."""

    def __init__(self, max_bytes: int, seconds: float) -> None:
        self.max_bytes = max_bytes
        self.seconds = seconds
        self.size = 0
        self._answers: OrderedDict[str, tuple[HTTPResponse, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def __contains__(self, key: str) -> bool:
        return key in self._answers

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._answers))

    def get(self, key: str, now: float) -> HTTPResponse | None:
        found = self._answers.get(key)
        if found is None:
            return None
        if found[1] <= now:
            self._drop(key)
            return None
        self._answers.move_to_end(key)
        return found[0]

    def put(self, key: str, answer: HTTPResponse, now: float) -> None:
        if key in self._answers:
            self._drop(key)
        if len(answer.body) > self.max_bytes:
            return
        self._answers[key] = (answer, now + self.seconds)
        self.size += len(answer.body)
        while self.size > self.max_bytes:
            self._drop(next(iter(self._answers)))

    def _drop(self, key: str) -> None:
        answer, _ = self._answers.pop(key)
        self.size -= len(answer.body)
