"""The synthetic space's ``serving`` block lets the block's own exceptions through (a
test asserting inside it must be able to fail)."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from geminispace import Space, SpaceServer, serving  # noqa: E402


class Raised(Exception):
    pass


@pytest.mark.parametrize("addresses", [0, 2])
async def test_an_exception_in_the_block_is_not_swallowed(addresses: int) -> None:
    with pytest.RaisesGroup(Raised, allow_unwrapped=True, flatten_subgroups=True):
        async with serving(SpaceServer(Space(12, 400, 7)), addresses):
            raise Raised
