"""A synthetic Geminispace: deterministic pages for any number of hosts, served by SNI from
one trio process (``python bench/geminispace --help``). Benchmarks use it at full size
(4,400 hosts, 600,000 URLs); tests import it at a few hosts (``tests/space/``)."""

from .server import SpaceServer, serving
from .space import Answer, Query, Space

__all__ = ["Answer", "Query", "Space", "SpaceServer", "serving"]
