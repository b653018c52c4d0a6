"""The layers of docs/architecture.md, enforced on every module's imports (ast, so an
import inside a function counts as much as one at the top)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("geminibot", "capsule_server")

#: Each unit's layer (docs/architecture.md): a unit imports only units of lower layers.
LAYERS = {
    "geminibot": 0,  # the package itself (__version__)
    "geminibot.urls": 0,
    "geminibot.cliutil": 0,
    "geminibot.defaults": 0,
    "geminibot.policy": 1,
    "geminibot.net": 1,
    "geminibot.gemini": 2,
    "geminibot.http": 2,
    "geminibot.store": 2,
    "geminibot.index": 3,
    "geminibot.feeds": 3,
    "geminibot.census": 3,
    "geminibot.crawl": 4,
    "geminibot.classify": 4,
    "geminibot.service": 4,
    "geminibot.why": 5,
    "geminibot.portal": 6,
    "geminibot.searchcap": 6,
    "geminibot.export": 6,
    "geminibot.cli": 7,
    "geminibot.__main__": 8,
    "capsule_server": 9,
}
#: Modules whose very point is to import nothing else of geminibot.
STANDALONE = ("geminibot.urls", "geminibot.cliutil", "geminibot.defaults")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported (a submodule when ``from package import submodule``)
    names: tuple[str, ...]  # names taken from it (``from target import a, b``)
    line: int


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield module_name(path), path


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every check that walks it."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imports(module: str, path: Path) -> Iterator[Import]:
    is_package = path.name == "__init__.py"
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                package = module.split(".")
                package = package if is_package else package[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            names = tuple(a.name for a in node.names)
            submodules = [n for n in names if is_module(f"{base}.{n}")]
            for name in submodules:
                yield Import(module, f"{base}.{name}", (), node.lineno)
            rest = tuple(n for n in names if n not in submodules)
            if rest or not submodules:
                yield Import(module, base, rest, node.lineno)


def unit(module: str) -> str:
    """The layer unit of a module: its package below geminibot, or the top-level module."""
    parts = module.split(".")
    if parts[0] != "geminibot":
        return parts[0]
    return ".".join(parts[:2])


def ours(name: str) -> bool:
    return name.split(".", maxsplit=1)[0] in PACKAGES


@functools.cache
def every_import() -> tuple[Import, ...]:
    """Every import of one of our modules, in every module (parsed when a test first asks,
    not when the suite is collected: each pytest worker collects this file)."""
    return tuple(i for module, path in modules() for i in imports(module, path) if ours(i.target))


def where(i: Import) -> str:
    return f"{i.module}:{i.line} imports {i.target}"


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    """A check that finds nothing must be able to: the walk sees function-level and
    relative imports and tells submodules from names; the rules flag what they forbid."""
    source = tmp_path / "x.py"
    source.write_text(
        "from . import robots\n"
        "from .robots import parse_robots\n"
        "def f():\n"
        "    from geminibot.crawl.crawler import _private\n"
        "    import geminibot.gemini.client\n"
    )
    found = list(imports("geminibot.policy.x", source))
    assert [(i.target, i.names) for i in found] == [
        ("geminibot.policy.robots", ()),
        ("geminibot.policy.robots", ("parse_robots",)),
        ("geminibot.crawl.crawler", ("_private",)),
        ("geminibot.gemini.client", ()),
    ]
    assert len(upward(found)) == 2 and len(private(found)) == 1
    back = Import("geminibot.crawl.x", "geminibot.policy.robots", (), 1)
    assert cycles([*found, back]) == [
        "geminibot.crawl -> geminibot.policy -> geminibot.crawl",
        "geminibot.policy -> geminibot.crawl -> geminibot.policy",
    ]
    assert any(
        i.module == "geminibot.cli" and i.target == "geminibot.crawl.cli" for i in every_import()
    )


def test_every_unit_has_a_layer() -> None:
    missing = sorted({unit(m) for m, _ in modules()} - set(LAYERS))
    assert not missing, f"{missing}: place each in docs/architecture.md and in LAYERS of this test"


def upward(found: Sequence[Import]) -> list[str]:
    return [
        f"{where(i)} ({unit(i.module)} is layer {LAYERS.get(unit(i.module))}, "
        f"{unit(i.target)} is layer {LAYERS.get(unit(i.target))})"
        for i in found
        if unit(i.module) != unit(i.target)
        and LAYERS.get(unit(i.module), 99) <= LAYERS.get(unit(i.target), 99)
    ]


def test_imports_only_run_downward() -> None:
    found = upward(every_import())
    assert not found, "\n".join(found)


def test_geminibot_never_imports_capsule_server() -> None:
    found = [
        where(i)
        for i in every_import()
        if unit(i.module) != "capsule_server" and unit(i.target) == "capsule_server"
    ]
    assert not found, "\n".join(found)


def test_policy_imports_no_network_code() -> None:
    network = {"geminibot.net", "geminibot.gemini", "geminibot.http", "geminibot.crawl"}
    found = [
        where(i)
        for i in every_import()
        if unit(i.module) == "geminibot.policy" and unit(i.target) in network
    ]
    assert not found, "\n".join(found)


def test_standalone_modules_import_nothing_of_geminibot() -> None:
    found = [where(i) for i in every_import() if i.module in STANDALONE]
    assert not found, "\n".join(found)


def private(found: Sequence[Import]) -> list[str]:
    """``from a.b import _x`` (or ``import a._b`` from another unit) reaches into another
    module's internals."""
    names = [
        f"{where(i)} for {name}"
        for i in found
        for name in i.names
        if name.startswith("_") and not name.startswith("__") and i.target != i.module
    ]
    modules = [
        where(i)
        for i in found
        if any(p.startswith("_") and not p.startswith("__") for p in i.target.split("."))
        and unit(i.target) != unit(i.module)
    ]
    return names + modules


