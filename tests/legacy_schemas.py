"""The crawl database's DDL before its one history (kept to build old databases in tests).

Each engine had its own list of versions: SQLite's ``PRAGMA user_version`` 1-6, and
PostgreSQL's ``geminibot_schema`` 1-5; :data:`SQLITE` and :data:`PG` hold them as they
were, version N at index N - 1. The SQLite ``authority`` table and ``links_target`` index
were made outside any version, by the commands that needed them (:data:`SQLITE_EXTRAS`).
"""

from geminibot.store.migrations.versions.v0006_index_changes import TRIGGERS

#: The indexes on ``urls`` of both engines' version 1.
URLS_V1_INDEXES = (
    "CREATE INDEX urls_host_state ON urls (host, state, id)",
    "CREATE INDEX urls_state ON urls (state)",
    "CREATE INDEX urls_host_path ON urls (host, path, has_query)",
)

#: The columns of ``pages`` written alike in both engines' version 1.
PAGES_V1_COLUMNS = """\
        url TEXT NOT NULL UNIQUE,
        host TEXT NOT NULL,
        status INTEGER NOT NULL,
        meta TEXT NOT NULL,
        mime TEXT,
        lang TEXT,
"""

SQLITE_V1 = (
    # Crawl settings that a resumed run must agree with (role, agent).
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # Hosts ("host" or "host:port" when the port is not 1965) and their politeness state.
    """CREATE TABLE hosts (
        host TEXT PRIMARY KEY,
        first_seen REAL NOT NULL,
        last_fetch_at REAL,
        last_duration REAL,
        slow_downs INTEGER NOT NULL DEFAULT 0,
        not_before REAL NOT NULL DEFAULT 0,
        urls_total INTEGER NOT NULL DEFAULT 0,
        skipped_reason TEXT
    )""",
    # Frontier and visited set: one row per normalised URL ever seen.
    # state: queued -> leased -> done | refused | failed ; or trapped/skipped at enqueue.
    """CREATE TABLE urls (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        host TEXT NOT NULL,
        path TEXT NOT NULL,
        has_query INTEGER NOT NULL,
        depth INTEGER NOT NULL,
        parent TEXT,
        state TEXT NOT NULL,
        reason TEXT,
        lease TEXT,
        updated_at REAL NOT NULL
    )""",
    *URLS_V1_INDEXES,
    # Policy files per host (robots.txt, robots2.txt, agents.txt) and how their fetch went.
    """CREATE TABLE robots (
        host TEXT NOT NULL,
        name TEXT NOT NULL,
        fetched_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        outcome TEXT NOT NULL,
        reason TEXT NOT NULL,
        status INTEGER,
        body BLOB,
        PRIMARY KEY (host, name)
    )""",
    # Every policy decision taken about a URL (allowed or refused) and why.
    """CREATE TABLE decisions (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        allowed INTEGER NOT NULL,
        reason TEXT NOT NULL,
        at REAL NOT NULL
    )""",
    "CREATE INDEX decisions_url ON decisions (url)",
    # Every request sent: the crawl's own access log.
    """CREATE TABLE fetches (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        status INTEGER,
        meta TEXT NOT NULL DEFAULT '',
        error TEXT,
        started_at REAL NOT NULL,
        duration REAL NOT NULL
    )""",
    # The index: one row per fetched URL (including redirects and failures).
    """CREATE TABLE pages (
        id INTEGER PRIMARY KEY,
"""
    + PAGES_V1_COLUMNS
    + """        size INTEGER NOT NULL,
        content_hash TEXT,
        fetched_at REAL NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        duplicate_of TEXT,
        redirect_to TEXT,
        text_indexed INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX pages_hash ON pages (content_hash)",
    "CREATE INDEX pages_host ON pages (host)",
    """CREATE TABLE links (
        page_id INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        target TEXT NOT NULL,
        label TEXT NOT NULL,
        PRIMARY KEY (page_id, position)
    )""",
    """CREATE VIRTUAL TABLE pages_fts USING fts5 (
        title, headings, body, url, tokenize = 'unicode61 remove_diacritics 2'
    )""",
)

SQLITE_V2 = (
    # Attempts at a URL cut short (see geminibot.store.frontier, MAX_URL_ATTEMPTS).
    "ALTER TABLE urls ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    # Certificate pins (trust on first use) per Gemini host and port, kept between runs.
    """CREATE TABLE pins (
        host TEXT NOT NULL,
        port INTEGER NOT NULL,
        fingerprint TEXT NOT NULL,
        first_seen REAL NOT NULL,
        PRIMARY KEY (host, port)
    )""",
)

# Freshness (docs/crawl.md): when each finished URL is due again and its learned revisit
# interval; a URL that answered 51/52 becomes "gone". ``attempts`` (version 2) now also
# counts failed requests in a row: an answer sets it back to 0. Rows of an older database
# are due one day after their last change (a failure: one hour; one given up: never).
SQLITE_V3 = (
    "ALTER TABLE urls ADD COLUMN next_visit REAL",
    "ALTER TABLE urls ADD COLUMN revisit_interval REAL",
    "UPDATE urls SET next_visit = updated_at + 86400, attempts = 0"
    " WHERE state IN ('done', 'refused')",
    "UPDATE urls SET next_visit = updated_at + 3600, attempts = max(attempts, 1)"
    " WHERE state = 'failed' AND coalesce(reason, '') NOT LIKE 'given up:%'",
    "CREATE INDEX urls_next_visit ON urls (next_visit) WHERE next_visit IS NOT NULL",
    "CREATE INDEX pages_duplicate_of ON pages (duplicate_of) WHERE duplicate_of IS NOT NULL",
    "CREATE INDEX fetches_started ON fetches (started_at)",
    "CREATE INDEX decisions_at ON decisions (at)",
)

# Per host: its deep URLs (the trap bound of geminibot.store.traps; NULL: not counted yet,
# counted from its rows when first needed) and its requests failed in a row since its last
# answer, with the first one's time (vanished hosts: geminibot.store.freshness).
SQLITE_V4 = (
    "ALTER TABLE hosts ADD COLUMN deep_urls INTEGER",
    "ALTER TABLE hosts ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE hosts ADD COLUMN failing_since REAL",
)

# Fewer index writes per URL and per page (docs/benchmarks.md, "Fewer index writes"): no
# query reads ``decisions`` by URL, and only URLs with a query string are counted per path
# (geminibot.store.frontier; a host's paths are read through ``urls_host_state``).
SQLITE_V5 = (
    "DROP INDEX decisions_url",
    "DROP INDEX urls_host_path",
    "CREATE INDEX urls_query_path ON urls (host, path) WHERE has_query = 1",
)

# The searchable set's change log, for the derived search index that follows the store
# (geminibot.index.updater): a page's id each time it enters or leaves the searchable text
# (``text_indexed``): written, replaced, delisted, deleted. Its sequence never reuses a
# number (AUTOINCREMENT), so the index records the last one it applied; the index's
# updater deletes the rows it has applied.
# (its triggers: those the history's version 6 makes)
SQLITE_V6 = (
    "CREATE TABLE index_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, page_id INTEGER NOT NULL)",
    *TRIGGERS,
)


PG_V1 = (
    "CREATE TABLE geminibot_schema (version INTEGER NOT NULL)",
    "INSERT INTO geminibot_schema (version) VALUES (0)",
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE hosts (
        host TEXT PRIMARY KEY,
        first_seen DOUBLE PRECISION NOT NULL,
        last_fetch_at DOUBLE PRECISION,
        last_duration DOUBLE PRECISION,
        slow_downs INTEGER NOT NULL DEFAULT 0,
        not_before DOUBLE PRECISION NOT NULL DEFAULT 0,
        urls_total INTEGER NOT NULL DEFAULT 0,
        skipped_reason TEXT
    )""",
    # Which crawl process holds a host, until when (renewed by hold_host, right before
    # every request).
    """CREATE TABLE host_leases (
        host TEXT PRIMARY KEY,
        holder TEXT,
        lease_until DOUBLE PRECISION NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE urls (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        host TEXT NOT NULL,
        path TEXT NOT NULL,
        has_query BOOLEAN NOT NULL,
        depth INTEGER NOT NULL,
        parent TEXT,
        state TEXT NOT NULL,
        reason TEXT,
        lease TEXT,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
    *URLS_V1_INDEXES,
    """CREATE TABLE robots (
        host TEXT NOT NULL,
        name TEXT NOT NULL,
        fetched_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        outcome TEXT NOT NULL,
        reason TEXT NOT NULL,
        status INTEGER,
        body BYTEA,
        PRIMARY KEY (host, name)
    )""",
    """CREATE TABLE decisions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        allowed BOOLEAN NOT NULL,
        reason TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX decisions_url ON decisions (url)",
    """CREATE TABLE fetches (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        status INTEGER,
        meta TEXT NOT NULL DEFAULT '',
        error TEXT,
        started_at DOUBLE PRECISION NOT NULL,
        duration DOUBLE PRECISION NOT NULL
    )""",
    r"""CREATE TABLE pages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
"""
    + PAGES_V1_COLUMNS
    + r"""        size BIGINT NOT NULL,
        content_hash TEXT,
        fetched_at DOUBLE PRECISION NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        duplicate_of TEXT,
        redirect_to TEXT,
        text_indexed BOOLEAN NOT NULL DEFAULT false,
        headings TEXT,
        body TEXT,
        tsv TSVECTOR GENERATED ALWAYS AS (CASE WHEN text_indexed THEN
            setweight(to_tsvector('simple', title), 'A')
            || setweight(to_tsvector('simple', coalesce(headings, '')), 'B')
            || setweight(to_tsvector('simple', regexp_replace(url, '[^[:alnum:]]+', ' ', 'g')), 'C')
            || setweight(to_tsvector('simple', coalesce(body, '')), 'D')
        ELSE ''::tsvector END) STORED
    )""",
    "CREATE INDEX pages_hash ON pages (content_hash)",
    "CREATE INDEX pages_host ON pages (host)",
    "CREATE INDEX pages_tsv ON pages USING GIN (tsv)",
    """CREATE TABLE links (
        page_id BIGINT NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        target TEXT NOT NULL,
        label TEXT NOT NULL,
        PRIMARY KEY (page_id, position)
    )""",
)

