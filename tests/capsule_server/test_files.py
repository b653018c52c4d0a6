"""The file mapping: MIME types, index pages, serve.toml, and traversal that never escapes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capsule_server.files import (
    MAX_GENERATED_SIZE,
    MAZE_BRANCHES,
    MAZE_MAX_PATH,
    Capsule,
    CapsuleConfigError,
    binary_chunks,
    large_robots,
    load_capsules,
    maze_page,
    mime_type,
)

SECRET = b"secret outside the capsule"


@pytest.fixture
def capsule(tmp_path: Path) -> Capsule:
    (tmp_path / "secret.txt").write_bytes(SECRET)
    root = tmp_path / "site.test"
    (root / "sub").mkdir(parents=True)
    (root / "index.gmi").write_text("# home\n")
    (root / "sub" / "index.gmi").write_text("# sub\n")
    (root / "sub" / "page.gmi").write_text("page\n")
    (root / "robots.txt").write_text("User-agent: *\n")
    (root / "data.bin").write_bytes(b"\x00\x01")
    (root / "expect.toml").write_text("[capsule]\n")
    (root / "noindex").mkdir()
    os.symlink(tmp_path / "secret.txt", root / "escape.txt")
    os.symlink(tmp_path, root / "escape-dir")
    os.symlink("sub/page.gmi", root / "inside.gmi")
    os.symlink("/etc/passwd", root / "passwd")
    return Capsule("site.test", root)


@pytest.mark.parametrize(
    ("name", "mime"),
    [
        ("a.gmi", "text/gemini; charset=utf-8"),
        ("a.GMI", "text/gemini; charset=utf-8"),
        ("robots.txt", "text/plain; charset=utf-8"),
        ("robots2.txt", "text/plain; charset=utf-8"),
        ("agents.txt", "text/plain; charset=utf-8"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("x.png", "image/png"),
        ("x.unknown", "application/octet-stream"),
        ("noext", "application/octet-stream"),
    ],
)
def test_mime_by_extension(name: str, mime: str) -> None:
    assert mime_type(name) == mime


def test_index_and_files(capsule: Capsule) -> None:
    assert capsule.resolve("/").file == capsule.root / "index.gmi"
    assert capsule.resolve("").file == capsule.root / "index.gmi"
    assert capsule.resolve("/sub/").file == capsule.root / "sub" / "index.gmi"
    redirect = capsule.resolve("/sub")
    assert (redirect.status, redirect.meta) == (31, "/sub/")
    r = capsule.resolve("/data.bin")
    assert (r.status, r.meta) == (20, "application/octet-stream")
    assert capsule.resolve("/robots.txt").meta == "text/plain; charset=utf-8"
    assert capsule.resolve("/noindex/").status == 51  # no listing without index.gmi


def test_symlink_inside_is_followed(capsule: Capsule) -> None:
    r = capsule.resolve("/inside.gmi")
    assert r.status == 20 and r.read_body() == b"page\n"


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/sub/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/..%2fsecret.txt",
        "/..%2Fsecret.txt",
        "/sub%2f..%2f..%2fsecret.txt",
        "/..%5csecret.txt",
        "/..\\secret.txt",
        "/escape.txt",
        "/escape-dir/secret.txt",
        "/escape-dir/",
        "/passwd",
        "/%2Fetc%2Fpasswd",
        "//etc/passwd",
        "/expect.toml",
        "/index.gmi%00",
        "/%00",
        "/.%2e/secret.txt",
        "/%c0%ae%c0%ae/secret.txt",
        "relative/path",
        "/sub/page.gmi/",
        "/\x00",
    ],
)
def test_traversal_never_leaves_the_capsule(capsule: Capsule, path: str) -> None:
    r = capsule.resolve(path)
    assert r.status == 51
    assert r.file is None and r.body is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "..",
                ".",
                "%2e",
                "%2E%2e",
                "%2f",
                "%5c",
                "%00",
                "sub",
                "escape-dir",
                "escape.txt",
                "secret.txt",
                "",
                "%2e%2e%2f",
                "passwd",
                "inside.gmi",
                "index.gmi",
            ]
        ),
        max_size=6,
    )
)
def test_no_path_resolves_outside(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str]
) -> None:
    base = tmp_path_factory.getbasetemp() / "hyp"
    root = base / "site.test"
    if not root.exists():
        (root / "sub").mkdir(parents=True)
        (base / "secret.txt").write_bytes(SECRET)
        (root / "index.gmi").write_text("# home\n")
        (root / "sub" / "page.gmi").write_text("page\n")
        os.symlink(base, root / "escape-dir")
        os.symlink(base / "secret.txt", root / "escape.txt")
        os.symlink("sub/page.gmi", root / "inside.gmi")
    capsule = Capsule("site.test", root)
    r = capsule.resolve("/" + "/".join(parts))
    if r.file is not None:
        assert r.file.resolve().is_relative_to(capsule.root)
        assert r.read_body() != SECRET


def test_serve_toml(tmp_path: Path) -> None:
    root = tmp_path / "x.test"
    root.mkdir()
    (root / "serve.toml").write_text(
        '[[special]]\npath = "/robots.txt"\nstatus = 44\nmeta = "60"\n'
        '[mime]\n"/a.gmi" = "text/gemini; charset=iso-8859-1"\n'
        '[[generated]]\npath = "/big.bin"\nkind = "binary"\nsize = 100000\n'
        '[maze]\nprefix = "/maze/"\n'
    )
    (root / "a.gmi").write_bytes(b"caf\xe9\n")
    cap = Capsule("x.test", root)
    assert (cap.resolve("/robots.txt").status, cap.resolve("/robots.txt").meta) == (44, "60")
    assert cap.resolve("/a.gmi").meta == "text/gemini; charset=iso-8859-1"
    big = cap.resolve("/big.bin")
    assert big.generated is not None and len(big.read_body()) == 100000
    assert big.generated.total() == 100000
    assert cap.resolve("/maze/abc/").body is not None
    assert cap.resolve("/serve.toml").status == 51


@pytest.mark.parametrize(
    "text",
    [
        "[[special]]\npath = 'robots.txt'\nstatus = 41\nmeta = 'x'\n",
        "[[special]]\npath = '/r'\nstatus = 20\nmeta = 'x'\n",
        "[[special]]\npath = '/r'\nmeta = 'x'\n",
        "[[generated]]\npath = '/g'\nkind = 'binary'\nsize = 0\n",
        "[[generated]]\npath = '/g'\nkind = 'video'\nsize = 10\n",
        f"[[generated]]\npath = '/g'\nkind = 'binary'\nsize = {MAX_GENERATED_SIZE + 1}\n",
        "[maze]\nprefix = '/maze'\n",
        "not toml [",
    ],
)
def test_bad_serve_toml_is_a_clear_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "serve.toml").write_text(text)
    with pytest.raises(CapsuleConfigError, match=r"serve\.toml"):
        Capsule("x.test", tmp_path)


def test_maze_never_ends_and_stays_short() -> None:
    path = "/maze/"
    seen = set()
    for _ in range(200):
        page = maze_page("/maze/", path).decode()
        links = [line.split()[1] for line in page.splitlines() if line.startswith("=> ")]
        assert len(links) == MAZE_BRANCHES + 1
        assert all(len(link) <= MAZE_MAX_PATH + 20 for link in links)
        seen.add(path)
        path = links[0]
    assert len(seen) == 200


def test_generated_bodies_are_deterministic() -> None:
    assert b"".join(binary_chunks(200_000)) == b"".join(binary_chunks(200_000))
    assert len(b"".join(binary_chunks(200_000))) == 200_000
    big = large_robots(600 * 1024)
    assert len(big) >= 600 * 1024 and big.endswith(b"Disallow: /late/\n")


def test_load_capsules_skips_non_host_folders(tmp_path: Path) -> None:
    (tmp_path / "a.test").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / ".hidden.test").mkdir()
    (tmp_path / "README.md").write_text("x")
    assert list(load_capsules(tmp_path)) == ["a.test"]
