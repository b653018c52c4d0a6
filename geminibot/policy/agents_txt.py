"""AGENTS.TXT (draft): a hash-verified plaintext policy that fails closed.

The first line that is neither a comment (``#`` in the first column) nor blank is the hash
line: ``*`` and the lowercase hex SHA-256 of the *canonical content*: the file's UTF-8 text
with the hash line, comment lines and blank lines removed, the remaining lines (line ends
``\\n``, ``\\r\\n`` or ``\\r`` taken off) joined with ``\\n``. Every other line is a directive
``<path> <ALLOW|DISALLOW> [key=value ...]``.

Any fault (a file over MAX_AGENTS_BYTES, text not UTF-8, hash line missing or malformed, hash mismatch, a directive that
does not parse) makes the whole file *restricted*: every URL of the site is disallowed
except ``/agents.txt`` itself (so that a corrected file can be fetched) and
``/robots.txt``. Callers must drop any cached copy (:attr:`AgentsFile.valid` is False).

Only a file in the draft's form is read so (project decision, docs/dialects.md): its first
line that is neither a comment nor blank is ``*`` and 64 hex digits. Any other body (an
agents.txt of another convention, ``User-agent: *`` or ``ai-train: yes``; a catch-all
server's gemtext or HTML page; bytes that are not text) is *not this dialect*: ignored,
with an info diagnostic (:attr:`AgentsFile.ignored` says why), never a closed site.

Project readings (docs/dialects.md): a directive's path is a literal prefix of the URL path
(no wildcards; the draft shows none), the longest matching path wins, DISALLOW wins a tie,
and a URL no directive covers is allowed. ``limit=N`` is read as at most N requests per
minute to the URLs the directive covers (so at least 60/N seconds between them), the same
unit as robots2.txt ``rate``. Unknown parameters are kept and reported, not a fault.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.paths import path_of
from geminibot.policy.textlines import numbered_lines, pattern_text

_HASH_LINE = re.compile(r"\*([0-9a-f]{64})")
#: How a file in the draft's form is recognised: its first directive line.
DRAFT_FORM_LINE = re.compile(r"\*[0-9a-fA-F]{64}\s*")
_PATH = re.compile(r"/[A-Za-z0-9\-._~%!$&'()*+,;=:@/?]*")
_PARAM = re.compile(r"([A-Za-z][A-Za-z0-9._-]*)=([A-Za-z0-9\-._~%!$&'()*+,;:@/?]*)")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_META = re.compile(r"#\s*([A-Za-z][A-Za-z0-9_-]*)\s*:\s*(.*)")
KNOWN_PARAMETERS = frozenset({"limit"})
ALWAYS_ALLOWED = ("/agents.txt", "/robots.txt")
#: A larger agents.txt is a fault (restricted): cutting it would break its hash anyway.
MAX_AGENTS_BYTES = 500 * 1024


@dataclass(frozen=True, slots=True)
class Directive:
    """One path line of an agents.txt: the path, allowed or not, and its parameters."""

    line: int
    path: str
    allow: bool
    params: tuple[tuple[str, str], ...]

    @property
    def limit(self) -> int | None:
        """``limit=`` as requests per minute, if given."""
        for key, value in self.params:
            if key == "limit":
                return int(value)
        return None

    def text(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in self.params)
        return f"{self.path} {'ALLOW' if self.allow else 'DISALLOW'}{extra}"


@dataclass(frozen=True, slots=True)
class AgentsDecision:
    """Whether agents.txt allows a path, the directive that decided and why."""

    allowed: bool
    path: str
    directive: Directive | None
    reason: str


@dataclass(frozen=True)
class AgentsFile:
    """A parsed agents.txt: its directives, metadata and hashes, and whether it is valid.
    Build it with :func:`parse_agents`."""

    directives: tuple[Directive, ...]
    diagnostics: tuple[Diagnostic, ...]
    fault: str | None
    fault_line: int
    declared_hash: str | None
    computed_hash: str | None
    metadata: tuple[tuple[str, str], ...]
    #: Set when the body is not an agents.txt in the draft's form: why it is ignored.
    ignored: str | None = None

    @property
    def valid(self) -> bool:
        return self.fault is None

    @classmethod
    def restricted(cls, reason: str) -> AgentsFile:
        """A file that restricts the whole site (for an unreachable agents.txt)."""
        return cls((), (), reason, 0, None, None, ())

    def decide(self, url: str) -> AgentsDecision:
        path = path_of(url)
        if path in ALWAYS_ALLOWED:
            return AgentsDecision(True, path, None, f"{path} is always allowed")
        if self.ignored is not None:
            return AgentsDecision(True, path, None, f"{self.ignored}: allowed")
        if self.fault is not None:
            where = f"line {self.fault_line}: " if self.fault_line else ""
            return AgentsDecision(False, path, None, f"{where}{self.fault}: whole site restricted")
        best = self.matching(path)
        if best is None:
            return AgentsDecision(True, path, None, "no directive covers the path: allowed")
        verdict = "allowed" if best.allow else "disallowed"
        return AgentsDecision(best.allow, path, best, f"line {best.line}: {best.text()}: {verdict}")

    def matching(self, path: str) -> Directive | None:
        """The deciding directive: longest path prefix, DISALLOW wins a tie."""
        best: Directive | None = None
        for d in self.directives:
            if not path.startswith(d.path):
                continue
            if (
                best is None
                or len(d.path) > len(best.path)
                or (len(d.path) == len(best.path) and not d.allow)
            ):
                best = d
        return best

    def limit_interval(self, url: str | None = None) -> tuple[float, Directive] | None:
        """Seconds between requests from ``limit=`` (for ``url``, or the strictest of all)."""
        if self.fault is not None:
            return None
        candidates: Iterable[Directive]
        if url is None:
            candidates = self.directives
        else:
            path = path_of(url)
            candidates = [d for d in self.directives if path.startswith(d.path)]
        best: tuple[float, Directive] | None = None
        for d in candidates:
            limit = d.limit
            if limit is not None and (best is None or 60.0 / limit > best[0]):
                best = (60.0 / limit, d)
        return best


def canonical_content(lines: Iterable[str]) -> str:
    """The hashed text: directive lines (already without hash, comments, blanks) joined."""
    return "\n".join(lines)


def content_hash(lines: Iterable[str]) -> str:
    return hashlib.sha256(canonical_content(lines).encode("utf-8")).hexdigest()


def _is_comment(text: str) -> bool:
    return text.startswith("#")


def _is_blank(text: str) -> bool:
    return text.strip() == ""


def draft_form_line(data: bytes | str) -> int:
    """The number of the line that makes ``data`` an agents.txt in the draft's form (its
    first line that is neither a comment nor blank, being ``*`` and 64 hex digits), else 0."""
    if isinstance(data, bytes):
        data = data[:MAX_AGENTS_BYTES]
    for number, text in numbered_lines(data):
        if _is_comment(text) or _is_blank(text):
            continue
        return number if DRAFT_FORM_LINE.fullmatch(text) else 0
    return 0


NOT_THIS_DIALECT = "not an agents.txt in the draft's form (no '*' + SHA-256 hash line)"


def parse_agents(data: bytes | str) -> AgentsFile:
    """Parse and verify an agents.txt. Never raises; a fault restricts the whole site,
    a body that is not in the draft's form is ignored."""
    if not draft_form_line(data):
        first = next((n for n, t in numbered_lines(data[:MAX_AGENTS_BYTES]) if t.strip()), 0)
        diag = Diagnostic(
            first,
            "info",
            "not-this-dialect",
            f"{NOT_THIS_DIALECT}: another convention or not a policy file; ignored, "
            "nothing is restricted",
        )
        return AgentsFile((), (diag,), None, 0, None, None, (), NOT_THIS_DIALECT)
    unreadable = _unreadable(data)
    if unreadable is not None:
        return unreadable
    diags: list[Diagnostic] = []
    lines = _split_lines(data, diags)
    computed = content_hash(t for _, t in lines.body)
    fault, fault_line = _hash_fault(lines, computed, diags)
    directives: list[Directive] = []
    for number, text in lines.body:
        directive, problem = _parse_directive(number, text)
        if problem is not None:
            diags.append(Diagnostic(number, "error", "bad-directive", problem))
            if fault is None:
                fault, fault_line = f"syntax error ({problem})", number
            continue
        assert directive is not None
        for key, _ in directive.params:
            if key not in KNOWN_PARAMETERS:
                diags.append(
                    Diagnostic(number, "warning", "unknown-parameter", f"unknown parameter {key!r}")
                )
        directives.append(directive)
    if fault is not None:
        diags.append(_restricted_note(fault))
    diags.sort(key=lambda d: d.line)
    return AgentsFile(
        tuple(directives) if fault is None else (),
        tuple(diags),
        fault,
        fault_line,
        lines.declared,
        computed,
        tuple(lines.metadata),
    )


