"""The faces of one answer: terminal text, JSON, gemtext and HTML.

:func:`facts` turns an answer into labelled lines once; each face only formats them (and
escapes what came from the network in its own way), so the faces say the same things.
JSON is the answer's ``as_dict()``. A host's ``/check`` adds the capsule's census
(``geminibot census --host``) in sections (:func:`census_sections`): each figure a line,
a distribution's first :data:`MAX_COUNTS` items a list, the others counted.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from geminibot.census.model import Census, Value
from geminibot.census.render import shared_window, when
from geminibot.cliutil import counted, terminal_safe, wrapped
from geminibot.store.recheck import DUE_POLL, Recheck
from geminibot.urls import host_url
from geminibot.why.explain import Answer, day
from geminibot.why.host import HostAnswer

#: Longest text of one fact shown on a page (gemtext and HTML), in characters.
MAX_FACT = 600
#: Width of the labels of the terminal face.
LABEL_WIDTH = 16
#: Items shown of one distribution of a capsule's census (in the census's order: the
#: largest first); the others are counted ("and 3 more").
MAX_COUNTS = 10
#: Longest label of such an item shown, in characters (a reason to be left out quotes a
#: rule of the capsule's robots.txt).
MAX_LABEL = 200
_SPACES = re.compile(r"[\s\x00-\x1f\x7f\u2028\u2029]+")


@dataclass(frozen=True)
class Fact:
    """One line of an answer: a label, its text, and a URL it is about (a link)."""

    label: str
    text: str
    url: str | None = None


def facts(answer: Answer | HostAnswer) -> list[Fact]:
    """The answer as labelled lines, in the order every face shows them."""
    if isinstance(answer, HostAnswer):
        return _host_facts(answer)
    out = [
        Fact("page", answer.url, answer.url),
        Fact("verdict", answer.headline),
        Fact("reason", answer.reason),
    ]
    if answer.policy is not None:
        file_url = host_url(answer.host, "/" + answer.policy.file)
        out.append(Fact("policy line", answer.policy.words(), file_url))
    if answer.last_fetched is not None:
        out.append(Fact("last fetched", f"{day(answer.last_fetched)}: {answer.last_answer}"))
    else:
        out.append(Fact("last fetched", "never"))
    for f in answer.history:
        said = f.error if f.status is None else f"{f.status} {f.meta}".strip()
        out.append(Fact("answer", f"{day(f.started)}: {said}"))
    when = "not planned" if answer.next_visit is None else day(answer.next_visit)
    out.append(Fact("next look", when))
    if answer.duplicate_of is not None:
        out.append(Fact("kept instead", answer.duplicate_of, answer.duplicate_of))
    out += [Fact("duplicate", a, a) for a in answer.aliases]
    out += [Fact("linked from", u, u) for u in answer.linked_from]
    if not answer.linked_from:
        out.append(Fact("linked from", "no page the crawl fetched"))
    if answer.would_now is not None:
        out.append(Fact("today", answer.would_now))
    out += [Fact("note", n) for n in answer.notes]
    return out


def _host_facts(answer: HostAnswer) -> list[Fact]:
    out = [Fact("host", answer.host, answer.root)]
    if not answer.files:
        out.append(Fact("policy file", "none fetched yet"))
    for f in answer.files:
        status = "no answer" if f.status is None else str(f.status)
        text = f"{f.name}: {status} ({f.outcome}), {f.size} bytes, fetched {day(f.fetched_at)}"
        url = host_url(answer.host, "/" + f.name) if "/" not in f.name else None
        out.append(Fact("policy file", text, url))
        for d in f.findings:
            hint = f" (hint: {d.hint})" if d.hint else ""
            out.append(Fact("lint", f"{f.name} line {d.line}: {d.level}: {d.message}{hint}"))
        if f.more_findings:
            kinds = ", ".join(f"{n} {code}" for code, n in f.more_findings)
            more = sum(n for _, n in f.more_findings)
            text = f"{f.name}: {more} more findings ({kinds}): geminibot policy lint lists all"
            out.append(Fact("lint", text))
    out += [Fact("virtual agent", p.words()) for p in answer.permissions]
    if answer.delay is not None:
        out.append(Fact("delay", f"{answer.delay:g} s between requests ({answer.delay_rule})"))
    if answer.longest_wait is not None:
        out.append(Fact("longest wait", f"{answer.longest_wait:.1f} s between two requests"))
    pages = ", ".join(f"{n} {what}" for what, n in answer.counts.items())
    out.append(Fact("URLs", pages or "none yet"))
    if answer.skipped:
        out.append(Fact("left for later", answer.skipped))
    if answer.differences is not None:
        out.append(Fact("web policy", f"{answer.web_host}: {answer.differences}"))
    out += [Fact("note", n) for n in answer.notes]
    return out


@dataclass(frozen=True)
class CensusRow:
    """One figure of a capsule's census as ``/check`` shows it: what it counts, and its
    value in words, or a distribution's first :data:`MAX_COUNTS` items (``label:
    count``, the label cut at :data:`MAX_LABEL` characters) and how many more."""

    what: str
    text: str
    items: tuple[str, ...] = ()
    more: int = 0


def census_row(what: str, value: Value) -> CensusRow:
    """The figure ``what`` of value ``value`` (a distribution empty: ``none``)."""
    if isinstance(value, dict):
        items = tuple(
            f"{one_line(label, MAX_LABEL)}: {_number(n)}"
            for label, n in list(value.items())[:MAX_COUNTS]
        )
        return CensusRow(what, "" if items else "none", items, max(0, len(value) - MAX_COUNTS))
    return CensusRow(what, "not known" if value is None else _number(value))


def _number(value: int | float | str) -> str:
    if isinstance(value, str):
        return value
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def census_heading(census: Census) -> str:
    """What the census of a capsule is and when it was taken (a paragraph)."""
    return (
        f"The capsule's census (as geminibot census --host gives it), taken "
        f"{when(census.taken_at)}, over the crawl's answers from "
        f"{when(census.window_start)} to {when(census.window_end)}."
    )


def census_sections(census: Census) -> list[tuple[str, list[CensusRow]]]:
    """A capsule's census as titled sections of figures, in the census's order (the
    window in the title when the section's figures share it, else after what each
    counts)."""
    out = []
    for section in census.sections:
        window = shared_window(section)
        title = f"{section.title} (over {window})" if window else section.title
        rows = []
        for f in section.figures:
            what = f.what if window or not f.window else f"{f.what} ({f.window})"
            rows.append(census_row(what, f.value))
        out.append((title, rows))
    return out


def one_line(text: str, limit: int = MAX_FACT) -> str:
    """``text`` as one line: control characters and line breaks as spaces, cut at
    ``limit`` characters."""
    line = _SPACES.sub(" ", text).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def text_lines(answer: Answer | HostAnswer) -> list[str]:
    """The terminal face: 80 columns, every text escaped (:func:`geminibot.cliutil.wrapped`)."""
    lines: list[str] = []
    hang = " " * LABEL_WIDTH
    for fact in facts(answer):
        label = f"{fact.label:<{LABEL_WIDTH - 1}} "
        if fact.url is not None and fact.text == fact.url:  # a URL to copy: whole
            lines.append(label + terminal_safe(fact.text))
        else:
            lines += wrapped(fact.text, label, hang)
    return lines


def _link_target(url: str) -> str:
    """A URL safe on a gemtext link line (no space or control character splits it)."""
    return quote(url, safe=":/?#[]@!$&'()*+,;=%~-._")


def gemtext_lines(answer: Answer | HostAnswer) -> list[str]:
    """The gemtext face: each fact a line of text, or a link line when it names a URL;
    then a host's census, a heading per section."""
    lines = []
    for fact in facts(answer):
        text = one_line(f"{fact.label}: {fact.text}")
        lines.append(f"=> {_link_target(fact.url)} {text}" if fact.url else text)
    census = answer.census if isinstance(answer, HostAnswer) else None
    if census is not None:
        lines += ["", "## Capsule health", "", census_heading(census)]
        for title, rows in census_sections(census):
            lines += ["", f"### {title}"]
            for row in rows:
                if not row.items:
                    lines.append(one_line(f"{row.what}: {row.text}"))
                    continue
                more = [f"* and {row.more} more"] if row.more else []
                lines += [f"{row.what}:", *(f"* {item}" for item in row.items), *more]
    return lines


