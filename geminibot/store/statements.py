"""Every statement both crawl stores run, written once, and the engines they compile for.

A statement is a SQLAlchemy Core text construct with named parameters (``:url``), or,
where the engines' SQL differs only in dialect (a list parameter, :class:`Given`; a
row lock, ``FOR UPDATE SKIP LOCKED``, which SQLite, one writer, leaves out; a flag's
literal), a Core expression on the schema's tables (:data:`TABLES`). Each
engine compiles it once, on first use (:class:`Compiled`): SQLite to its ``:name``
placeholders, psycopg to ``%(name)s`` (SQLAlchemy doubles a literal ``%`` there); the
stores run the compiled text on their DBAPI connection with a dict of parameters, so the
hot path costs a dictionary lookup, not SQLAlchemy's execution machinery
(docs/benchmarks.md, "One SQL layer").

The statements use what both engines read alike: ``false``/``true`` (SQLite's since
3.23), ``CASE`` for ``max``/``greatest``, ``ON CONFLICT`` upserts, ``RETURNING``. What
truly differs lives in one module per engine, :mod:`geminibot.store.sqlite_sql` and
:mod:`geminibot.store.pg_sql`, each an :class:`Engine`: the full-text index (FTS5 rows or
the ``tsvector`` columns); PostgreSQL's host leases are :mod:`geminibot.store.pgstore`'s.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from geminibot.store.schema import metadata

#: A statement: text with named parameters, or a Core expression on :data:`TABLES`; or
#: text written as a plain string (``":url"`` parameters too), which a module that
#: defines statements for the faces uses so that importing it costs no SQLAlchemy (the
#: servers start fast: :mod:`geminibot.store.whatsnew`, :mod:`geminibot.store.lookups`).
Statement = sa.ClauseElement | str


@dataclass(frozen=True, eq=False)
class Rows:
    """A statement of the hot path that takes each row (once, or many with
    ``executemany``) as a tuple of its parameters ``names``, in that order: no dict built
    and then read by name (sqlite3 makes a string of each name to look it up). It compiles
    to positional placeholders (``?``, ``%s``), checked to follow ``names``."""

    statement: sa.TextClause
    names: tuple[str, ...]


class Compiled(dict[Statement | Rows, str]):
    """The statements compiled for one engine: ``compiled[STATEMENT]`` is its SQL text
    (parameters are passed as a dict; a :class:`Rows`' as a tuple), compiled on first
    use by ``dialect`` (``positional``: a :class:`Rows`'). (A dict: a statement is hashed
    by identity, a string by its kept hash, and the lookup costs the hot path no Python
    call.)"""

    def __init__(self, dialect: sa.Dialect, positional: sa.Dialect) -> None:
        super().__init__()
        self.dialect = dialect
        self.positional = positional

    def __missing__(self, statement: Statement | Rows) -> str:
        if isinstance(statement, Rows):
            positional = statement.statement.compile(dialect=self.positional)
            if tuple(positional.positiontup or ()) != statement.names:
                raise ValueError(f"parameters {positional.positiontup} not {statement.names}")
            sql = self[statement] = str(positional)
        elif isinstance(statement, str):
            sql = self[statement] = self.once(statement)
        else:
            sql = self[statement] = str(statement.compile(dialect=self.dialect))
        return sql

    def once(self, text: str) -> str:
        """A statement put together for one call (filters chosen at run time), compiled
        and not kept."""
        return str(sa.text(text).compile(dialect=self.dialect))


@dataclass(frozen=True)
class Engine:
    """One engine's compiled statements and the few of its own the shared logic runs."""

    name: str
    sql: Compiled
    #: Take a page's text out of the full-text index (``:id``).
    drop_text: sa.TextClause
    #: Clear every host's skip of the last run.
    clear_skips: sa.TextClause
    #: The kept text of every page whose text is searchable, in row order: its URL,
    #: host, title, headings and body.
    page_text: sa.TextClause
    #: Insert a page's row (:data:`PAGE_ROW`), then its text in the columns of the
    #: engine's text index if it keeps it there (``headings``, ``body``).
    add_page: Rows
    #: The files a page's labelled links point to, with their text (:func:`linked_files`).
    linked_files: sa.TextClause
    #: Replace the title and text of a page whose text is searchable (``:id``,
    #: ``:title``, ``:headings``, ``:body``, ``:url``), logged as a change where the
    #: engine logs them.
    replace_text: tuple[sa.TextClause, ...]
    #: Put a page's text in the engine's text index, if it keeps it beside the row
    #: (``:id``, ``:title``, ``:headings``, ``:body``, ``:url``).
    add_text: tuple[sa.TextClause, ...] = ()


#: The schema's tables (:mod:`geminibot.store.schema`), which the Core expressions below
#: are written on; the runtime source of truth the migrations are checked against.
TABLES = metadata("postgresql").tables
_urls, _hosts = TABLES["urls"], TABLES["hosts"]


class Given(sa.TableClause):
    """The values of the list parameter ``param``, a row each (column ``value``), to join
    with a table: a JSON array read with ``json_each`` on SQLite, a text array
    ``unnest``-ed on PostgreSQL; a list of any length, one compiled text. Each value is
    given once. (A join: ``IN (SELECT ...)`` makes SQLite build a temporary index of the
    list at each run; docs/benchmarks.md, "The one store's CPU per page".)"""

    inherit_cache = True

    def __init__(self, param: str) -> None:
        super().__init__(f"given_{param}", sa.column("value", sa.Text))
        self.param = param


@compiles(Given, "sqlite")
def _json_each(element: Given, compiler: SQLCompiler, **kw: Any) -> str:
    values = compiler.process(sa.bindparam(element.param), **kw)
    return f"json_each({values}) AS {element.name}"


@compiles(Given, "postgresql")
def _unnest(element: Given, compiler: SQLCompiler, **kw: Any) -> str:
    values = compiler.process(sa.bindparam(element.param), **kw)
    return f"unnest(CAST({values} AS text[])) AS {element.name} (value)"


def _const(sql: str) -> sa.ColumnElement[Any]:
    return sa.literal_column(sql)


# --- settings ---

SETTING = sa.text("SELECT value FROM settings WHERE key = :key")
ADD_SETTING = sa.text(
    "INSERT INTO settings (key, value) VALUES (:key, :value) ON CONFLICT (key) DO NOTHING"
)
SET_SETTING = sa.text(
    "INSERT INTO settings (key, value) VALUES (:key, :value)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)

# --- hosts ---

HOST_STATES = sa.text(
    "SELECT host, last_fetch_at, coalesce(last_duration, 0), not_before, slow_downs FROM hosts"
)
#: One host's politeness state (:class:`~geminibot.store.records.HostState`).
HOST_STATE = sa.text(
    "SELECT last_fetch_at, coalesce(last_duration, 0), not_before, slow_downs FROM hosts"
    " WHERE host = :host"
)
#: Hosts with queued URLs, oldest work first, with how many each.
HOSTS_WITH_WORK = sa.text(
    "SELECT host, count(*) FROM urls WHERE state = 'queued' GROUP BY host ORDER BY min(id)"
)
COUNT_PAGES = sa.text("SELECT count(*) FROM pages")
COUNT_SEARCHABLE = sa.text("SELECT count(*) FROM pages WHERE text_indexed")
COUNT_RANKED = sa.text("SELECT count(*) FROM authority")
#: The hosts with URLs waiting for their first visit (queued or leased, never due again).
COUNT_HOSTS_WAITING = sa.text(
    "SELECT count(DISTINCT host) FROM urls"
    " WHERE state IN ('queued', 'leased') AND next_visit IS NULL"
)
COUNT_HOSTS = sa.text("SELECT count(*) FROM hosts")
SKIP_HOST = sa.text("UPDATE hosts SET skipped_reason = :reason WHERE host = :host")
#: The host's row after a request: its politeness state and its unanswered requests in a
#: row (vanished hosts, see :mod:`geminibot.store.freshness`).
HOST_AFTER_FETCH = sa.text(
    "UPDATE hosts SET last_fetch_at = :last_end, last_duration = :duration,"
    " not_before = :not_before, slow_downs = :slow_downs,"
    " failures = CASE WHEN :failed THEN failures + 1 ELSE 0 END,"
    " failing_since = CASE WHEN :failed THEN coalesce(failing_since, :started) END"
    " WHERE host = :host"
)
#: One live URL fewer on the host (a URL gone).
HOST_URL_GONE = sa.text(
    "UPDATE hosts SET urls_total = CASE WHEN urls_total > 0 THEN urls_total - 1 ELSE 0 END"
    " WHERE host = :host"
)

# --- policy files and certificate pins ---

POLICY_FILE = sa.text(
    "SELECT outcome, reason, status, body, fetched_at, expires_at FROM robots"
    " WHERE host = :host AND name = :name"
)
SAVE_POLICY_FILE = sa.text(
    "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason, status, body)"
    " VALUES (:host, :name, :fetched_at, :expires_at, :outcome, :reason, :status, :body)"
    " ON CONFLICT (host, name) DO UPDATE SET fetched_at = excluded.fetched_at,"
    " expires_at = excluded.expires_at, outcome = excluded.outcome,"
    " reason = excluded.reason, status = excluded.status, body = excluded.body"
)
PIN = sa.text("SELECT fingerprint FROM pins WHERE host = :host AND port = :port")
SET_PIN = sa.text(
    "INSERT INTO pins (host, port, fingerprint, first_seen)"
    " VALUES (:host, :port, :fingerprint, :now)"
    " ON CONFLICT (host, port) DO UPDATE SET fingerprint = excluded.fingerprint,"
    " first_seen = excluded.first_seen"
)

# --- TLS and certificates (tls_history) ---

SAW_TLS = sa.text(
    "INSERT INTO tls_history (host, sha256, tls_version, cipher, first_seen, last_seen,"
    " spki_sha256, subject, issuer, sans, trust, key_type, key_bits, not_before, not_after,"
    " name_matches, parsed) VALUES (:host, :sha256, :tls_version, :cipher, :seen, :seen,"
    " :spki_sha256, :subject, :issuer, :sans, :trust, :key_type, :key_bits, :not_before,"
    " :not_after, :name_matches, :parsed)"
    " ON CONFLICT (host, sha256, tls_version, cipher) DO UPDATE SET last_seen ="
    " CASE WHEN excluded.last_seen > tls_history.last_seen THEN excluded.last_seen"
    " ELSE tls_history.last_seen END"
)

# --- the logs ---

LOG_FETCH = Rows(
    sa.text(
        "INSERT INTO fetches (url, host, status, meta, error, started_at, duration)"
        " VALUES (:url, :host, :status, :meta, :error, :started, :duration)"
    ),
    ("url", "host", "status", "meta", "error", "started", "duration"),
)
LOG_DECISION = Rows(
    sa.text(
        "INSERT INTO decisions (url, host, allowed, reason, at)"
        " VALUES (:url, :host, :allowed, :reason, :at)"
    ),
    ("url", "host", "allowed", "reason", "at"),
)
PRUNE_FETCHES = sa.text("DELETE FROM fetches WHERE started_at < :before")
PRUNE_DECISIONS = sa.text("DELETE FROM decisions WHERE at < :before")

# --- the frontier ---

URL_STATE = sa.text("SELECT state, reason FROM urls WHERE url = :url")
COUNT_QUEUED = sa.text("SELECT count(*) FROM urls WHERE state = 'queued'")
LEASED = sa.text("SELECT url FROM urls WHERE state = 'leased' ORDER BY id")
#: A claimed URL's lease taken (its attempt counts once its request is sent: MARK_SENT).
MARK_LEASED = sa.text(
    "UPDATE urls SET state = 'leased', lease = :lease, updated_at = :now WHERE url = :url"
)
#: A claimed URL's first request about to be sent: one attempt more.
MARK_SENT = sa.text(
    "UPDATE urls SET attempts = attempts + 1"
    " WHERE url = :url AND state = 'leased' AND lease = :lease"
)
#: A leased URL closed (fetched: a submitted URL's priority is spent); only a failure
#: keeps its attempts counted; a "not found" counts one miss more (since the first), a
#: failure keeps them, any other answer ends them.
FINISH = sa.text(
    "UPDATE urls SET state = :state, reason = :reason, lease = NULL, updated_at = :now,"
    " priority = 0,"
    " attempts = CASE WHEN :failed THEN attempts ELSE 0 END,"
    " misses = CASE WHEN :not_found THEN misses + 1 WHEN :failed THEN misses ELSE 0 END,"
    " missing_since = CASE WHEN :not_found THEN coalesce(missing_since, :now)"
    " WHEN :failed THEN missing_since END"
    " WHERE url = :url"
)


def finish_params(url: str, state: str, reason: str | None, now: float) -> dict[str, object]:
    """The parameters of :data:`FINISH` closing ``url`` as ``state`` at ``now``."""
    return {
        "url": url,
        "state": state,
        "reason": reason,
        "now": now,
        "failed": state == "failed",
        "not_found": state == "not_found",
    }


#: A link to a not-found URL found again: due at most ``:after`` seconds after its last
#: answer (now, if that is past), unless it is due sooner already.
LINKED_AGAIN = sa.text(
    "UPDATE urls SET next_visit = CASE WHEN updated_at + :after > :now"
    " THEN updated_at + :after ELSE :now END"
    " WHERE url = :url AND state = 'not_found' AND (next_visit IS NULL OR next_visit >"
    " CASE WHEN updated_at + :after > :now THEN updated_at + :after ELSE :now END)"
)
#: A leased URL given back to the queue; ``:sent`` (its request was sent): the attempt
#: that request counted goes back with it.
RELEASE = sa.text(
    "UPDATE urls SET state = 'queued', lease = NULL,"
    " attempts = CASE WHEN :sent AND attempts > 0 THEN attempts - 1 ELSE attempts END"
    " WHERE url = :url AND state = 'leased'"
)
#: A URL the per-host cap trapped, queued again.
REQUEUE_CAPPED = sa.text(
    "UPDATE urls SET state = 'queued', reason = NULL, updated_at = :now WHERE url = :url"
)
#: A host's row, made when a URL of it is first met.
ADD_HOST = Rows(
    sa.text(
        "INSERT INTO hosts (host, first_seen) VALUES (:host, :now) ON CONFLICT (host) DO NOTHING"
    ),
    ("host", "now"),
)
_given_hosts = Given("hosts")
#: The rows of the hosts ``:hosts``, locked in host order until the transaction ends
#: (PostgreSQL: every transaction that adds URLs to a host holds its row; SQLite has one
#: writer and no row locks): their live and deep URLs.
LOCK_HOSTS = (
    sa.select(_hosts.c.host, _hosts.c.urls_total, _hosts.c.deep_urls)
    .select_from(_given_hosts.join(_hosts, _hosts.c.host == _given_hosts.c.value))
    .order_by(_hosts.c.host)
    .with_for_update(of=_hosts)
)
SET_HOST_COUNTS = sa.text(
    "UPDATE hosts SET urls_total = :total, deep_urls = :deep WHERE host = :host"
)
_given_urls = Given("urls")
#: The state and reason of those of the URLs ``:urls`` the frontier holds.
URL_STATES = sa.select(_urls.c.url, _urls.c.state, _urls.c.reason).select_from(
    _given_urls.join(_urls, _urls.c.url == _given_urls.c.value)
)
ADD_URL = Rows(
    sa.text(
        "INSERT INTO urls (url, host, path, has_query, depth, parent, state, reason, updated_at)"
        " VALUES (:url, :host, :path, :has_query, :depth, :parent, :state, :reason, :now)"
        " ON CONFLICT (url) DO NOTHING"
    ),
    ("url", "host", "path", "has_query", "depth", "parent", "state", "reason", "now"),
)
#: Query strings already on a (host, path), not trapped (read through the partial index
#: ``urls_query_path``, whose condition each engine writes its own way).
QUERIES_ON_PATH = sa.select(sa.func.count()).where(
    _urls.c.host == sa.bindparam("host"),
    _urls.c.path == sa.bindparam("path"),
    _urls.c.has_query == sa.true(),
    _urls.c.state != _const("'trapped'"),
)
#: A host's next queued URL, locked (one another process holds is passed over): one
#: submitted or rechecked by name first (``priority``), then the oldest; read in the
#: order of ``urls_host_state``, no sort.
CLAIM = (
    sa.select(_urls.c.url, _urls.c.depth)
    .where(_urls.c.host == sa.bindparam("host"), _urls.c.state == _const("'queued'"))
    .order_by(_urls.c.priority.desc(), _urls.c.id)
    .limit(_const("1"))
    .offset(_const("0"))
    .with_for_update(skip_locked=True)
)


@functools.cache
def give_up(scope: str) -> sa.TextClause:
    """Record failed the leased URLs in ``scope`` (a condition on ``urls u``) whose
    attempts reached ``:max``."""
    return sa.text(
        "UPDATE urls SET state = 'failed', lease = NULL, updated_at = :now, next_visit = NULL,"
        " priority = 0,"
        " reason = 'given up: ' || attempts || ' attempts ended abnormally'"
        f" WHERE url IN (SELECT url FROM urls u WHERE u.state = 'leased' AND {scope})"
        " AND attempts >= :max"
    )


@functools.cache
def requeue_leased(scope: str) -> sa.TextClause:
    """Queue again the leased URLs in ``scope`` (a condition on ``urls u``)."""
    return sa.text(
        "UPDATE urls SET state = 'queued', lease = NULL"
        f" WHERE url IN (SELECT url FROM urls u WHERE u.state = 'leased' AND {scope})"
    )


#: The paths a host's deep-URL count is taken from (its URLs not trapped).
DEEP_PATHS = sa.text("SELECT path FROM urls WHERE host = :host AND state != 'trapped'")

# --- freshness ---

SCHEDULE = sa.text(
    "UPDATE urls SET next_visit = :next_visit, revisit_interval = :interval WHERE url = :url"
)
PREVIOUS = sa.text(
    "SELECT p.status, p.content_hash, p.duplicate_of, u.revisit_interval, u.attempts,"
    " p.changed_at, p.gone_at, u.misses, u.missing_since,"
    " EXISTS (SELECT 1 FROM feeds f WHERE f.url = u.url)"
    " FROM urls u LEFT JOIN pages p ON p.url = u.url WHERE u.url = :url"
)
#: The states of a URL whose visit is over: asked again when its ``next_visit`` comes
#: (a ``gone`` URL's is NULL, but after ``geminibot recheck``).
FINISHED_STATES = ("done", "refused", "failed", "not_found", "gone")
FINISHED = "(" + ", ".join(f"'{state}'" for state in FINISHED_STATES) + ")"
#: The finished URLs due at ``:now`` queued again.
REVISIT_DUE = sa.text(
    "UPDATE urls SET state = 'queued', lease = NULL"
    f" WHERE state IN {FINISHED} AND next_visit <= :now"
)
#: The hosts of the finished URLs due at ``:now``, with how many each.
DUE_HOSTS = sa.text(
    f"SELECT host, count(*) FROM urls WHERE state IN {FINISHED} AND next_visit <= :now"
    " GROUP BY host"
)
#: ``crawl --refresh``: every finished URL queued again, but those gone.
REVISIT_ALL = sa.text(
    "UPDATE urls SET state = 'queued', lease = NULL"
    " WHERE state IN ('done', 'refused', 'failed', 'not_found')"
)
#: Whether a finished URL is due at ``:now``, or a URL newer than ``:newest`` (an id;
#: NULL: none) is queued (a continuous crawl looks every DUE_POLL).
ANY_DUE = sa.text(
    f"SELECT EXISTS (SELECT 1 FROM urls WHERE next_visit <= :now AND state IN {FINISHED})"
    " OR EXISTS (SELECT 1 FROM urls WHERE id > :newest AND state = 'queued')"
)
#: The highest id of the URLs (a continuous crawl's mark: as it falls asleep, as its run
#: looks for work).
NEWEST_URL = sa.text("SELECT max(id) FROM urls")
#: The hosts of the URLs queued with an id above ``:newest`` (new to the store since a
#: mark: a ``/submit``, another process's links), with how many each.
QUEUED_SINCE = sa.text(
    "SELECT host, count(*) FROM urls WHERE id > :newest AND state = 'queued' GROUP BY host"
)
#: The aliases of a canonical URL queued again now (their body is no longer its body);
#: their hosts, one per URL.
REQUEUE_ALIASES = sa.text(
    "UPDATE urls SET state = 'queued', lease = NULL, next_visit = NULL"
    " WHERE state IN ('done', 'refused', 'failed')"
    " AND url IN (SELECT url FROM pages WHERE duplicate_of = :url) RETURNING host"
)
#: The pages still in the search index (text, or a hash to be found by) of the hosts
#: vanished at a time (:mod:`geminibot.store.freshness`): id and URL.
VANISHED_PAGES = sa.text(
    "SELECT id, url FROM pages WHERE (text_indexed OR content_hash IS NOT NULL) AND host IN"
    " (SELECT host FROM hosts h WHERE failures >= :failures AND failing_since <= :since"
    " AND EXISTS (SELECT 1 FROM hosts o WHERE o.failures = 0"
    " AND o.last_fetch_at > h.failing_since)) ORDER BY id"
)

#: The next time work is due in the store, after ``:now``: a revisit, a queued host's
#: back-off, a policy file to ask again (``crawl --forever``).
NEXT_DUE = sa.text(
    "SELECT min(due) FROM ("
    " SELECT min(next_visit) AS due FROM urls WHERE next_visit IS NOT NULL"
    f"  AND state IN {FINISHED}"
    " UNION ALL"
    " SELECT min(h.not_before) FROM hosts h WHERE h.not_before > :now"
    "  AND EXISTS (SELECT 1 FROM urls u WHERE u.host = h.host AND u.state = 'queued')"
    " UNION ALL"
    " SELECT min(r.expires_at) FROM robots r WHERE r.expires_at > :now"
    "  AND EXISTS (SELECT 1 FROM urls u WHERE u.host = r.host AND u.state = 'queued')"
    ") AS next_work"
)
#: Whether any URL is queued (waiting for a host skipped for now).
ANY_QUEUED = sa.text("SELECT EXISTS (SELECT 1 FROM urls WHERE state = 'queued')")

# --- recheck (geminibot.store.recheck): a URL, or a host's URLs (``:url``, ``:host``) ---

#: The states of the URL, with how many (one).
URL_STATES_OF = sa.text("SELECT state, count(*) FROM urls WHERE url = :url GROUP BY state")
#: The states of the host's URLs, with how many each.
HOST_STATES_OF = sa.text("SELECT state, count(*) FROM urls WHERE host = :host GROUP BY state")
#: The URL, if gone and not due yet, live again: its host counts it (HOST_URL_GONE undoes it
#: if it answers gone again).
URL_GONE_BACK = sa.text(
    "UPDATE hosts SET urls_total = urls_total + (SELECT count(*) FROM urls"
    " WHERE url = :url AND state = 'gone' AND next_visit IS NULL) WHERE host = :host"
)
#: The host's gone URLs not due yet live again, as URL_GONE_BACK.
HOST_GONE_BACK = sa.text(
    "UPDATE hosts SET urls_total = urls_total + (SELECT count(*) FROM urls"
    " WHERE host = :host AND state = 'gone' AND next_visit IS NULL) WHERE host = :host"
)
#: The URL, if finished, due at ``:now``.
URL_DUE_NOW = sa.text(
    f"UPDATE urls SET next_visit = :now WHERE url = :url AND state IN {FINISHED}"
    " AND (next_visit IS NULL OR next_visit > :now)"
)
#: The URL, if it is to be fetched now (queued, being fetched, or finished and due at
#: ``:now``), claimed before its host's other queued URLs (its ``priority``, spent when
#: it is fetched: FINISH).
URL_FIRST = sa.text(
    "UPDATE urls SET priority = 1 WHERE url = :url AND priority = 0"
    f" AND (state IN ('queued', 'leased') OR (state IN {FINISHED} AND next_visit <= :now))"
)
#: The host's finished URLs due at ``:now``.
HOST_DUE_NOW = sa.text(
    f"UPDATE urls SET next_visit = :now WHERE host = :host AND state IN {FINISHED}"
    " AND (next_visit IS NULL OR next_visit > :now)"
)

# --- pages ---

#: A page fetched again with the same status and body: only its fetch time changes.
TOUCH_PAGE = sa.text("UPDATE pages SET fetched_at = :at, meta = :meta WHERE url = :url")
PAGE_HASH = sa.text("SELECT content_hash, duplicate_of FROM pages WHERE url = :url")
PAGE_ID = sa.text("SELECT id FROM pages WHERE url = :url")
#: The first indexed page (not itself a duplicate) with a content hash, other than a URL.
FIRST_WITH_HASH = sa.text(
    "SELECT url FROM pages WHERE content_hash = :hash AND url != :url"
    " AND duplicate_of IS NULL ORDER BY id LIMIT 1"
)
ALIASES = sa.text("SELECT url FROM pages WHERE duplicate_of = :url ORDER BY url")
REPOINT_ALIASES = sa.text("UPDATE pages SET duplicate_of = :new WHERE duplicate_of = :old")
#: A page becomes an alias of another: out of the search index.
DEMOTE_PAGE = sa.text(
    "UPDATE pages SET duplicate_of = :new, title = '', text_indexed = false WHERE id = :id"
)
#: A vanished host's page: out of the search index, not found by its hash, gone at ``:now``.
DELIST_PAGE = sa.text(
    "UPDATE pages SET title = '', text_indexed = false, content_hash = NULL,"
    " gone_at = coalesce(gone_at, :now) WHERE id = :id"
)
DELETE_LINKS = sa.text("DELETE FROM links WHERE page_id = :id")
DELETE_PAGE = sa.text("DELETE FROM pages WHERE id = :id")
#: The labels of the links to a file, by target (``links_target``), each once, in the
#: order of the pages written (a new label comes after those a file shows).
FILE_LABELS = sa.text(
    "SELECT label FROM links WHERE target = :url AND label != ''"
    " GROUP BY label ORDER BY min(page_id), label LIMIT :limit"
)
#: A page's row: its columns, and their parameters in that order.
PAGE_COLUMNS = (
    "url, host, status, meta, mime, lang, size, content_hash, fetched_at, title,"
    " duplicate_of, redirect_to, text_indexed, changed_at, gone_at, charset_ok"
)
PAGE_ROW = (
    *("url", "host", "status", "meta", "mime", "lang", "size", "hash", "at", "title"),
    *("dup", "redirect", "keep", "changed", "gone", "charset_ok"),
)


def add_page(text_columns: tuple[str, ...] = ()) -> Rows:
    """Insert a page's row (:data:`PAGE_ROW`, then ``text_columns``, each from the
    parameter of its name). Its id is read after (:data:`PAGE_ID`): on SQLite,
    ``RETURNING`` makes FTS5 write a segment per page instead of one per transaction
    (``tests/index/test_index_updater.py``)."""
    names = (*PAGE_ROW, *text_columns)
    columns = "".join(f", {name}" for name in text_columns)
    values = ", ".join(f":{name}" for name in names)
    return Rows(sa.text(f"INSERT INTO pages ({PAGE_COLUMNS}{columns}) VALUES ({values})"), names)


ADD_LINK = Rows(
    sa.text(
        "INSERT INTO links (page_id, position, target, label)"
        " VALUES (:id, :position, :target, :label)"
    ),
    ("id", "position", "target", "label"),
)


def linked_files(body: str) -> sa.TextClause:
    """The files (searchable answers not text) the labelled links of page ``:id`` point
    to, each once, in the order of its first link to it, at most ``:limit``: id, URL and
    text, ``body`` being the engine's expression of the kept body of page ``p``. A link
    whose label is the file's title (its first label, or its name) gives it nothing new."""
    return sa.text(
        f"SELECT p.id, p.url, {body} FROM links l JOIN pages p ON p.url = l.target"
        " WHERE l.page_id = :id AND l.label != '' AND l.label != p.title AND p.text_indexed"
        " AND p.mime NOT LIKE 'text/%' GROUP BY p.id, p.url ORDER BY min(l.position)"
        " LIMIT :limit"
    )


# --- link authority (through the temporary table ``host_rank``) ---

#: Each host's authority, for the statements below to read (the writer's session only).
HOST_RANK_TABLE = sa.text(
    "CREATE TEMP TABLE host_rank"
    " (host TEXT PRIMARY KEY, score DOUBLE PRECISION, weight DOUBLE PRECISION)"
)
DROP_HOST_RANK = sa.text("DROP TABLE IF EXISTS host_rank")

ADD_HOST_RANK = sa.text(
    "INSERT INTO host_rank (host, score, weight) VALUES (:host, :score, :weight)"
)
CLEAR_AUTHORITY = sa.text("DELETE FROM authority")
FILL_AUTHORITY = sa.text(
    "INSERT INTO authority (url, score, weight) SELECT p.url, h.score, h.weight"
    " FROM pages p JOIN host_rank h ON h.host = p.host"
)

# --- the search capsule ---

#: The pages linking to a URL (as normalised, or as given), by URL.
BACKLINKS = sa.text(
    "SELECT p.url, p.title, min(l.label) FROM links l JOIN pages p ON p.id = l.page_id"
    " WHERE l.target IN (:target, :given) GROUP BY p.id ORDER BY p.url LIMIT :limit"
)
#: A page of the known hosts, with their pages.
HOSTS_PAGE = sa.text(
    "SELECT h.host, h.last_fetch_at, h.skipped_reason,"
    " (SELECT count(*) FROM pages p WHERE p.host = h.host)"
    " FROM hosts h ORDER BY h.host LIMIT :limit OFFSET :offset"
)