def _unreadable(data: bytes | str) -> AgentsFile | None:
    """The restricted file for a body over MAX_AGENTS_BYTES or not UTF-8, else None."""
    size = len(data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape"))
    if size > MAX_AGENTS_BYTES:
        too_big = f"larger than {MAX_AGENTS_BYTES} bytes"
        diag = Diagnostic(0, "error", "size-limit", f"agents.txt is {size} bytes, {too_big}")
        return AgentsFile((), (diag, _restricted_note(too_big)), too_big, 0, None, None, ())
    if isinstance(data, bytes):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            diag = Diagnostic(line, "error", "not-utf8", "agents.txt is not valid UTF-8")
            not_text = "not valid UTF-8"
            notes = (_restricted_note(not_text), diag)
            return AgentsFile((), notes, not_text, line, None, None, ())
    return None


@dataclass(slots=True)
class _Lines:
    """An agents.txt's lines sorted: metadata comments, the hash line, the directives."""

    metadata: list[tuple[str, str]] = field(default_factory=list)
    hash_line: int = 0
    declared: str | None = None  # the hash the hash line declares (None: malformed or none)
    body: list[tuple[int, str]] = field(default_factory=list)


def _split_lines(data: bytes | str, diags: list[Diagnostic]) -> _Lines:
    lines = _Lines()
    for number, text in numbered_lines(data):
        if _is_comment(text):
            if m := _META.fullmatch(text.strip()):
                lines.metadata.append((m.group(1).lower(), m.group(2).strip()))
            continue
        if _is_blank(text):
            continue
        if not lines.hash_line:
            lines.hash_line = number
            m = _HASH_LINE.fullmatch(text)
            if m is None:
                msg = "first directive line must be '*' and 64 lowercase hex digits (SHA-256)"
                diags.append(Diagnostic(number, "error", "bad-hash-line", msg))
            else:
                lines.declared = m.group(1)
            continue
        lines.body.append((number, text))
    return lines


def _hash_fault(lines: _Lines, computed: str, diags: list[Diagnostic]) -> tuple[str | None, int]:
    """The fault of a missing, malformed or mismatched hash line, and its line."""
    hash_line, declared = lines.hash_line, lines.declared
    if not hash_line:
        diags.append(Diagnostic(0, "error", "no-hash-line", "agents.txt has no hash line"))
        return "no hash line", 0
    if declared is None:
        return "malformed hash line", hash_line
    if declared != computed:
        diags.append(
            Diagnostic(
                hash_line,
                "error",
                "hash-mismatch",
                f"hash line says {declared[:12]}..., content hashes to {computed[:12]}...",
            )
        )
        return "hash mismatch", hash_line
    return None, 0


def _restricted_note(fault: str) -> Diagnostic:
    """The file-wide finding that says what a fault does: the whole site is closed."""
    return Diagnostic(
        0,
        "error",
        "site-restricted",
        f"{fault}: the whole site is restricted (every URL but {', '.join(ALWAYS_ALLOWED)})",
    )


def _parse_directive(number: int, text: str) -> tuple[Directive | None, str | None]:
    parts = text.split(" ")
    if len(parts) < 2 or any(p == "" for p in parts):
        return None, "expected '<path> <ALLOW|DISALLOW> [key=value ...]' separated by single spaces"
    path, action, *params = parts
    if _PATH.fullmatch(path) is None or _BAD_ESCAPE.search(path):
        return None, f"path {path[:40]!r} must start with '/' and use URI characters only"
    if action not in ("ALLOW", "DISALLOW"):
        return None, f"action {action[:20]!r} must be ALLOW or DISALLOW"
    pairs: list[tuple[str, str]] = []
    for param in params:
        m = _PARAM.fullmatch(param)
        if m is None or _BAD_ESCAPE.search(param):
            return None, f"parameter {param[:40]!r} is not key=value in URI syntax"
        key, value = m.group(1), m.group(2)
        if any(key == k for k, _ in pairs):
            return None, f"parameter {key!r} repeated"
        if key == "limit" and (not value.isdigit() or int(value) == 0):
            return None, f"limit={value[:20]} must be a positive integer (requests per minute)"
        pairs.append((key, value))
    return Directive(number, pattern_text(path), action == "ALLOW", tuple(pairs)), None
