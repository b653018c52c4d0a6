"""How long the answers of ``compare`` and ``classify --against`` are on real policy files
(issue 54): the line counts of the cases the issue names, and of ``classify --does
search-index --against`` over every real robots.txt.

    .venv/bin/python bench/answer_lengths.py /work/shared/real-policies/real_policies.jsonl

The real files are written to a temporary folder for the run and deleted after it; nothing
of them enters the repository. The three-difference pair is written here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

from geminibot.cli import main

NAMES = {"robots.txt": "robots.txt", "robots2.txt": "robots2.txt", "agents.txt": "agents.txt"}
WEB = "User-agent: *\nDisallow: /drafts/\n"
GEMINI = "User-agent: *\nDisallow: /cgi-bin/\n\nUser-agent: archiver\nDisallow: /\n"


def lines_of(argv: list[str]) -> tuple[int, float]:
    """The number of lines the command prints, and its seconds."""
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        main(argv)
    return len(out.getvalue().splitlines()), time.perf_counter() - start


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jsonl", type=Path, help="real_policies.jsonl")
    args = parser.parse_args()
    records = [json.loads(line) for line in args.jsonl.read_text().splitlines() if line]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files: dict[str, str] = {}
        for r in records:
            folder = root / r["id"]
            folder.mkdir()
            path = folder / NAMES.get(r["kind"], "robots.txt")
            path.write_text(r["text"])
            files[r["id"]] = str(path)
        (root / "web").mkdir()
        (root / "gemini").mkdir()
        (root / "web" / "robots.txt").write_text(WEB)
        (root / "gemini" / "robots.txt").write_text(GEMINI)
        cases = {
            "compare, the three-difference pair": [
                "compare", "--web", str(root / "web" / "robots.txt"),
                "--gemini", str(root / "gemini" / "robots.txt"),
            ],
            "compare r016 vs r010": ["compare", "--web", files["r016"], "--gemini", files["r010"]],
            "compare r037+r038 vs r007": [
                "compare", "--web", files["r037"], files["r038"], "--gemini", files["r007"],
            ],
            "classify --does search-index --against r010": [
                "classify", "--does", "search-index", "--against", files["r010"],
            ],
            "classify --bot mozz-archiver --against r010": [
                "classify", "--bot", "mozz-archiver", "--against", files["r010"],
            ],
        }  # fmt: skip
        for name, argv in cases.items():
            n, seconds = lines_of(argv)
            print(f"{name:<48} {n:>4} lines  {seconds:6.2f} s")
        robots = [files[r["id"]] for r in records if r["kind"] == "robots.txt"]
        counts = [
            lines_of(["classify", "--does", "search-index", "--against", f])[0] for f in robots
        ]
        print(
            f"classify --does search-index --against each of {len(robots)} robots.txt: "
            f"median {statistics.median(counts):g} lines, max {max(counts)}"
        )


if __name__ == "__main__":
    main_bench()
