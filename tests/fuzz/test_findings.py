"""What the fuzz targets found, one test each (the inputs are also in fuzz/corpus/)."""

from __future__ import annotations

import pytest

from geminibot.policy.agents_txt import parse_agents
from geminibot.policy.render import PolicyError, load_policy, render


def test_render_refuses_an_agents_path_its_own_parser_rejects() -> None:
    """render_roundtrip: '/pub%ic/' was written into agents.txt, whose parser then closed
    the whole site ("syntax error"). A '%' must start a %XX escape."""
    bad = load_policy('default_policy = "allow"\n[default]\nrules = [{ disallow = "/pub%ic/" }]\n')
    with pytest.raises(PolicyError, match="%XX"):
        render(bad, "agents")
    good = load_policy('default_policy = "allow"\n[default]\nrules = [{ disallow = "/a%20b/" }]\n')
    assert parse_agents(render(good, "agents")).valid
