"""``geminibot export`` end to end: two small capsules written for the purpose and
capsules/feeds.test (a feed of each format) are crawled on loopback (into an SQLite file
and into a PostgreSQL database of a real cluster), the export is read back by pyarrow,
and each file's rows and columns are held to the store's and to the README's; nothing of
a page's text (nor a feed's titles) leaves without --text, nor ever from a host whose
robots2.txt says ``store: no``."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import trio
import trio.testing
from commands import crawl_in_trio, run_main
from postgres_cluster import new_database

from capsule_server.testing import running_server
from geminibot.store.database import open_database
from geminibot.urls import host_key

#: The capsules of capsules/, one of which (feeds.test) the crawl reaches.
SHARED_CAPSULES = Path(__file__).resolve().parents[2] / "capsules"
FEEDS_HOST = "feeds.test"
#: A feed's title and an entry's title of feeds.test (exported only with --text).
FEED_TITLE = "Feed test Atom"
ENTRY_TITLE = "A second post"
TIMEOUT = 120.0
#: A word of a page of nostore.test, whose robots2.txt forbids keeping anything.
SECRET = "zanzibarquill"
#: A word of a page of export.test, whose text may be kept (exported only with --text).
KEPT = "lighthousekeeper"

CAPSULES: dict[str, dict[str, str]] = {
    "export.test": {
        "robots.txt": "User-agent: *\nDisallow: /private/\n",
        "index.gmi": (
            "# Export test\n"
            "=> /about.gmi About\n=> /fr.gmi En français\n=> /latin1.gmi Latin-1\n"
            "=> /private/a.gmi Private\n=> /loop/loop/loop/loop/a.gmi A loop\n"
            "=> /moved Moved for good\n=> /temp Moved for now\n=> /missing.gmi Missing\n"
            "=> gemini://nostore.test/ Elsewhere\n=> gemini://nostore.test/page.gmi A page\n"
            "=> mailto:someone@example.org Mail\n=> gemini://feeds.test/ Feeds\n"
        ),
        "about.gmi": f"# About\nA {KEPT} keeps the light.\n=> gemini://nostore.test/ There\n",
        "fr.gmi": "# Le phare\nUn gardien de phare.\n",
        "latin1.gmi": "# Caf\xe9\nUne page en Latin-1.\n",
        "private/a.gmi": "# Private\n",
        "serve.toml": (
            '[[special]]\npath = "/moved"\nstatus = 31\nmeta = "/about.gmi"\n\n'
            '[[special]]\npath = "/temp"\nstatus = 30\nmeta = "/fr.gmi"\n\n'
            '[mime]\n"/fr.gmi" = "text/gemini; lang=fr"\n'
            '"/latin1.gmi" = "text/gemini; charset=iso-8859-1"\n'
        ),
    },
    "nostore.test": {
        "robots2.txt": "# robots2.txt v0.2.1\nstore: no\n",
        "index.gmi": f"# No store\nThe word {SECRET} must not leave.\n=> /page.gmi Page\n"
        "=> gemini://export.test/ Back\n",
        "page.gmi": f"# Page\n{SECRET} again.\n",
    },
}
#: Every file an export without --text writes, beside the README.
FILES = {
    "index.parquet",
    "hosts.parquet",
    "tls.parquet",
    "pins.parquet",
    "policy_files.parquet",
    "redirects.parquet",
    "host_links.parquet",
    "exclusions.parquet",
    "feeds.parquet",
    "feed_entries.parquet",
}


def write_capsules(root: Path) -> None:
    for host, files in CAPSULES.items():
        for name, text in files.items():
            path = root / host / name
            path.parent.mkdir(parents=True, exist_ok=True)
            encoding = "latin-1" if name == "latin1.gmi" else "utf-8"
            path.write_bytes(text.encode(encoding))
    (root / FEEDS_HOST).symlink_to(SHARED_CAPSULES / FEEDS_HOST, target_is_directory=True)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def crawled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """export.test, nostore.test and feeds.test crawled as an indexer: what ``--db``
    says."""
    tmp = tmp_path_factory.mktemp("export")
    write_capsules(tmp / "capsules")
    db = str(tmp / "crawl.db")
    if request.param == "postgresql":
        db = new_database(request.getfixturevalue("pg_cluster"))

    async def main() -> None:
        async with running_server(tmp / "capsules", tmp / "certs", clock=trio.current_time) as s:
            argv = ["gemini://export.test/", "--db", db, "--test-range", "--json"]
            argv += ["--connect-to", f"*.test:1965:127.0.0.1:{s.port}"]
            argv += ["--allow-host", "nostore.test", "--allow-host", FEEDS_HOST]
            with trio.fail_after(TIMEOUT):
                proc = await crawl_in_trio(argv)
            assert proc.returncode == 0, proc.stderr

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.005))
    return db


@pytest.fixture(scope="module")
def exported(crawled: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The export of the crawl with --text, and its --json summary."""
    out = tmp_path_factory.mktemp("out") / "export"
    proc = run_main(["export", "--db", crawled, "--out", str(out), "--text", "--json"])
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout)


