"""Trust on first use: the pin policy and the known-hosts file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from geminibot.cli import main
from geminibot.gemini.errors import CertificateChanged
from geminibot.gemini.tofu import (
    HEADER,
    MAX_PINS,
    FileKnownHosts,
    MemoryKnownHosts,
    NotKnownHostsFile,
    Trust,
    check_pin,
    fingerprint,
)


def test_policy_default_and_strict(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryKnownHosts()
    assert check_pin(store, "h", 1965, "A") == (Trust.NEW, None)
    assert check_pin(store, "h", 1965, "A") == (Trust.TRUSTED, "A")
    assert check_pin(store, "h", 1966, "B") == (Trust.NEW, None)  # per port
    with pytest.raises(CertificateChanged):
        check_pin(store, "h", 1965, "B", strict=True)
    assert store.get("h", 1965) == "A"
    with caplog.at_level(logging.WARNING, logger="geminibot.gemini"):
        assert check_pin(store, "h", 1965, "B") == (Trust.CHANGED, "A")
    assert "changed" in caplog.text
    assert store.get("h", 1965) == "B"


def test_a_store_keeps_at_most_max_pins_the_least_recently_used_forgotten() -> None:
    store = MemoryKnownHosts(max_pins=3)
    for host in ("a", "b", "c"):
        assert check_pin(store, host, 1965, host.upper()) == (Trust.NEW, None)
    assert check_pin(store, "a", 1965, "A") == (Trust.TRUSTED, "A")  # a used: b is oldest
    assert check_pin(store, "d", 1965, "D") == (Trust.NEW, None)  # the fourth: b forgotten
    assert list(store.pins) == [("c", 1965), ("a", 1965), ("d", 1965)]
    assert check_pin(store, "b", 1965, "X") == (Trust.NEW, None)  # pinned anew, not CHANGED
    assert list(store.pins) == [("a", 1965), ("d", 1965), ("b", 1965)]  # c forgotten
    assert MemoryKnownHosts().max_pins == MAX_PINS
    with pytest.raises(ValueError, match="at least 1"):
        MemoryKnownHosts(max_pins=0)


def test_a_file_of_more_than_max_pins_keeps_its_last(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "kh"
    path.write_text("".join(f"h{i}.test 1965 0{i}\n" for i in range(5)))
    with caplog.at_level(logging.WARNING, logger="geminibot.gemini"):
        store = FileKnownHosts(path, max_pins=3)
    assert "has 5 pins: the last 3 kept" in caplog.text
    assert list(store.pins) == [("h2.test", 1965), ("h3.test", 1965), ("h4.test", 1965)]
    store.put("new.test", 1965, "0A")
    assert len(FileKnownHosts(path, max_pins=3).pins) == 3
    assert FileKnownHosts(path).pins == {
        ("h3.test", 1965): "03",
        ("h4.test", 1965): "04",
        ("new.test", 1965): "0A",
    }


def test_fingerprint_format() -> None:
    fp = fingerprint(b"")
    assert fp.startswith("E3:B0:C4:42")
    assert len(fp) == 32 * 3 - 1


def test_file_store_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "kh"
    path.write_text("# comment\nh.test 1965 AA:BB  # trailing comment\n\n")
    store = FileKnownHosts(path)
    assert store.pins == {("h.test", 1965): "AA:BB"}
    store.put("::1", 1970, "DD")
    assert FileKnownHosts(path).pins == {("h.test", 1965): "AA:BB", ("::1", 1970): "DD"}
    assert path.read_text().startswith(HEADER + "\n")
    assert FileKnownHosts(tmp_path / "missing").pins == {}
    (tmp_path / "empty").write_text("\n")
    assert FileKnownHosts(tmp_path / "empty").pins == {}


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"# My notes\n\nBuy milk.\n", "line 3"),
        (b"h.test 1965 AA:BB\ngarbage line\n", "line 2"),
        (b"x notaport CC\n", "line 1"),
        (b"h.test 1965 not-hex\n", "line 1"),
        (b"# only a comment\n", "no pins"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary"),
        (b"h.test 1965 AA\n\xff\n", "not UTF-8"),
    ],
)
def test_a_file_that_is_not_a_known_hosts_file_is_refused_and_kept(
    tmp_path: Path, content: bytes, why: str
) -> None:
    path = tmp_path / "notes.md"
    path.write_bytes(content)
    with pytest.raises(NotKnownHostsFile, match=why):
        FileKnownHosts(path)
    assert path.read_bytes() == content


def test_no_folder_is_created(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such folder"):
        FileKnownHosts(tmp_path / "missing" / "dir" / "kh")
    assert not (tmp_path / "missing").exists()


def test_unwritable_file_keeps_the_pin_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "sub").mkdir()
    store = FileKnownHosts(tmp_path / "sub" / "kh")
    (tmp_path / "sub").rmdir()
    (tmp_path / "sub").write_text("a file where the folder should be")
    with caplog.at_level(logging.WARNING, logger="geminibot.gemini"):
        store.put("h", 1965, "AA")
    assert store.get("h", 1965) == "AA"
    assert "cannot write" in caplog.text
    assert (tmp_path / "sub").read_text() == "a file where the folder should be"


def test_cli_rejects_an_unreadable_known_hosts_file(tmp_path: Path) -> None:
    assert main(["fetch", "gemini://h.test/", "--known-hosts", str(tmp_path)]) == 2
