"""``geminibot policy ...``: check and lint policy files."""

from __future__ import annotations

import argparse
from typing import Any


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "policy", help="check and lint robots.txt and related policy files"
    )
    parser.add_subparsers(title="policy commands", metavar="ACTION")
