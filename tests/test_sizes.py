"""The guide's size limits, enforced: a module of ``geminibot`` or ``capsule_server`` stays
under :data:`MAX_MODULE_LINES` lines and a class under :data:`MAX_CLASS_LINES` (from its
``class`` line to its last, ``end_lineno``), so that one grown past them fails here
instead of going unnoticed. A module or class over the limit is split along a seam (one
idea per module), not squeezed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("geminibot", "capsule_server")
#: A module has fewer lines than this (the guide: "under 700 lines").
MAX_MODULE_LINES = 700
#: A class has fewer lines than this, its decorators aside.
MAX_CLASS_LINES = 350


def modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def oversized(source: str, name: str) -> list[str]:
    """What in the module ``source`` (called ``name``) is at or over a limit, one line
    each: the module's line count, then each class's (nested ones included)."""
    found = []
    lines = len(source.splitlines())
    if lines >= MAX_MODULE_LINES:
        found.append(f"{name}: {lines} lines (a module stays under {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size >= MAX_CLASS_LINES:
                found.append(
                    f"{name}:{node.lineno}: class {node.name}: {size} lines "
                    f"(a class stays under {MAX_CLASS_LINES})"
                )
    return found


def test_the_packages_have_modules() -> None:
    assert len(modules()) > 50  # the walk found the code it checks


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_or_class_over_its_limit(package: str) -> None:
    found = [
        problem
        for path in modules()
        if path.relative_to(ROOT).parts[0] == package
        for problem in oversized(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, "split along a seam:\n" + "\n".join(found)


def class_of(lines: int) -> str:
    """A module holding one class of ``lines`` lines, from ``class`` to its last line."""
    body = "".join(f"    x{n} = {n}\n" for n in range(lines - 2))
    return f"@decorator\nclass Big:\n    '''A class.'''\n{body}"


@pytest.mark.parametrize(("lines", "flagged"), [(349, False), (350, True)])
def test_a_class_is_measured_from_its_class_line_to_its_last(lines: int, flagged: bool) -> None:
    source = class_of(lines)
    assert len(source.splitlines()) == lines + 1  # its decorator does not count
    assert bool(oversized(source, "m.py")) is flagged


@pytest.mark.parametrize(("lines", "flagged"), [(699, False), (700, True)])
def test_a_module_is_measured_in_lines(lines: int, flagged: bool) -> None:
    source = "x = 1\n" * lines
    assert bool(oversized(source, "m.py")) is flagged
