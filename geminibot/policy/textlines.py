"""Splitting a policy file into numbered lines, the same way for every dialect.

Every dialect's parser takes ``bytes | str``. Bytes are decoded as UTF-8 with
``surrogateescape`` so that an invalid octet never raises and still reaches the pattern
normaliser octet for octet (:func:`geminibot.policy.paths.normalise_pattern`).
"""

from __future__ import annotations

import re

from geminibot.policy.paths import normalise_pattern

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
#: How much of a file :func:`not_text` looks at.
TEXT_SNIFF_BYTES = 64 * 1024
#: A file whose first :data:`TEXT_SNIFF_BYTES` are more than this share of control bytes
#: (NUL and the C0 controls but tab, line breaks, form feed and ESC) is not text.
MAX_CONTROL_SHARE = 0.10
_CONTROL_BYTES = bytes([*range(0x00, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20)])
#: Leading bytes of binary formats, and what they are called.
_MAGIC = (
    (b"\x7fELF", "an ELF executable"),
    (b"\x1f\x8b", "gzip data"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"MZ", "a Windows executable"),
)


def not_text(data: bytes) -> str | None:
    """What ``data`` is if it is not text (so not a policy file of any dialect): a known
    binary format by its leading bytes, or a file of which over 10% of the first 64 KiB are
    control bytes; None for text (a stray NUL in a text file is a lint finding, not this)."""
    for magic, what in _MAGIC:
        if data.startswith(magic) and (magic != b"MZ" or b"\x00" in data[:64]):
            return what
    sample = data[:TEXT_SNIFF_BYTES]
    if not sample:
        return None
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    if controls > MAX_CONTROL_SHARE * len(sample):
        return f"binary data: {controls * 100 // len(sample)}% control bytes"
    return None


def decode(data: bytes | str) -> str:
    """``data`` as text; invalid UTF-8 octets survive as surrogate escapes."""
    if isinstance(data, str):
        return data
    text = data.decode("utf-8", "surrogateescape")
    return text[1:] if text.startswith("\ufeff") else text


def whole_lines_within(data: bytes | str, limit: int) -> tuple[bytes | str, bool]:
    """``data`` cut to the whole lines of its first ``limit`` bytes, and whether it was cut.

    The same cut as the robots.txt engine makes at MAX_ROBOTS_BYTES.
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")
    if len(raw) <= limit:
        return data, False
    cut = raw[:limit]
    last_break = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
    return (cut[: last_break + 1] if last_break >= 0 else b""), True


def numbered_lines(data: bytes | str) -> list[tuple[int, str]]:
    """``(line number, text)`` for every line; CR LF, CR and LF all end a line."""
    text = decode(data)
    if text.startswith("\ufeff"):
        text = text[1:]
    parts = _LINE_BREAK.split(text)
    if parts and parts[-1] == "":
        parts.pop()
    return list(enumerate(parts, start=1))


def pattern_text(value: str, keep: str = "") -> str:
    """A pattern from a file, percent-normalised like the paths it is matched against;
    ``keep``: characters of the pattern language left as they are."""
    return normalise_pattern(value.encode("utf-8", "surrogateescape"), keep)