def test_no_private_name_crosses_a_module() -> None:
    found = private(every_import())
    assert not found, "\n".join(found)


def cycles(found: Sequence[Import], node: Callable[[str], str] = unit) -> list[str]:
    """Every cycle of the graph whose nodes are ``node(module)`` (units by default), once
    per node it passes through; an import within one node is no edge."""
    graph: dict[str, set[str]] = {}
    for i in found:
        if node(i.module) != node(i.target):
            graph.setdefault(node(i.module), set()).add(node(i.target))
    loops = []
    for start in sorted(graph):
        stack = [(start, [start])]
        seen: set[str] = set()
        while stack:
            here, path = stack.pop()
            for nxt in sorted(graph.get(here, ())):
                if nxt == start:
                    loops.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return loops


def test_no_cycles_between_units() -> None:
    found = cycles(every_import())
    assert not found, "\n".join(found)


def within_units(found: Sequence[Import]) -> list[Import]:
    """The imports between modules of one unit (a package and its subpackages)."""
    return [i for i in found if unit(i.module) == unit(i.target)]


def test_no_cycles_between_the_modules_of_a_package() -> None:
    """A package's ``__init__`` counts as a module of it, and an import only for type
    checking counts too: a cycle there is one a reader must untangle all the same."""
    found = cycles(within_units(every_import()), node=lambda name: name)
    assert not found, "\n".join(found)


def test_the_module_cycle_check_sees_a_cycle_inside_a_package() -> None:
    found = [
        Import("geminibot.index.search", "geminibot.index.stats", (), 1),
        Import("geminibot.index.stats", "geminibot.index.search", ("host_filter",), 1),
        Import("geminibot.index.stats", "geminibot.policy", (), 1),
    ]
    assert cycles(within_units(found), node=lambda name: name) == [
        "geminibot.index.search -> geminibot.index.stats -> geminibot.index.search",
        "geminibot.index.stats -> geminibot.index.search -> geminibot.index.stats",
    ]


@dataclass(frozen=True)
class Class:
    module: str
    name: str
    line: int
    docstring: str | None


def classes(module: str, path: Path) -> Iterator[Class]:
    """Every class a module defines, nested ones included."""
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ClassDef):
            yield Class(module, node.name, node.lineno, ast.get_docstring(node))


@functools.cache
def every_class() -> tuple[Class, ...]:
    """Every class of every module (found when a test first asks, as :func:`every_import`)."""
    return tuple(c for module, path in modules() for c in classes(module, path))


def shared_names(found: Sequence[Class]) -> list[str]:
    """Each class name defined more than once, with where."""
    by_name: dict[str, list[Class]] = {}
    for c in found:
        by_name.setdefault(c.name, []).append(c)
    return [
        f"{name}: " + ", ".join(f"{c.module}:{c.line}" for c in same)
        for name, same in sorted(by_name.items())
        if len(same) > 1
    ]


def test_no_two_classes_share_a_name() -> None:
    """One class per name in geminibot/ and capsule_server/, so that a name in a
    traceback, a doc or a review means one thing."""
    found = shared_names(every_class())
    assert not found, "rename one of each:\n" + "\n".join(found)


def test_the_class_name_check_sees_a_shared_name(tmp_path: Path) -> None:
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text("class Answer:\n    pass\n\nclass Outer:\n    class Row:\n        pass\n")
    two.write_text("def f():\n    class Row:\n        pass\n\nclass Answer:\n    pass\n")
    found = [*classes("a.one", one), *classes("a.two", two)]
    assert shared_names(found) == ["Answer: a.one:1, a.two:5", "Row: a.one:5, a.two:2"]


def undocumented(found: Sequence[Class]) -> list[str]:
    """The public classes (a name not starting with ``_``) without a docstring."""
    return [
        f"{c.module}:{c.line} {c.name}"
        for c in found
        if not c.name.startswith("_") and not c.docstring
    ]


def test_every_public_class_says_what_it_is() -> None:
    """A class docstring says what the class is, so that a newcomer need not read its body."""
    found = undocumented(every_class())
    assert not found, "give each a docstring:\n" + "\n".join(found)


def test_the_docstring_check_sees_a_class_without_one(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        'class Said:\n    """A thing."""\n\nclass Silent:\n    x: int\n\n'
        "class _Private:\n    pass\n\nclass Empty:\n    ''\n"
    )
    assert undocumented(list(classes("a.x", source))) == ["a.x:4 Silent", "a.x:10 Empty"]
