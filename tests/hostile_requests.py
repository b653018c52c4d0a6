"""Hostile request lines for a Gemini server of the project (``serve-search``, the
range): each sent over TLS, each must be answered with a well-formed Gemini header of a
proper status, never ``40 Internal error`` (a handler that raised) and never a traceback
on the server's standard error."""

from __future__ import annotations

import re

import trio

from capsule_server.testing import raw_request

#: Seconds an answer may take (a bound on a loaded machine, not a speed test).
ANSWER_DEADLINE = 30.0
_HEADER = re.compile(rb"([1-6][0-9])(?: ([^\r\n]*))?\r\n")

#: (request line with ``{host}`` for the host served, the statuses that are proper).
COMMON: list[tuple[bytes, set[int]]] = [
    (b"\r\n", {59}),
    (b"\xff\xfe\r\n", {59}),
    (b"gemini://{host}/\xff\r\n", {59}),
    (b"gemini://{host}/%ff\r\n", {51}),
    (b"gemini://{host}/%00\r\n", {51, 59}),
    (b"gemini://{host}/" + b"a" * 1100 + b"\r\n", {59}),
    (b"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n", {59}),
    (b"https://{host}/\r\n", {53}),
    (b"gemini://other.test/\r\n", {53}),
    (b"gemini://{host}:1/\r\n", {53}),
    (b"gemini://{host}:99999/\r\n", {59}),
    (b"gemini://user@{host}/\r\n", {59}),
    (b"gemini://{host}/#fragment\r\n", {59}),
    (b"gemini://{host}/../../etc/passwd\r\n", {59}),
    (b"gemini://{host}/%2e%2e/%2e%2e/etc/passwd\r\n", {51, 59}),
    (b"//{host}/\r\n", {59}),
    (b"/\r\n", {59}),
    (b"gemini://[::1/\r\n", {59}),
    (b"gemini://{host}/a\r\nb\r\n", {51}),
    (b"gemini://\xe2\x98\x83.test/\r\n", {59}),  # not a host name: U+2603
    (b"gemini://{host}/\x00\r\n", {59}),
    (b"gemini://{host}/ \t\r\n", {51, 59}),
    (b"gemini://{host}/?" + b"%ff" * 300 + b"\r\n", {20, 59}),
    (b"gemini://{host}/" + b"/" * 1000 + b"\r\n", {20, 51, 59}),  # empty segments
]


async def answer(port: int, line: bytes, sni: str | None) -> tuple[int, str]:
    """The status and meta the server sends for ``line`` (AssertionError if what it sends
    is no Gemini header)."""
    with trio.fail_after(ANSWER_DEADLINE):
        got = await raw_request(port, line, sni)
    m = _HEADER.match(got)
    assert m is not None and len(m[0]) <= 1029, (line[:60], got[:80])
    meta = (m[2] or b"").decode("utf-8")
    assert not (m[1] == b"40" and meta == "Internal error"), (line[:60], meta)
    return int(m[1]), meta


async def check_all(port: int, host: str, requests: list[tuple[bytes, set[int]]]) -> None:
    """Send every request with the right SNI, with none and with another name; each
    answered with one of its proper statuses (53 when the SNI names another host)."""
    for template, proper in requests:
        line = template.replace(b"{host}", host.encode())
        for sni in (host, None, "other.test"):
            status, meta = await answer(port, line, sni)
            allowed = proper | ({53} if sni == "other.test" else set())
            assert status in allowed, (line[:60], sni, status, meta)
