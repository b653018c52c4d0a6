"""Headless Chromium for the tests that check pages in a real browser (Debian's
``chromium``, installed by ``make system-packages``).

:func:`run_chromium` starts Chromium for one page (``--dump-dom``, ``--screenshot``);
:func:`browser` starts it once for several, driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ending in a NUL byte, Chromium reading fd 3
and writing fd 4). Each start costs about a second of CPU; a page in a running browser
a fraction of that.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

#: Seconds one Chromium run may take before the test gives up (a bound, not a measure).
BROWSER_BOUND = 120.0
PNG = b"\x89PNG\r\n\x1a\n"
#: The flags of every start: headless, as root in CI containers (no sandbox), no GPU.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run")
#: What ``--dump-dom`` prints: the doctype, then the document's markup.
DUMP_DOM = (
    "(document.doctype ? new XMLSerializer().serializeToString(document.doctype) + '\\n'"
    " : '') + document.documentElement.outerHTML"
)


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("headless Chromium is missing: run 'make browser' (Debian package chromium)")


async def run_chromium(profile: Path, *args: str) -> bytes:
    argv = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
    with trio.fail_after(BROWSER_BOUND):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True)
    return bytes(done.stdout)


class Page:
    """A tab of a :func:`browser`, ``width`` x ``height`` CSS pixels: it loads a page, and
    returns its DOM as ``--dump-dom`` prints it and screenshots as ``--screenshot`` takes
    them."""

    def __init__(self, devtools: DevTools, session: str) -> None:
        self._devtools = devtools
        self._session = session

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        return await self._devtools.call(method, params, self._session)

    async def load(self, url: str, *, dark: bool = False) -> str:
        """Load ``url`` (in the dark colour scheme if ``dark``, as ``--force-dark-mode``
        would) and return its DOM once it has loaded."""
        scheme = {"name": "prefers-color-scheme", "value": "dark" if dark else "light"}
        await self.call("Emulation.setEmulatedMedia", features=[scheme])
        navigated = await self.call("Page.navigate", url=url)
        if "errorText" in navigated:
            raise RuntimeError(f"Chromium could not load {url}: {navigated['errorText']}")
        await self._devtools.event("Page.loadEventFired", self._session)
        found = await self.call("Runtime.evaluate", expression=DUMP_DOM, returnByValue=True)
        return str(found["result"]["value"])

    async def screenshot(self) -> bytes:
        """A PNG of the page as shown."""
        shot = await self.call("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])


class DevTools:
    """The DevTools protocol on the pipe of one Chromium: one command at a time, the
    events that arrive meanwhile kept until asked for."""

    def __init__(self, commands: trio.lowlevel.FdStream, replies: trio.lowlevel.FdStream) -> None:
        self._commands = commands
        self._replies = replies
        self._unread = b""
        self._events: list[dict[str, Any]] = []
        self._last_id = 0

    async def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        """Send a command; its result (an error answer raises)."""
        await self.send(method, params, session)
        while True:
            reply = await self._next()
            if reply.get("id") == self._last_id:
                if "error" in reply:
                    raise RuntimeError(f"Chromium refused {method}: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result
            if "method" in reply:
                self._events.append(reply)

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> None:
        """Send a command without waiting for its answer."""
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        await self._commands.send_all(json.dumps(message).encode() + b"\0")

    async def aclose(self) -> None:
        await self._commands.aclose()
        await self._replies.aclose()

    async def event(self, method: str, session: str) -> dict[str, Any]:
        """The next event ``method`` of the tab of ``session`` (kept, or to come)."""
        while True:
            for event in self._events:
                if event["method"] == method and event.get("sessionId") == session:
                    self._events.remove(event)
                    return event
            reply = await self._next()
            if "method" in reply:
                self._events.append(reply)

    async def _next(self) -> dict[str, Any]:
        while b"\0" not in self._unread:
            data = await self._replies.receive_some(1 << 16)
            if not data:
                raise RuntimeError("Chromium closed its DevTools pipe (see chromium.log)")
            self._unread += data
        message, self._unread = self._unread.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed


@asynccontextmanager
async def browser(profile: Path, width: int = 900, height: int = 900) -> AsyncIterator[Page]:
    """One headless Chromium (its profile in ``profile``, its log in
    ``profile/chromium.log``) with one tab of ``width`` x ``height``, closed on leaving;
    all of it within :data:`BROWSER_BOUND` seconds."""
    profile.mkdir(parents=True, exist_ok=True)
    to_chromium, from_us = os.pipe()
    to_us, from_chromium = os.pipe()
    # bash (dash takes no fd above 9) puts the pipe's ends on fds 3 and 4, then runs chromium
    shell = f'exec "$@" 3<&{to_chromium} 4>&{from_chromium} {to_chromium}<&- {from_chromium}>&-'
    argv = ["bash", "-c", shell, "bash", chromium(), *FLAGS, f"--user-data-dir={profile}"]
    argv.append("--remote-debugging-pipe")
    with (profile / "chromium.log").open("wb") as log, trio.fail_after(BROWSER_BOUND):
        devtools = DevTools(trio.lowlevel.FdStream(from_us), trio.lowlevel.FdStream(to_us))
        try:
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(to_chromium, from_chromium),
            )
        except BaseException:
            await devtools.aclose()
            raise
        finally:
            os.close(to_chromium)
            os.close(from_chromium)
        try:
            target = await devtools.call("Target.createTarget", {"url": "about:blank"})
            attached = await devtools.call(
                "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
            )
            page = Page(devtools, attached["sessionId"])
            await page.call("Page.enable")
            await page.call(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            yield page
            await devtools.send("Browser.close")  # (it may close the pipe before answering)
            await process.wait()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                await process.wait()
                await devtools.aclose()
