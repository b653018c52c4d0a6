"""A page written after the files it links to gives them its labels at once, on both
stores (``db`` is parametrised: SQLite and PostgreSQL): no more than
``MAX_RELABELLED_FILES`` files per page, none that shows the label already or has no
room for one, none for a role that keeps no text."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from db_rows import reading

from geminibot.store.database import Database, open_database
from geminibot.store.pages import (
    MAX_FILE_LABELS,
    MAX_RELABELLED_FILES,
    Link,
    Page,
    file_text,
    write_page,
)

HOST = "gemini://files.test"


def file_url(n: int) -> str:
    return f"{HOST}/f{n:03}.png"


def image(n: int) -> Page:
    """A file as the crawler writes it (:func:`geminibot.crawl.page.file_page`)."""
    url = file_url(n)
    text = file_text(f"f{n:03} png", "image/png")
    return Page(url, "files.test", 20, "image/png", 1.0, size=67, mime="image/png", text=text)


def linking(url: str, links: list[Link]) -> Page:
    return Page(url, "pages.test", 20, "text/gemini", 2.0, mime="text/gemini", text="a page",
                title="A page", links=tuple(links))  # fmt: skip


@contextmanager
def writing(db: str) -> Iterator[Database]:
    with open_database(db, write=True) as database, database.transaction():
        yield database


def body_of(db: str, n: int) -> str:
    """The text of file ``n`` in the engine's text index."""
    sql = "SELECT f.body FROM pages p JOIN pages_fts f ON f.rowid = p.id WHERE p.url = :url"
    if db.startswith("postgresql:"):
        sql = "SELECT body FROM pages WHERE url = :url"
    with open_database(db) as database:
        return str(database.query(sql, {"url": file_url(n)}).fetchone()[0])


def logged(db: str, after: int = 0) -> set[str]:
    """The URLs of the pages an SQLite store has logged a change of for its derived index
    after change ``after`` (none on PostgreSQL, which has no derived index)."""
    if db.startswith("postgresql:"):
        return set()
    with open_database(db) as database:
        sql = "SELECT p.url FROM index_changes c JOIN pages p ON p.id = c.page_id WHERE c.seq > :n"
        return {str(url) for (url,) in database.query(sql, {"n": after})}


def last_change(db: str) -> int:
    if db.startswith("postgresql:"):
        return 0
    with open_database(db) as database:
        return int(database.query("SELECT coalesce(max(seq), 0) FROM index_changes").fetchone()[0])


def test_a_page_labels_the_first_files_it_links_to_up_to_the_bound(db: str) -> None:
    files = MAX_RELABELLED_FILES + 1
    with writing(db) as database:
        for n in range(files):
            write_page(database.connection, database.engine, image(n), "indexer")
    before = last_change(db)
    links = [Link(f"{HOST}/missing{n}.png", "Zebra crossing") for n in range(3)]
    links += [Link(file_url(n), "Zebra crossing") for n in range(files)]
    with writing(db) as database:
        write_page(database.connection, database.engine, linking(f"{HOST}/z", links), "indexer")
    assert body_of(db, 0) == "Zebra crossing\nf000 png\nimage/png"
    assert body_of(db, files - 2).startswith("Zebra crossing\n")
    assert body_of(db, files - 1) == f"f{files - 1:03} png\nimage/png"  # past the bound
    with reading(db) as (conn, search):
        (first,) = search(conn, "zebra inurl:f000", 10)
        assert (first.url, first.title) == (file_url(0), "Zebra crossing")
        assert search(conn, f"zebra inurl:f{files - 1:03}", 10) == []
    if not db.startswith("postgresql:"):  # each file rewritten logged for the derived index
        relabelled = {file_url(n) for n in range(MAX_RELABELLED_FILES)}
        assert logged(db, before) == {f"{HOST}/z", *relabelled}


def test_a_label_shown_a_full_file_or_no_text_kept_rewrites_nothing(db: str) -> None:
    labels = [f"label {n}" for n in range(MAX_FILE_LABELS)]
    with writing(db) as database:
        conn, engine = database.connection, database.engine
        for n in range(2):
            write_page(conn, engine, image(n), "indexer")
        # file 0 takes MAX_FILE_LABELS labels from as many pages, file 1 one
        for n, label in enumerate(labels):
            write_page(conn, engine, linking(f"{HOST}/p{n}", [Link(file_url(0), label)]), "indexer")
        write_page(conn, engine, linking(f"{HOST}/q", [Link(file_url(1), "Kestrel")]), "indexer")
    full, one = body_of(db, 0), body_of(db, 1)
    assert full.count("label ") == MAX_FILE_LABELS and one.startswith("Kestrel\n")
    before = last_change(db)
    with writing(db) as database:
        conn, engine = database.connection, database.engine
        page = linking(f"{HOST}/r", [Link(file_url(0), "Osprey"), Link(file_url(1), "Kestrel")])
        write_page(conn, engine, page, "indexer")  # full; shown already
        page = linking(f"{HOST}/s", [Link(file_url(1), "Harrier")])
        write_page(conn, engine, page, "researcher")  # keeps no text, no label
    assert (body_of(db, 0), body_of(db, 1)) == (full, one)
    assert logged(db, before) == ({f"{HOST}/r"} if "postgresql:" not in db else set())
    with writing(db) as database:  # the label is new: file 1 takes it
        page = linking(f"{HOST}/t", [Link(file_url(1), "Harrier")])
        write_page(database.connection, database.engine, page, "archiver")
    assert body_of(db, 1).startswith("Kestrel | Harrier\n")
    before, two = last_change(db), body_of(db, 1)
    with writing(db) as database:  # shown, though not its title: read, not rewritten
        page = linking(f"{HOST}/u", [Link(file_url(1), "Harrier")])
        write_page(database.connection, database.engine, page, "indexer")
    assert body_of(db, 1) == two
    assert logged(db, before) == ({f"{HOST}/u"} if "postgresql:" not in db else set())
