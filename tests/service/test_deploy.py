"""deploy/: the settings files are the documented defaults and valid settings; the
systemd unit is valid and hardened (systemd's own verifier and exposure score)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geminibot.gemini.server import MAX_OPEN
from geminibot.portal.limits import DESCRIPTOR_RESERVE
from geminibot.service.config import default_config, read_file

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
#: Highest exposure systemd-analyze may score the unit (tenths: 2.0 of 10).
MAX_EXPOSURE = 20


def test_engine_toml_is_the_commented_defaults() -> None:
    assert (DEPLOY / "engine.toml").read_text() == default_config()


def test_container_settings_are_valid() -> None:
    settings = read_file(DEPLOY / "container.toml")
    assert settings["search"]["host"] == "0.0.0.0"
    assert str(settings["service"]["db"]).startswith("/var/lib/geminibot/")
    assert "container.toml" in (DEPLOY / "Containerfile").read_text()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_systemd_unit_is_valid_and_hardened(tmp_path: Path) -> None:
    unit = tmp_path / "geminibot.service"
    program = Path(sys.executable).with_name("geminibot")
    text = (DEPLOY / "geminibot.service").read_text()
    assert "/opt/geminibot/bin/geminibot serve" in text
    unit.write_text(text.replace("/opt/geminibot/bin/geminibot", str(program)))
    for option in ("DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=geminibot"):
        assert f"\n{option}\n" in text
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert verify.returncode == 0, verify.stderr
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", f"--threshold={MAX_EXPOSURE}", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert security.returncode == 0, security.stdout[-2000:]


def test_the_descriptor_limit_is_what_the_servers_need() -> None:
    # the search capsule's connections, its database's and index's files, and a margin
    need = MAX_OPEN + DESCRIPTOR_RESERVE
    unit = re.search(r"^LimitNOFILE=(\d+)$", (DEPLOY / "geminibot.service").read_text(), re.M)
    assert unit is not None and int(unit.group(1)) > need
    run = re.search(r"--ulimit nofile=(\d+):(\d+)", (DEPLOY / "Containerfile").read_text())
    assert run is not None and min(int(run.group(1)), int(run.group(2))) > need
