"""Run one fuzz target under atheris: ``python -m fuzz.run TARGET [options]``.

New inputs go to ``WORK/TARGET/corpus`` (the saved seeds in ``fuzz/corpus/TARGET`` are
read, never written); a finding is written to ``WORK/TARGET/crash-*`` and ends the run
with a non-zero exit. Only geminibot and capsule_server code is instrumented.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["geminibot", "capsule_server"]):
    from fuzz.targets import TARGETS

SEEDS = Path(__file__).resolve().parent / "corpus"
#: Longest input per target (bytes): above each parser's interesting structure, small
#: enough that one input runs in milliseconds.
MAX_LEN = {"capsule_request": 1100, "gemini_response": 4096}
DEFAULT_MAX_LEN = 16384


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__)
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--seconds", type=int, default=60, help="total run time (default 60)")
    parser.add_argument(
        "--timeout", type=int, default=10, help="seconds one input may take (default 10)"
    )
    parser.add_argument(
        "--rss-mb", type=int, default=1024, help="memory limit in MiB (default 1024)"
    )
    parser.add_argument("--work", type=Path, default=Path(".fuzz"), help="work folder")
    args = parser.parse_args()
    work = args.work / args.target
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    seeds = SEEDS / args.target
    libfuzzer = [
        sys.argv[0],
        f"-max_total_time={args.seconds}",
        f"-timeout={args.timeout}",
        f"-rss_limit_mb={args.rss_mb}",
        f"-max_len={MAX_LEN.get(args.target, DEFAULT_MAX_LEN)}",
        f"-artifact_prefix={work}/",
        "-print_final_stats=1",
        str(corpus),
        *([str(seeds)] if seeds.is_dir() else []),
    ]
    atheris.Setup(libfuzzer, TARGETS[args.target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
