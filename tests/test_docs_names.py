"""The design documents name only what exists: every module, file, ``Class.method``,
``module.NAME`` and ``table.column`` that docs/architecture.md and docs/crawl.md cite in
backticks is found in the code (a renamed or deleted one fails here, not in a reader's
hands)."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("docs/architecture.md", "docs/crawl.md")
#: Backticked words that name something (a dotted name, a call, a path), not prose.
NAME = re.compile(r"`([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
PATH = re.compile(r"`((?:[\w.-]+/)*[\w-]+\.py|(?:[\w.-]+/)+)`")
#: Names from outside the project the documents cite, and what they are.
OUTSIDE = {"json": "json", "SSLSocket": "ssl.SSLSocket"}
#: Backticked file names that are not the project's (said to be absent, or a pattern).
NOT_OURS = {"alembic.ini", "DB.warc/"}
#: A file's name (cited as a path, not as a dotted name).
FILE = re.compile(r"[\w-]+\.(py|md|toml|db|gmi|txt|ini)")


def cited(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return sorted(
        {
            (doc, m.group(1))
            for doc in DOCS
            for m in pattern.finditer((ROOT / doc).read_text(encoding="utf-8"))
        }
    )


@functools.cache
def modules() -> dict[str, list[str]]:
    """Every module of the project by its last name (``traps``: its full names)."""
    found: dict[str, list[str]] = {}
    for package in ("geminibot", "capsule_server"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.setdefault(parts[-1], []).append(".".join(parts))
    return found


@functools.cache
def classes() -> dict[str, list[str]]:
    """Every class of ``geminibot`` by its name: the modules defining it."""
    found: dict[str, list[str]] = {}
    for path in (ROOT / "geminibot").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(module)
    return found


@functools.cache
def columns() -> dict[str, set[str]]:
    """The crawl database's tables and their columns (both engines' schemas)."""
    from geminibot.store.schema import metadata

    tables: dict[str, set[str]] = {}
    for engine in ("sqlite", "postgresql"):
        for table in metadata(engine).tables.values():
            tables.setdefault(table.name, set()).update(c.name for c in table.columns)
    return tables


def has(owner: object, attributes: list[str]) -> bool:
    for name in attributes:
        if isinstance(owner, type) and name in getattr(owner, "__annotations__", {}):
            return True  # a dataclass field without a default
        if not hasattr(owner, name):
            return False
        owner = getattr(owner, name)
    return True


def exists(name: str) -> bool:
    """Whether ``name`` (``a.b.c``) is a module, a module's attribute, a class's
    attribute or a table's column."""
    first, *rest = name.split(".")
    if first in columns() and len(rest) == 1:
        return rest[0] in columns()[first]
    if first in OUTSIDE:
        module, _, attribute = OUTSIDE[first].partition(".")
        owner = importlib.import_module(module)
        return has(owner, [attribute, *rest] if attribute else rest)
    candidates = [name] if first in ("geminibot", "capsule_server") else []
    candidates += [f"geminibot.{name}"]
    candidates += [f"{full}.{'.'.join(rest)}".rstrip(".") for full in modules().get(first, [])]
    candidates += [f"{m}.{name}" for m in classes().get(first, [])]
    for candidate in candidates:
        parts = candidate.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                owner = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            if has(owner, parts[cut:]):
                return True
            break
    return False


def path_exists(path: str) -> bool:
    """A path from the repository's root, from ``geminibot/``, or a module's file name
    in one of its packages."""
    if (ROOT / path).exists() or (ROOT / "geminibot" / path).exists():
        return True
    return "/" not in path and bool(list((ROOT / "geminibot").rglob(path)))


@pytest.mark.parametrize(
    ("doc", "name"), [(doc, name) for doc, name in cited(NAME) if not FILE.fullmatch(name)]
)
def test_a_cited_name_exists(doc: str, name: str) -> None:
    assert exists(name), f"{doc} cites `{name}`, which the code does not have"


@pytest.mark.parametrize(("doc", "path"), cited(PATH))
def test_a_cited_path_exists(doc: str, path: str) -> None:
    if path in NOT_OURS:
        return
    assert path_exists(path), f"{doc} cites `{path}`, which the repository does not have"


def test_the_check_finds_what_does_not_exist() -> None:
    assert not exists("Crawler.next_due")
    assert not exists("index.migrate")
    assert not exists("urls.no_such_column")
    assert exists("Frontier.add") and exists("traps.MAX_URL_LENGTH")
    assert exists("urls.next_visit") and exists("geminibot.store.database.open_database")
    assert not path_exists("store/no_such.py") and path_exists("store/frontier.py")


def test_the_tests_a_docstring_cites_exist() -> None:
    """A docstring that states an invariant names the tests that hold it: they exist."""
    cited_tests = {
        (path.relative_to(ROOT).as_posix(), m.group(1))
        for path in (ROOT / "geminibot").rglob("*.py")
        for m in re.finditer(r"``(tests/[\w/]+\.py)``", path.read_text(encoding="utf-8"))
    }
    assert ("geminibot/store/frontier.py", "tests/store/test_store_attempts.py") in cited_tests
    assert [(m, t) for m, t in sorted(cited_tests) if not (ROOT / t).is_file()] == []
