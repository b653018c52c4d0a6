"""The policy engine: pure functions and objects over bytes and strings, no I/O.

Start with :func:`parse_robots` and :meth:`RobotsFile.decide`; docs/policy.md explains
the semantics.
"""

from geminibot.policy.diagnostics import Diagnostic, has_errors
from geminibot.policy.outcomes import FetchOutcome, fetch_outcome
from geminibot.policy.paths import path_of
from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots_model import VIRTUAL_AGENTS, AppliedGroup, Decision, Group, Rule
from geminibot.policy.robots_parse import MAX_ROBOTS_BYTES, parse_robots

__all__ = [
    "MAX_ROBOTS_BYTES",
    "VIRTUAL_AGENTS",
    "AppliedGroup",
    "Decision",
    "Diagnostic",
    "FetchOutcome",
    "Group",
    "RobotsFile",
    "Rule",
    "fetch_outcome",
    "has_errors",
    "parse_robots",
    "path_of",
]
