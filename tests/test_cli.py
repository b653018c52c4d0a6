"""The command line entry points start, teach, and fail with usage errors cleanly."""

import subprocess
import sys

from geminibot.cli import main


def test_help_lists_policy_command(capsys: object) -> None:
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "policy" in out


def test_no_command_is_a_usage_error() -> None:
    assert main([]) == 2


def test_module_entry_point_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "geminibot", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("geminibot ")
