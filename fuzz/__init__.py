"""Coverage-guided fuzzing of every parser that reads a stranger's bytes (``make fuzz``).

:mod:`fuzz.targets` holds the targets, :mod:`fuzz.run` runs one under atheris (libFuzzer),
``python -m fuzz`` runs them all for a bounded time and prints executions per target.
"""