def tables(out: Path) -> dict[str, pa.Table]:
    return {p.name: pq.read_table(p) for p in sorted(out.glob("*.parquet"))}


def one(db: str, query: str) -> int:
    with open_database(db) as database:
        return int(database.execute(query).fetchone()[0])


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    return list(table.to_pylist())


def test_row_counts_equal_the_stores(crawled: str, exported: tuple[Path, dict[str, Any]]) -> None:
    out, summary = exported
    got = {name: t.num_rows for name, t in tables(out).items()}
    assert set(got) == FILES | {"page_text.parquet"}
    store = {
        "index.parquet": one(crawled, "SELECT count(*) FROM pages"),
        "hosts.parquet": one(crawled, "SELECT count(*) FROM hosts"),
        "pins.parquet": one(crawled, "SELECT count(*) FROM pins"),
        "tls.parquet": one(crawled, "SELECT count(*) FROM tls_history"),
        "policy_files.parquet": one(crawled, "SELECT count(*) FROM robots"),
        "redirects.parquet": one(
            crawled, "SELECT count(*) FROM pages WHERE status IN (31, 301, 308)"
        ),
        "exclusions.parquet": one(
            crawled, "SELECT count(*) FROM urls WHERE state IN ('refused', 'trapped')"
        ),
        "page_text.parquet": one(crawled, "SELECT count(*) FROM pages WHERE text_indexed"),
        "host_links.parquet": len(host_pairs(crawled)),
        "feeds.parquet": one(crawled, "SELECT count(*) FROM feeds"),
        "feed_entries.parquet": one(crawled, "SELECT count(*) FROM feed_entries"),
    }
    assert got == store
    assert got["index.parquet"] >= 9 and got["hosts.parquet"] == 3
    assert got["feeds.parquet"] == 4 and got["feed_entries.parquet"] == 8
    assert got["redirects.parquet"] == 1 and got["exclusions.parquet"] == 2
    assert got["tls.parquet"] >= 2  # each host's connections seen
    assert summary["rows"] == sum(got.values())
    assert {f["file"]: f["rows"] for f in summary["files"]} == got


def host_pairs(db: str) -> set[tuple[str, str]]:
    """The (source host, target host) pairs of the store's links between two hosts."""
    with open_database(db) as database:
        rows = database.execute(
            "SELECT p.host, l.target FROM links l JOIN pages p ON p.id = l.page_id"
        ).fetchall()
    pairs = set()
    for source, target in rows:
        if target.startswith("gemini://") and host_key(target) != source:
            pairs.add((source, host_key(target)))
    return pairs


