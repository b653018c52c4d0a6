"""A file that is not text is not a policy file (issue 54 item 7): ``policy check``,
``policy lint``, ``compare`` and ``classify --against`` refuse it with one line and exit 2,
instead of reading it as a robots.txt that allows everything."""

from __future__ import annotations

from pathlib import Path

import pytest
from commands import run_main

from geminibot.policy.textlines import MAX_CONTROL_SHARE, TEXT_SNIFF_BYTES, not_text

#: The first bytes of a 64-bit ELF executable (its header), then code and padding.
ELF = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"\x02\x00\x3e\x00" + bytes(range(256)) * 4
#: Bytes that are mostly NUL, with no known format.
NULS = b"User-agent: *\n" + b"\x00" * 200


@pytest.fixture(params=[ELF, NULS], ids=["elf", "nuls"])
def binary(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / "robots.txt"
    path.write_bytes(request.param)
    return path


@pytest.fixture
def text(tmp_path: Path) -> Path:
    path = tmp_path / "web-robots.txt"
    path.write_text("User-agent: *\nDisallow: /private/\n")
    return path


def test_every_command_refuses_a_file_that_is_not_text(binary: Path, text: Path) -> None:
    for argv in (
        ["policy", "check", str(binary), "--agent", "bot", "/"],
        ["policy", "lint", str(binary)],
        ["policy", "lint", str(text), str(binary)],
        ["compare", "--web", str(text), "--gemini", str(binary)],
        ["classify", "--does", "search-index", "--against", str(binary)],
    ):
        proc = run_main(argv)
        assert proc.returncode == 2, (argv, proc.stdout)
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"geminibot: {binary} is not a policy file: not text ("), argv


def test_what_it_is_is_named() -> None:
    assert not_text(ELF) == "an ELF executable"
    assert not_text(NULS) == "binary data: 93% control bytes"


def test_text_with_a_stray_nul_is_still_text_and_linted(tmp_path: Path) -> None:
    """A stray NUL in a text file is the parser's finding (nul-byte), not a refusal."""
    path = tmp_path / "robots.txt"
    path.write_bytes(b"User-agent: *\nDisallow: /a\x00b\n")
    proc = run_main(["policy", "lint", str(path)])
    assert proc.returncode == 1 and "[nul-byte]" in proc.stdout


def test_the_control_share_at_its_edge() -> None:
    n = 1000
    at_limit = int(MAX_CONTROL_SHARE * n)
    assert not_text(b"\x01" * at_limit + b"a" * (n - at_limit)) is None
    assert not_text(b"\x01" * (at_limit + 1) + b"a" * (n - at_limit - 1)) is not None
    # Only the first TEXT_SNIFF_BYTES count: a binary tail after text is not looked at.
    assert not_text(b"a" * TEXT_SNIFF_BYTES + b"\x00" * TEXT_SNIFF_BYTES) is None
    assert not_text(b"") is None and not_text("User-agent: é\n".encode("latin-1")) is None