#: Version 2: link authority (:mod:`geminibot.index.authority`), and the index of link
#: targets that backlinks (``serve-search``) look up.
PG_V2 = (
    """CREATE TABLE authority (
        url TEXT PRIMARY KEY,
        score DOUBLE PRECISION NOT NULL,
        weight DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX links_target ON links (target)",
)

#: Version 3: attempts per URL and certificate pins.
PG_V3 = (
    # Attempts at a URL cut short (see geminibot.store.frontier, MAX_URL_ATTEMPTS).
    "ALTER TABLE urls ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    # Certificate pins (trust on first use) per Gemini host and port, kept between runs.
    """CREATE TABLE pins (
        host TEXT NOT NULL,
        port INTEGER NOT NULL,
        fingerprint TEXT NOT NULL,
        first_seen DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (host, port)
    )""",
)

#: Version 4: freshness, as SQLite's schema 3 (geminibot.store.db): next visit and learned
#: interval; ``attempts`` (version 3) also counts failed requests in a row. Older rows are
#: due a day after their last change (a failure: an hour; one given up: never).
PG_V4 = (
    "ALTER TABLE urls ADD COLUMN next_visit DOUBLE PRECISION",
    "ALTER TABLE urls ADD COLUMN revisit_interval DOUBLE PRECISION",
    "UPDATE urls SET next_visit = updated_at + 86400, attempts = 0"
    " WHERE state IN ('done', 'refused')",
    "UPDATE urls SET next_visit = updated_at + 3600, attempts = greatest(attempts, 1)"
    " WHERE state = 'failed' AND coalesce(reason, '') NOT LIKE 'given up:%'",
    "CREATE INDEX urls_next_visit ON urls (next_visit) WHERE next_visit IS NOT NULL",
    "CREATE INDEX pages_duplicate_of ON pages (duplicate_of) WHERE duplicate_of IS NOT NULL",
    "CREATE INDEX fetches_started ON fetches (started_at)",
    "CREATE INDEX decisions_at ON decisions (at)",
)

#: Version 5: per host, its deep URLs and its failures in a row, as SQLite's schema 4.
PG_V5 = (
    "ALTER TABLE hosts ADD COLUMN deep_urls INTEGER",
    "ALTER TABLE hosts ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE hosts ADD COLUMN failing_since DOUBLE PRECISION",
)


SQLITE = (SQLITE_V1, SQLITE_V2, SQLITE_V3, SQLITE_V4, SQLITE_V5, SQLITE_V6)
PG = (PG_V1, PG_V2, PG_V3, PG_V4, PG_V5)
SQLITE_EXTRAS = (
    "CREATE TABLE IF NOT EXISTS authority ("
    " url TEXT PRIMARY KEY, score REAL NOT NULL, weight REAL NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS links_target ON links (target)",
)
