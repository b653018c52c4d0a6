"""Every fuzz target on its saved corpus (fuzz/corpus/TARGET): the seeds from the specs'
examples and the capsules, and every input a fuzzing run found a fault with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the fuzz/ folder is not an installed package

from fuzz.targets import TARGETS  # noqa: E402

CORPUS = ROOT / "fuzz" / "corpus"


def test_every_target_has_a_corpus() -> None:
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(TARGETS)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_target_on_its_corpus(target: str) -> None:
    inputs = sorted((CORPUS / target).iterdir())
    assert inputs
    for path in inputs:
        TARGETS[target](path.read_bytes())