def html_fragment(
    answer: Answer | HostAnswer, href: Callable[[str], str | None] = lambda url: None
) -> str:
    """The HTML face: a definition list, every text escaped; a fact's URL is a link to
    ``href(url)`` (the portal's address of a gemini:// URL), else to the URL itself when
    it is a gemini:// or http(s):// one."""
    rows = []
    for fact in facts(answer):
        text = html.escape(one_line(fact.text))
        target = None if fact.url is None else href(fact.url) or fact.url
        if target and target.lower().startswith(("gemini://", "http://", "https://", "/")):
            text = f'<a href="{html.escape(target, quote=True)}">{text}</a>'
        rows.append(f"<dt>{html.escape(fact.label)}</dt><dd>{text}</dd>")
    out = '<dl class="why">\n' + "\n".join(rows) + "\n</dl>"
    census = answer.census if isinstance(answer, HostAnswer) else None
    if census is not None:
        out += f"\n<h2>Capsule health</h2>\n<p>{html.escape(census_heading(census))}</p>"
        for title, figures in census_sections(census):
            out += f"\n<h3>{html.escape(title)}</h3>\n" + _census_list(figures)
    return out


def _census_list(figures: list[CensusRow]) -> str:
    """A section's figures as a definition list, a distribution's items as a list."""
    rows = []
    for row in figures:
        text = html.escape(one_line(row.text))
        if row.items:
            more = [f"and {row.more} more"] if row.more else []
            items = "".join(f"<li>{html.escape(i)}</li>" for i in (*row.items, *more))
            text = f"<ul>{items}</ul>"
        rows.append(f"<dt>{html.escape(row.what)}</dt><dd>{text}</dd>")
    return '<dl class="why">\n' + "\n".join(rows) + "\n</dl>"


