"""What the census's web-and-Gemini comparison costs per host, and so per census at its
cap (``MAX_COMPARED`` hosts): ``compare``'s pure comparison of two stored policies, for
each real robots.txt of a Gemini capsule (the first 14 of the real-policies file) paired
with each real web robots.txt (the next 22), beside the cheapest case (the same file on
both sides: what most hosts publish), and a hostile pair (300 rules a side, differing:
compare's 5,000-path cap reached) against ``MAX_COMPARED_PATHS``. CPU is this process's (``time.process_time``).
No network, no store: the comparison is all a host costs beyond reading its files.

    nice -n 10 .venv/bin/python bench/census_web.py /work/shared/real-policies/real_policies.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path

from geminibot.census.web import (
    MAX_COMPARED,
    MAX_COMPARED_PATHS,
    compare_stored,
    difference_kinds,
)
from geminibot.policy.candidates import candidate_paths
from geminibot.policy.site_policy import SitePolicy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("policies", type=Path, help="real_policies.jsonl")
    args = parser.parse_args()
    files = [json.loads(line) for line in args.policies.read_text().splitlines() if line]
    robots = [f["text"].encode() for f in files if f["kind"] == "robots.txt"]
    gemini, web = robots[:14], robots[14:36]
    at = datetime.now(UTC)
    timings: list[float] = []
    kinds: dict[str, int] = {}
    for g in gemini:
        for w in web:
            start = time.process_time()
            web_side = SitePolicy.from_texts("http", robots=w)
            gemini_side = SitePolicy.from_texts("gemini", robots=g)
            found = difference_kinds(compare_stored(web_side, gemini_side, at))
            timings.append(time.process_time() - start)
            for kind in found or {"identical"}:
                kinds[kind] = kinds.get(kind, 0) + 1
    same: list[float] = []
    for w in web:
        start = time.process_time()
        compare_stored(
            SitePolicy.from_texts("http", robots=w), SitePolicy.from_texts("gemini", robots=w), at
        )
        same.append(time.process_time() - start)
    # a hostile pair: each side's rules differ, enough of them to reach compare's path cap
    hostile = [
        ("User-agent: *\n" + "".join(f"Disallow: /{side}{i}/*.x$\n" for i in range(300)))
        for side in ("w", "g")
    ]
    web_side = SitePolicy.from_texts("http", robots=hostile[0].encode())
    gemini_side = SitePolicy.from_texts("gemini", robots=hostile[1].encode())
    paths = len(candidate_paths(web_side, gemini_side)[0])
    start = time.process_time()
    compare_stored(web_side, gemini_side, at)
    worst = time.process_time() - start
    timings.sort()
    mean = sum(timings) / len(timings)
    print(
        json.dumps(
            {
                "pairs": len(timings),
                "kinds": kinds,
                "ms_per_host_mean": round(mean * 1000, 2),
                "ms_per_host_p90": round(timings[int(len(timings) * 0.9)] * 1000, 2),
                "ms_per_host_max": round(timings[-1] * 1000, 2),
                "ms_per_host_same_file_mean": round(sum(same) / len(same) * 1000, 2),
                "max_compared": MAX_COMPARED,
                "s_per_census_at_cap_mean": round(mean * MAX_COMPARED, 2),
                "hostile_pair_paths": paths,
                "hostile_pair_ms": round(worst * 1000, 1),
                "max_compared_paths": MAX_COMPARED_PATHS,
                "s_per_census_hostile_worst": round(worst * MAX_COMPARED_PATHS / paths, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