def readme_columns(out: Path) -> dict[str, list[tuple[str, str]]]:
    """Each file the README describes, and its columns (name, type) as it lists them."""
    described: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in (out / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = described.setdefault(line[3:], [])
        elif current is not None and line.startswith("| ") and not line.startswith("| column"):
            name, kind = (cell.strip() for cell in line.strip("|").split("|")[:2])
            current.append((name, kind))
    return described


def test_columns_are_as_the_readme_says(exported: tuple[Path, dict[str, Any]]) -> None:
    out, _ = exported
    described = readme_columns(out)
    files = tables(out)
    assert set(described) == set(files)
    for name, table in files.items():
        assert described[name] == [(f.name, str(f.type)) for f in table.schema], name
        rows = re.search(rf"## {re.escape(name)}\n.*?Rows:\s+([\d,]+)\.", _readme(out), re.S)
        assert rows is not None and int(rows[1].replace(",", "")) == table.num_rows


def _readme(out: Path) -> str:
    return (out / "README.md").read_text(encoding="utf-8")


def test_the_index_in_common_crawls_columns(exported: tuple[Path, dict[str, Any]]) -> None:
    out, _ = exported
    index = {r["url"]: r for r in rows_of(pq.read_table(out / "index.parquet"))}
    about = index["gemini://export.test/about.gmi"]
    assert about["url_surtkey"] == "test,export)/about.gmi"
    assert (about["url_host_name"], about["url_host_tld"]) == ("export.test", "test")
    assert (about["url_host_2nd_last_part"], about["url_host_3rd_last_part"]) == ("export", None)
    assert about["url_host_name_reversed"] == "test.export"
    assert (about["url_protocol"], about["url_port"], about["url_path"]) == (
        "gemini",
        None,
        "/about.gmi",
    )
    assert (about["fetch_status"], about["subset"], about["content_mime_type"]) == (
        20,
        "warc",
        "text/gemini",
    )
    assert about["content_charset"] == "utf-8" and about["content_searchable"] is True
    assert re.fullmatch(r"[0-9a-f]{64}", about["content_digest"])
    assert about["fetch_time"].tzinfo is not None and about["url_host_key"] == "export.test"
    assert index["gemini://export.test/fr.gmi"]["content_languages"] == "fr"
    assert index["gemini://export.test/latin1.gmi"]["content_charset"] == "iso-8859-1"
    moved = index["gemini://export.test/moved"]
    assert (moved["fetch_status"], moved["fetch_redirect"], moved["subset"]) == (
        31,
        "gemini://export.test/about.gmi",
        "crawldiagnostics",
    )
    assert index["gemini://export.test/missing.gmi"]["fetch_status"] == 51
    assert index["gemini://nostore.test/"]["content_searchable"] is False


def test_redirects_links_exclusions_policy_files(exported: tuple[Path, dict[str, Any]]) -> None:
    out, _ = exported
    (redirect,) = rows_of(pq.read_table(out / "redirects.parquet"))
    assert (redirect["url"], redirect["fetch_redirect"], redirect["fetch_status"]) == (
        "gemini://export.test/moved",
        "gemini://export.test/about.gmi",
        31,
    )
    links = {
        (r["source_host_key"], r["target_host_key"]): (r["links"], r["pages"])
        for r in rows_of(pq.read_table(out / "host_links.parquet"))
    }
    # index.gmi links to two of its URLs, about.gmi to one (mailto: is not a host)
    assert links == {
        ("export.test", "nostore.test"): (3, 2),
        ("export.test", "feeds.test"): (1, 1),
        ("nostore.test", "export.test"): (1, 1),
    }
    excluded = {r["url"]: r for r in rows_of(pq.read_table(out / "exclusions.parquet"))}
    private = excluded["gemini://export.test/private/a.gmi"]
    assert private["state"] == "refused" and "robots.txt" in private["reason"]
    assert private["linked_from"] == "gemini://export.test/"
    loop = excluded["gemini://export.test/loop/loop/loop/loop/a.gmi"]
    assert loop["state"] == "trapped" and "repeated" in loop["reason"]
    files = {
        (r["url_host_key"], r["file"]): r
        for r in rows_of(pq.read_table(out / "policy_files.parquet"))
    }
    robots = files[("export.test", "robots.txt")]
    assert robots["outcome"] == "success" and robots["fetch_status"] == 20
    assert robots["content"] == CAPSULES["export.test"]["robots.txt"].encode()
    assert robots["content_length"] == len(robots["content"])
    assert files[("nostore.test", "robots2.txt")]["content"].startswith(b"# robots2.txt")
    hosts = {r["url_host_key"]: r for r in rows_of(pq.read_table(out / "hosts.parquet"))}
    assert hosts["export.test"]["pages"] >= 7 and hosts["export.test"]["url_protocol"] == "gemini"
    tls = {r["url_host_key"]: r for r in rows_of(pq.read_table(out / "tls.parquet"))}
    for host in ("export.test", "nostore.test"):
        seen = tls[host]
        assert seen["tls_version"] in ("TLSv1.2", "TLSv1.3") and seen["certificate_parsed"]
        assert host in seen["certificate_sans"] and seen["certificate_name_matches"]
        assert re.fullmatch(r"([0-9A-F]{2}:){31}[0-9A-F]{2}", seen["certificate_sha256"])
        last = hosts[host]
        assert (last["tls_version"], last["certificate_sha256"], last["certificate_trust"]) == (
            seen["tls_version"],
            seen["certificate_sha256"],
            seen["certificate_trust"],
        )


def test_feeds_and_their_entries(exported: tuple[Path, dict[str, Any]]) -> None:
    out, _ = exported
    home = f"gemini://{FEEDS_HOST}/"
    feeds = {r["url"]: r for r in rows_of(pq.read_table(out / "feeds.parquet"))}
    assert {
        url: (r["format"], r["title"], r["author"], r["entries"]) for url, r in feeds.items()
    } == {
        f"{home}log/index.gmi": ("gemsub", "Feed test gemlog", None, 3),
        f"{home}atom.xml": ("atom", FEED_TITLE, "Ada Atom", 2),
        f"{home}rss.xml": ("rss", "Feed test RSS", None, 1),
        f"{home}twtxt.txt": ("twtxt", "feedtester", "feedtester", 2),
    }
    atom = feeds[f"{home}atom.xml"]
    assert atom["url_host_key"] == FEEDS_HOST
    assert atom["last_entry_time"].isoformat() == "2024-05-06T09:30:00+00:00"
    assert atom["first_seen_time"] <= atom["last_fetch_time"]
    entries = rows_of(pq.read_table(out / "feed_entries.parquet"))
    for url, feed in feeds.items():
        listed = [e for e in entries if e["feed_url"] == url]
        assert len(listed) == feed["entries"], url
        assert max(e["published_time"] for e in listed) == feed["last_entry_time"]
    assert all(e["removed_time"] is None and e["feed_host_key"] == FEEDS_HOST for e in entries)
    gemlog = {e["url"]: e for e in entries if e["feed_url"] == f"{home}log/index.gmi"}
    second = gemlog[f"{home}log/second.gmi"]
    assert second["title"] == ENTRY_TITLE
    assert second["published_time"].isoformat() == "2024-05-03T12:00:00+00:00"
    assert gemlog[f"{home}log/untitled.gmi"]["title"] == ""


def strings(table: pa.Table) -> list[str]:
    """Every text and byte value of a table."""
    found = []
    for column, field in zip(table.columns, table.schema, strict=True):
        if field.type in (pa.string(), pa.binary()):
            for value in column.to_pylist():
                if value is not None:
                    found.append(value if isinstance(value, str) else value.decode("latin-1"))
    return found


def test_text_only_when_asked_and_never_when_forbidden(
    crawled: str, exported: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, _ = exported
    text = rows_of(pq.read_table(out / "page_text.parquet"))
    assert {r["url_host_key"] for r in text} == {"export.test", FEEDS_HOST}
    assert any(KEPT in r["body"] for r in text)
    everything = [s for t in tables(out).values() for s in strings(t)]
    assert not any(SECRET in s for s in everything)
    plain = tmp_path / "plain"
    proc = run_main(["export", "--db", crawled, "--out", str(plain)])
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in plain.iterdir()} == FILES | {"README.md"}
    everything = [s for t in tables(plain).values() for s in strings(t)]
    assert not any(KEPT in s or SECRET in s for s in everything)
    assert not any(FEED_TITLE in s or ENTRY_TITLE in s for s in everything)
    assert pq.read_table(plain / "feeds.parquet").column("title").null_count == 4
    assert "## page_text.parquet" not in _readme(plain)
    assert "exported" in proc.stdout and str(plain) in proc.stdout


def test_text_left_out_where_the_policy_now_forbids_it(crawled: str, tmp_path: Path) -> None:
    """A host whose robots2.txt says ``store: no`` since its pages were kept: their text
    is not exported either, nor its feeds' titles (the policy as the crawl last fetched
    it is asked)."""
    if not Path(crawled).is_file():
        pytest.skip("one engine is enough: the check reads the policy through Database")
    db = tmp_path / "copy.db"
    shutil.copyfile(crawled, db)
    with sqlite3.connect(db) as conn:
        changed = conn.execute(
            "UPDATE robots SET outcome = 'success', status = 20, body = ?"
            " WHERE host IN ('export.test', 'feeds.test') AND name = 'robots2.txt'",
            (b"store: session-only\n",),
        )
        assert changed.rowcount == 2
    out = tmp_path / "o"
    proc = run_main(["export", "--db", str(db), "--out", str(out), "--text"])
    assert proc.returncode == 0, proc.stderr
    assert pq.read_table(out / "page_text.parquet").num_rows == 0
    feeds, entries = (
        pq.read_table(out / "feeds.parquet"),
        pq.read_table(out / "feed_entries.parquet"),
    )
    assert feeds.num_rows == 4 and entries.num_rows == 8
    for table, texts in ((feeds, ("title", "author")), (entries, ("title",))):
        for name in texts:
            assert table.column(name).null_count == table.num_rows, name


def test_refusals_are_one_line_and_exit_2(crawled: str, tmp_path: Path) -> None:
    if not Path(crawled).is_file():
        pytest.skip("the checks of --out come before the engine matters")
    missing = run_main(["export", "--db", str(tmp_path / "none.db"), "--out", str(tmp_path / "o")])
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no such database" in missing.stderr and not (tmp_path / "o").exists()
    (tmp_path / "file").write_text("x")
    a_file = run_main(["export", "--db", crawled, "--out", str(tmp_path / "file")])
    assert a_file.returncode == 2 and "not a folder" in a_file.stderr
    full = tmp_path / "full"
    full.mkdir()
    (full / "page_text.parquet").write_text("stale")
    (full / "mine.txt").write_text("kept")
    refused = run_main(["export", "--db", crawled, "--out", str(full)])
    assert refused.returncode == 2 and "not empty" in refused.stderr
    assert refused.stderr.count("\n") == 1
    forced = run_main(["export", "--db", crawled, "--out", str(full), "--force"])
    assert forced.returncode == 0, forced.stderr
    assert {p.name for p in full.iterdir()} == FILES | {"README.md", "mine.txt"}


def test_an_empty_crawl_exports_nothing(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    open_database(str(db), write=True).close()
    proc = run_main(["export", "--db", str(db), "--out", str(tmp_path / "o")])
    assert proc.returncode == 1 and "nothing to export" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_small_batches_give_the_same_files(
    crawled: str,
    exported: tuple[Path, dict[str, Any]],
    tmp_path: Path,
) -> None:
    """Rows read two at a time (a host's links split across batches, the index across
    many) make the same files as one batch; each batch is heard of as progress."""
    from geminibot.export.writer import export

    heard: list[str] = []
    with open_database(crawled) as database:
        written = export(database, tmp_path, text=True, progress=heard.append, batch=2)
    assert {w.file: w.rows for w in written} == {
        name: t.num_rows for name, t in tables(exported[0]).items()
    }
    for name, table in tables(exported[0]).items():
        assert pq.read_table(tmp_path / name).equals(table), name
    assert "index.parquet: 2 rows" in heard and "index.parquet: 4 rows" in heard
