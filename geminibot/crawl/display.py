"""The crawl's progress display: one status line, repainted in place on a terminal, a log
line every :data:`LOG_INTERVAL` seconds otherwise.

The line never exceeds the terminal's width (read at every repaint, so a resized window
is followed): its parts are listed most important first and the least important ones are
left out until it fits. It says what the crawl waits for when no request is in flight
("next va.test in 8 s"), prints durations for people (:func:`human_duration`), and its
pages/s is over the last :data:`RATE_WINDOW` seconds, not the whole run. It reads only the
crawler's in-memory counters (:class:`~geminibot.crawl.crawler.Progress`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

from geminibot.cliutil import LINE_WIDTH, clipped, counted, human_duration, terminal_safe
from geminibot.crawl.progress import Progress

#: Seconds between two progress log lines when standard error is not a terminal.
LOG_INTERVAL = 5.0
#: What begins each progress line written to a log (not a terminal).
LOG_PREFIX = "crawl: "
#: Pages/s is measured over this many recent seconds.
RATE_WINDOW = 30.0
#: Printable characters of a host name shown; longer names are cut with "…".
MAX_HOST_SHOWN = 32


def _shown(host: str, room: int = MAX_HOST_SHOWN) -> str:
    """A host name safe for a terminal, cut to ``room`` characters (at least 8)."""
    return clipped(terminal_safe(host), max(8, min(room, MAX_HOST_SHOWN)))


class RecentRate:
    """Pages per second over the last ``window`` seconds of the crawl's clock."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()

    def update(self, elapsed: float, pages: int) -> float:
        self._samples.append((elapsed, pages))
        while len(self._samples) > 2 and elapsed - self._samples[1][0] >= self.window:
            self._samples.popleft()
        t0, p0 = self._samples[0]
        span = elapsed - t0
        return (pages - p0) / span if span > 0 else 0.0


def status_parts(p: Progress, rate: float, width: int = LINE_WIDTH) -> list[str]:
    """The status line's parts, most important first (what the crawl waits for is third,
    its host name cut so that the first three fit in ``width``)."""
    head = [counted(p.pages, "page"), f"{rate:.1f}/s"]
    if p.in_flight:
        doing = f"{p.in_flight} in flight"
    elif p.next_request is not None:
        host, wait = p.next_request
        frame = f"next  in {human_duration(wait)}"
        room = width - sum(len(h) + 2 for h in head) - len(frame)
        doing = f"next {_shown(host, room)} in {human_duration(wait)}"
    else:
        doing = "working"
    parts = [*head, doing, f"queue {p.queued}"]
    parts.append(f"hosts {p.hosts_active}/{p.hosts_seen}")
    if p.errors:
        parts.append(f"errors {p.errors}")
    if p.refused:
        parts.append(f"refused {p.refused}")
    if p.slow_downs:
        parts.append(f"44s {p.slow_downs}")
    parts.append(f"requests {p.requests}")
    parts.append(human_duration(p.elapsed))
    return parts


def fit(parts: list[str], width: int) -> str:
    """As many leading parts as fit in ``width`` columns (the first one cut if need be)."""
    line = parts[0]
    for part in parts[1:]:
        candidate = f"{line}  {part}"
        if len(candidate) > width:
            break
        line = candidate
    return line[:width]


def terminal_width(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (``COLUMNS`` wins, as in shutil)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    try:
        return os.get_terminal_size(stream.fileno()).columns or LINE_WIDTH
    except (ValueError, OSError, AttributeError):
        return shutil.get_terminal_size((LINE_WIDTH, 24)).columns


class Display:
    """Call with each :class:`Progress`; :meth:`end` clears the line."""

    def __init__(
        self,
        stream: TextIO,
        *,
        width: Callable[[], int] | None = None,
        tty: bool | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._width = width if width is not None else (lambda: terminal_width(stream))
        self._monotonic = monotonic
        self._last_log = monotonic()
        self._rate = RecentRate()

    def line(self, p: Progress, width: int) -> str:
        return fit(status_parts(p, self._rate.update(p.elapsed, p.pages), width), width)

    def __call__(self, p: Progress) -> None:
        if self.tty:
            # One column short of the width: a line that fills the last column wraps on
            # some terminals.
            self.stream.write("\r\x1b[K" + self.line(p, max(1, self._width() - 1)))
            self.stream.flush()
        elif self._monotonic() - self._last_log >= LOG_INTERVAL:
            self._last_log = self._monotonic()
            line = self.line(p, LINE_WIDTH - len(LOG_PREFIX))
            print(LOG_PREFIX + line, file=self.stream, flush=True)

    def end(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
