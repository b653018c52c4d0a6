"""Diagnostics: what a parser noticed about a policy file, with the line it is about.

Every dialect's parser keeps a tuple of these instead of raising. ``lint`` prints them as
``FILE:LINE: level: message [code]`` and, under a warning or an error, ``  hint: ...``
(:mod:`geminibot.policy.lint` gives each its hint); ``--json`` prints ``as_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["error", "warning", "info"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding. ``line`` is 1-based; 0 means the file as a whole."""

    line: int
    level: Level
    code: str
    message: str
    #: What to do about it (every warning and error has one once linted), else "".
    hint: str = ""

    def format(self, filename: str) -> str:
        where = f"{filename}:{self.line}" if self.line else filename
        return f"{where}: {self.level}: {self.message} [{self.code}]"

    def as_dict(self) -> dict[str, object]:
        return {
            "line": self.line,
            "level": self.level,
            "code": self.code,
            "message": self.message,
            "hint": self.hint or None,
        }


def has_errors(diagnostics: tuple[Diagnostic, ...] | list[Diagnostic]) -> bool:
    return any(d.level == "error" for d in diagnostics)
