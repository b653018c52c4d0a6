"""``policy lint`` over real policy files: the findings by level and by code, and how many
warnings and errors come without a fix hint.

The files are the JSON lines of ``../shared/real-policies/real_policies.jsonl`` (``id``,
``kind``, ``text``: read its README). Each text is written to a temporary folder (never into
the repository) under a name that gives its dialect (``r001-robots.txt``...) and linted as
``geminibot policy lint`` lints it. Run it with each tree's interpreter to compare two
versions side by side (it uses only ``geminibot.policy.cli.lint_file``):

    .venv/bin/python bench/lint_real.py ../shared/real-policies/real_policies.jsonl
    (cd ../main && .venv/bin/python ../wt-NAME/bench/lint_real.py PATH)
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

from geminibot.policy.cli import lint_file

NAMES = {"robots.txt": "robots.txt", "robots2.txt": "robots2.txt", "agents.txt": "agents.txt"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("jsonl", type=Path, help="real_policies.jsonl")
    args = parser.parse_args()
    levels: Counter[str] = Counter()
    codes: Counter[tuple[str, str]] = Counter()
    without_hint = 0
    files = 0
    with tempfile.TemporaryDirectory(prefix="lint-real-") as folder:
        for line in args.jsonl.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            path = Path(folder) / f"{record['id']}-{NAMES[record['kind']]}"
            path.write_text(record["text"], encoding="utf-8")
            files += 1
            for diag in lint_file(str(path), path.read_bytes()):
                levels[diag.level] += 1
                codes[(diag.level, diag.code)] += 1
                if diag.level != "info" and not getattr(diag, "hint", ""):
                    without_hint += 1
    print(f"{files} files: " + ", ".join(f"{levels[k]} {k}" for k in ("error", "warning", "info")))
    print(f"warnings and errors without a hint: {without_hint}")
    for (level, code), n in sorted(codes.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:4d}  {level:<8} {code}")


if __name__ == "__main__":
    main()
