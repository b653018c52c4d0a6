"""Every distribution the code imports is declared in pyproject.toml, and those whose API
moves fast have an upper bound there. A fresh machine installs only what is declared, so
an import that works here only because another package pulled it in would fail there."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The code whose imports must be declared (bench/ has its own extras where it needs them).
CODE = ("geminibot", "capsule_server", "fuzz", "tests")
OURS = {"geminibot", "capsule_server", "tests", "fuzz", "bench"}
#: Distributions whose API moves fast (0.x, or majors that remove APIs each year; the
#: linters' rules change between versions): each needs an upper bound.
FAST_MOVING = {
    "trio",
    "httpx",
    "httpcore",
    "h11",
    "tantivy",
    "cryptography",
    "pytest",
    "pytest-trio",
    "psycopg",
    "psycopg-pool",
    "sqlalchemy",
    "alembic",
    "ruff",
    "mypy",
}


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> dict[str, str]:
    """Every requirement of pyproject.toml (dependencies and extras): name -> as written."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines += extra
    found = {}
    for line in lines:
        name = re.match(r"[A-Za-z0-9._-]+", line)
        assert name is not None, line
        found[normalise(name.group(0))] = line
    return found


def local_modules() -> set[str]:
    """Modules of this repository imported by bare name: the test helpers beside the
    tests, and their folders (namespace packages: ``from crawl.crawl_fakes import ...``)."""
    found = set()
    for root in (ROOT / "tests", ROOT / "fuzz", ROOT / "bench"):
        for path in root.rglob("*.py"):
            found |= {path.stem, *(p.name for p in path.relative_to(root).parents)}
    return found - {""}


def imported() -> Iterator[tuple[str, str]]:
    """(top-level module, where) of every absolute import in :data:`CODE`."""
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                for name in names:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    yield name.split(".", maxsplit=1)[0], where


@functools.cache
def third_party() -> dict[str, str]:
    """Each third-party top-level module imported, with one place that imports it (every
    file parsed once per process, however many tests read it)."""
    skip = OURS | local_modules() | set(sys.stdlib_module_names) | {"__future__"}
    found: dict[str, str] = {}
    for module, where in imported():
        if module not in skip:
            found.setdefault(module, where)
    return found


def test_every_imported_distribution_is_declared() -> None:
    declared = requirements()
    installed = importlib.metadata.packages_distributions()
    missing = []
    for module, where in sorted(third_party().items()):
        # Not installed here (an extra not set up, e.g. fuzz's atheris): the module's own
        # name must then be the declared distribution's.
        distributions = installed.get(module, [module])
        if not any(normalise(d) in declared for d in distributions):
            missing.append(f"{where} imports {module} ({', '.join(distributions)})")
    assert not missing, "declare in pyproject.toml:\n" + "\n".join(missing)


def test_fast_moving_distributions_have_an_upper_bound() -> None:
    declared = requirements()
    unbounded = [line for name, line in declared.items() if name in FAST_MOVING and "<" not in line]
    assert not unbounded, "give an upper bound: " + ", ".join(unbounded)


def test_the_import_walk_finds_what_it_must() -> None:
    """A check that finds nothing must be able to: the walk sees the libraries the code
    is built on, and leaves out the standard library and the test helpers."""
    found = third_party()
    assert {"trio", "httpx", "httpcore", "pytest", "re2"} <= set(found)
    assert not {"os", "capsule_fixtures", "geminibot"} & set(found)
    assert "re2" in importlib.metadata.packages_distributions()
    assert normalise("google-re2") in requirements()
