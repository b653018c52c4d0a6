"""Hostile version 2.0 globs, side by side in one run.

19,000 rules like ``Disallow: /*a*a*a*N*b`` (483 KB, under the 500 KiB cut) in one 2.0
set, and a decision on a 2,000-character path that no rule matches (so every rule is
tried). Two matchers:

* geminibot ext20: ``parse_ext20`` and ``decide`` as shipped (``*``-only globs asked of
  the robots.txt engine's index first, then matched by the RFC 9309 segment matcher;
  others on RE2). The first decision for a set builds the index; it is timed apart;
* fnmatch + re: the previous reading, each glob compiled with ``fnmatch.translate`` and
  matched by Python's backtracking ``re`` (what ext20 did before), over the same rules.

Bounded: one parse and a few decisions each; the fnmatch side stops after
``BASELINE_DECISIONS``. Run: .venv/bin/python bench/ext20_globs.py
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import time

from geminibot.policy.ext20 import parse_ext20

RULES = 19_000
PATH = "/" + "a" * 2000
DECISIONS = 20
BASELINE_DECISIONS = 2


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()  # no options: --help shows what it measures
    patterns = [f"/*a*a*a*{n}*b" for n in range(RULES)]
    text = "User-agent: *\nRobot-version: 2.0\n" + "".join(f"Disallow: {p}\n" for p in patterns)

    start = time.perf_counter()
    robots = parse_ext20(text)
    ours_parse = time.perf_counter() - start
    start = time.perf_counter()
    assert robots.decide(PATH, "bot").allowed
    ours_first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(DECISIONS):
        assert robots.decide(PATH, "bot").allowed
    ours_decide = (time.perf_counter() - start) / DECISIONS

    start = time.perf_counter()
    compiled = [re.compile(fnmatch.translate(p), re.DOTALL) for p in patterns]
    base_parse = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(BASELINE_DECISIONS):
        assert not any(c.match(PATH) for c in compiled)
    base_decide = (time.perf_counter() - start) / BASELINE_DECISIONS

    print(f"{RULES:,} globs ({len(text):,} bytes), path of {len(PATH) - 1:,} characters")
    print(f"{'matcher':<24} {'parse s':>8} {'1st decision s':>15} {'decision s':>11}")
    print(f"{'geminibot ext20':<24} {ours_parse:>8.3f} {ours_first:>15.4f} {ours_decide:>11.4f}")
    print(
        f"{'fnmatch + re (before)':<24} {base_parse:>8.3f} {base_decide:>15.4f} {base_decide:>11.4f}"
    )
    print(f"ratio: parse {base_parse / ours_parse:.1f}x, decision {base_decide / ours_decide:.0f}x")


if __name__ == "__main__":
    main()