def gemtext_page(answer: Answer | HostAnswer) -> list[str]:
    """The search capsule's ``/check`` answer, a whole gemtext page."""
    what = answer.host if isinstance(answer, HostAnswer) else answer.url
    return [
        f"# Check: {one_line(what, 200)}",
        "",
        *gemtext_lines(answer),
        "",
        "=> /check Check another URL or host",
        "=> / Home",
    ]


#: The prompt of a /check page (its ``10``, or its form's label).
CHECK_PROMPT = "URL of a page (why is it in the index or not?), or a capsule's host name"


def html_form(asked: str = "") -> str:
    """The portal's ``/check`` form (GET, field ``q``), holding what was asked."""
    value = html.escape(asked, quote=True)
    return (
        '<form method="get" action="/check">\n'
        f'<label for="q">{html.escape(CHECK_PROMPT)}</label>\n'
        f'<input id="q" name="q" type="text" value="{value}" '
        'placeholder="gemini://example.org/page.gmi" required>\n'
        '<button type="submit">Check</button>\n</form>'
    )


def recheck_lines(done: Recheck, what: str) -> list[str]:
    """What :func:`geminibot.store.recheck.recheck` did, in words for a person
    (``geminibot recheck``; ``what``: the URL or host, escaped for the face)."""
    if done.is_url:
        if done.due:
            lines = [f"queued {what} for a fetch at its capsule's pace,"]
            lines.append("before the capsule's other queued URLs")
        elif done.waiting:
            lines = [f"{what} is already queued (or being fetched): it goes first"]
            lines.append("among the capsule's queued URLs")
        else:
            return [f"{what} is kept out by a trap bound: not queued (geminibot why says which)"]
    else:
        lines = [f"queued {counted(done.due, 'page')} of {what} for a fetch at its pace"]
        if done.waiting or done.kept_out:
            lines.append(
                f"({counted(done.waiting, 'URL')} already queued, "
                f"{counted(done.kept_out, 'URL')} kept out by trap bounds)"
            )
    if done.due:
        them = "it" if done.due == 1 else "them"
        lines.append(f"a running crawl (geminibot serve, crawl --forever) takes {them}")
        lines.append(f"within {DUE_POLL:g} s; otherwise the next geminibot crawl does")
    return lines
