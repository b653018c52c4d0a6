"""The operators' scope of a query (``site:``, ``mime:``, ``size:``, ``lang:``) as SQL
conditions on ``pages p``, the same on both stores (SQLite and PostgreSQL).

The conditions and their parameters are named (``:s0`` for sqlite3, ``%(s0)s`` for
psycopg: :func:`scope_where` takes how to write one). A site pattern is matched as
``--host`` matches: on the host key itself, or on the host name of a web origin
(``https://example.org``), with ``*`` and ``?`` as wildcards (:func:`host_like`). A MIME
type is compared without its parameters (``pages.mime`` holds none); a major type
(``image``) matches every type under it.
"""

from __future__ import annotations

from collections.abc import Callable

from geminibot.index.query import ParsedQuery
from geminibot.index.stats import host_like

#: How a named parameter is written: ``sqlite`` ``:name``, ``psycopg`` ``%(name)s``.
Mark = Callable[[str], str]


def sqlite_mark(name: str) -> str:
    return f":{name}"


def psycopg_mark(name: str) -> str:
    return f"%({name})s"


def scope_where(parsed: ParsedQuery, mark: Mark) -> tuple[str, dict[str, object]]:
    """`` AND ...`` conditions keeping the pages in ``parsed``'s scope (and language),
    and their parameters; ("", {}) for a query without operators."""
    scope = parsed.scope
    params: dict[str, object] = {}

    def param(value: object) -> str:
        name = f"scope{len(params)}"
        params[name] = value
        return mark(name)

    sql = ""
    if scope.sites:
        sql += " AND (" + " OR ".join(_site(s, param) for s in scope.sites) + ")"
    for site in scope.excluded_sites:
        sql += f" AND NOT {_site(site, param)}"
    if scope.mimes:
        sql += " AND (" + " OR ".join(_mime(m, param) for m in scope.mimes) + ")"
    for mime in scope.excluded_mimes:
        sql += f" AND NOT coalesce({_mime(mime, param)}, FALSE)"
    if scope.larger_than is not None:
        sql += f" AND p.size > {param(scope.larger_than)}"
    if scope.smaller_than is not None:
        sql += f" AND p.size < {param(scope.smaller_than)}"
    if parsed.lang:
        # The store knows a page's language from its MIME type only; the tantivy index
        # knows the detected ones too.
        code = param(parsed.lang)
        sql += f" AND (lower(p.lang) = {code} OR lower(p.lang) LIKE {param(parsed.lang + '-%')})"
    return sql, params


def _site(pattern: str, param: Callable[[object], str]) -> str:
    like = host_like(pattern)
    return (
        f"(lower(p.host) LIKE {param(like)} ESCAPE '\\'"
        f" OR lower(p.host) LIKE {param('%://' + like)} ESCAPE '\\')"
    )


def _mime(mime: str, param: Callable[[object], str]) -> str:
    if "/" in mime:
        return f"lower(p.mime) = {param(mime)}"
    return f"lower(p.mime) LIKE {param(host_like(mime) + '/%')} ESCAPE '\\'"
