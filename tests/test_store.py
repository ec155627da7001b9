"""The archive and the history on an in-memory index: the store's rules alone,
without fetching or parsing."""

from __future__ import annotations

import shutil

import pytest
import sqlite_utils

from gputalks.index import history
from gputalks.index.changes import recent_changes
from gputalks.index.history import apply_talks
from gputalks.index.pipeline import Progress
from gputalks.index.merge import merge_talk
from gputalks.index.link import TalkCluster
from gputalks.index.runs import start_run
from gputalks.index.facet_keys import FacetCoder, facet_key, index_facet_keys, write_facet_keys
from gputalks.index.schema import ARCHIVE_TABLES, INDEX_TABLES, bulk_load, ensure_schema
from gputalks.index.raw_documents import SqliteArchive, archive, load_documents
from gputalks.index.store import IndexFiles, open_archive, open_db
from gputalks.scraper.records import LinkRef, RawDocument, SpeakerRef, TalkItem


def document(body: bytes, url: str = "https://api.github.com/repos/gpu-mode/lectures/readme") -> RawDocument:
    return RawDocument(source="github", method="GET", url=url, status=200, content_type="text/markdown",
                       fetched_at="2026-12-02T06:00:00Z", body=body, etag='"v"')


@pytest.fixture
def db():
    database = open_db(":memory:")
    yield database
    database.close()


def test_schema_is_applied_idempotently(db):
    ensure_schema(db)
    ensure_schema(db)
    assert set(INDEX_TABLES) <= set(db.table_names())
    assert not {"raw_documents", "source_runs"} & set(db.table_names())  # they live in the archive
    assert db.table("talks").detect_fts() == "talks_fts"


def test_the_index_of_gone_talks_is_never_the_plan_for_live_ones(db):
    """The search leaves gone talks out by their rowids, through a partial index of them; a full
    index of gone_since was SQLite's pick for a series' live talks (`gone_since is null`), which
    then read all 100,000 talks of a 100k index for a series page."""
    ensure_schema(db)
    db["talks"].insert_all({"id": f"talk-{n}", "title": f"Talk {n}", "series": ("GTC", "GPU MODE", "Conference")[n % 3],
                            "newest_first": f"{n:05}"} for n in range(300))
    db.execute("drop index idx_talks_gone")
    db.execute("analyze talks")  # as a build does; the index then comes back without statistics,
    ensure_schema(db)            # as it does when an index from before it is opened

    def plan(sql: str) -> str:
        return " ".join(row[-1] for row in db.execute("explain query plan " + sql).fetchall())

    assert "idx_talks_gone" in plan("select rowid from talks where gone_since is not null")
    series = plan("select id from talks where series = 'GTC' and gone_since is null order by newest_first, id limit 50")
    assert "idx_talks_series_newest_first_id" in series and "gone" not in series


@pytest.fixture
def ledger():
    database = sqlite_utils.Database(memory=True)
    ensure_schema(database, ARCHIVE_TABLES)
    yield database
    database.close()


def test_a_version_is_archived_once_compressed_and_read_back_in_order(ledger):
    db = ledger
    first, same, changed = document(b"# v1"), document(b"# v1"), document(b"# v2")
    ids = archive(db, [first, same, changed])
    assert ids[0] == ids[1] != ids[2]
    assert db.table("raw_documents").count == 2
    stored = db.execute("select encoding, size, length(body) from raw_documents where id = ?", [ids[0]]).fetchone()
    assert stored[0] == "zlib" and stored[1] == 4
    loaded = load_documents(db, [ids[2], ids[0]])
    assert [d.body for d in loaded] == [b"# v2", b"# v1"]
    assert loaded[0].etag == '"v"' and loaded[0].source == "github"


def test_the_fetchers_view_is_the_newest_good_version(tmp_path):
    files = IndexFiles.of(tmp_path / "talks.db")
    db, news = open_archive(files)
    assert news == "first run: creating talks.db and its archive talks.archive.db"
    with db.atomic():
        archive(db, [document(b"# v1"), document(b"# v2"),
                     document(b"other", url="https://api.github.com/x")])
    db.close()
    view = SqliteArchive(files.archive)
    assert view.last_version("github", "GET", document(b"").url, None).body == b"# v2"
    assert view.last_version("github", "GET", "https://api.github.com/nothing", None) is None


def talk(title: str, duration: int | None = 3000) -> TalkItem:
    return TalkItem(source="github", key="lecture-012", title=title, url="https://github.com/gpu-mode/lectures#l12",
                    url_kind="readme", number=12, duration_s=duration, speakers=[SpeakerRef("Thomas Viehmann")],
                    links=[LinkRef("slides", "https://example.org/slides.pdf", "Slides")])


def apply(db, *items: TalkItem) -> dict:
    clusters = []
    for item in items:
        cluster = TalkCluster(f"gpumode-{item.key}")
        cluster.add(item, "source", 100.0)
        clusters.append(cluster)
    run_id = start_run(db, "test")
    with db.atomic():
        stats = apply_talks(db, run_id, f"2026-12-0{run_id}", [merge_talk(c) for c in clusters])
    return stats.__dict__


def test_history_writes_only_differences_and_never_deletes_a_talk(db):
    assert apply(db, talk("Flash Attention")) == {"talks_written": 1, "changes": 1, "new": 1, "gone": 0,
                                                  "transcripts_changed": False, "kept_values": 0}
    assert apply(db, talk("Flash Attention")) == {"talks_written": 0, "changes": 0, "new": 0, "gone": 0,
                                                  "transcripts_changed": False, "kept_values": 0}
    assert apply(db, talk("Flash Attention 2", 3100))["changes"] == 2  # title, duration (bucket stays 30-60 min)
    changes = [(c["field"], c["old_value"], c["new_value"]) for c in recent_changes(db)]
    assert ("title", "Flash Attention", "Flash Attention 2") in changes
    assert ("duration_s", "3000", "3100") in changes

    assert apply(db)["gone"] == 1  # no source lists it: marked, not deleted
    row = db.table("talks").get("gpumode-lecture-012")
    assert row["gone_since"] == "2026-12-04" and row["title"] == "Flash Attention 2"
    assert db.table("links").count == 2 and db.table("talk_speakers").count == 1  # what hangs off it stays

    apply(db, talk("Flash Attention 2", 3100))
    assert db.table("talks").get("gpumode-lecture-012")["gone_since"] is None
    assert [c["field"] for c in recent_changes(db)][-1] == "_back"


def test_talks_are_written_a_chunk_at_a_time_with_the_same_history(db, monkeypatch):
    """Chunks of 2 (a build's are 2,000): a talk in a later chunk than the one holding its
    item before moves that item; a talk no chunk holds is marked gone; the rest is unchanged."""
    monkeypatch.setattr(history, "CHUNK", 2)

    def lecture(n: int, title: str) -> TalkItem:
        return TalkItem(source="github", key=f"lecture-{n:03d}", title=title, number=n,
                        speakers=[SpeakerRef(f"Speaker {n}")], links=[LinkRef("slides", f"https://example.org/{n}.pdf")])

    def build(*clusters: tuple[str, list[TalkItem]]) -> dict:
        merged = []
        for talk_id, items in clusters:
            cluster = TalkCluster(talk_id)
            for item in items:
                cluster.add(item, "source", 100.0)
            merged.append(merge_talk(cluster))
        run_id = start_run(db, "test")
        with db.atomic():
            stats = apply_talks(db, run_id, f"2026-12-0{run_id}", iter(merged))
        return {"new": stats.new, "gone": stats.gone, "changes": stats.changes}

    five = [(f"gpumode-lecture-{n:03d}", [lecture(n, f"Lecture {n}")]) for n in range(1, 6)]
    assert build(*five) == {"new": 5, "gone": 0, "changes": 5}
    assert db.table("talk_speakers").count == 5 and db.table("talk_sources").count == 5
    # lecture 1's item now belongs to talk 5 (a later chunk); talk 4 is no longer produced
    again = [five[1], five[2], ("gpumode-lecture-005", [lecture(5, "Lecture 5"), lecture(1, "Lecture 1")])]
    assert build(*again) == {"new": 0, "gone": 2, "changes": 2}  # talks 1 and 4 gone
    sources = dict(db.execute("select item_key, talk_id from talk_sources").fetchall())
    assert sources["lecture-001"] == "gpumode-lecture-005" and len(sources) == 5
    gone = {r[0] for r in db.execute("select id from talks where gone_since is not null")}
    assert gone == {"gpumode-lecture-001", "gpumode-lecture-004"}
    assert db.table("links").count == 6  # gone talks keep theirs; talk 5 gains the slides of lecture 1


def test_a_legacy_single_file_index_gives_its_documents_to_the_archive(fresh_db_path):
    """An index from before the archive had its own file: raw documents (uncompressed) and
    source runs inside talks.db. The next refresh moves them out and nothing is lost."""
    import hashlib
    import zlib

    from gputalks.project.settings import default_settings
    from gputalks.index.pipeline import RefreshOptions, refresh

    from tests.conftest import SNAPSHOT

    files = IndexFiles.of(fresh_db_path)
    archive_db = sqlite_utils.Database(files.archive)
    documents = [{**row, "body": zlib.decompress(row["body"]), "encoding": None}
                 for row in archive_db.query("select * from raw_documents")]
    source_runs = list(archive_db.query("select * from source_runs"))
    archive_db.close()
    files.archive.unlink()
    legacy = sqlite_utils.Database(fresh_db_path)
    legacy.table("raw_documents").insert_all(documents, pk="id")
    legacy.table("source_runs").insert_all(source_runs, pk="id")
    talks = legacy.execute("select count(*) from talks").fetchone()[0]
    legacy.close()

    notices = []
    report = refresh(fresh_db_path, default_settings(), RefreshOptions(snapshot=SNAPSHOT),
                     Progress(notice=notices.append))
    assert notices == ["moved the raw documents and runs of talks.db into talks.archive.db"]
    assert report.exit_code == 0 and report.stats.changes == 0
    index, moved = sqlite_utils.Database(fresh_db_path), sqlite_utils.Database(files.archive)
    assert not {"raw_documents", "source_runs"} & set(index.table_names())
    assert index.execute("select count(*) from talks where gone_since is null").fetchone()[0] == talks
    assert moved.table("raw_documents").count == len(documents)
    first = documents[0]
    stored = load_documents(moved, [first["id"]])[0]
    assert hashlib.sha256(stored.body).hexdigest() == first["sha256"]
    assert moved.table("source_runs").count == len(source_runs)  # every source answered as before
    assert [r["id"] for r in moved.query("select id from refresh_runs")] == [1, report.run_id]


def facet_keys_of(db, talk_id: str) -> list[tuple]:
    """A talk's facet keys, read back as (facet, value) pairs."""
    keys = db.execute("select k.keys from talk_facet_keys k join talks t on t.rowid = k.rowid where t.id = ?",
                      [talk_id]).fetchone()
    meanings = {key: (facet, value) for key, facet, value in db.execute("select key, facet, value from talk_facet_values")}
    return sorted((meanings[key] for key in (keys[0] or "")), key=repr) if keys else []


def items_of(db, talk_id: str) -> list[tuple]:
    """A talk's talk_items rows, read back as (facet, value, newest_first) triples."""
    return sorted(db.execute("select v.facet, v.value, i.newest_first from talk_items i join talk_facet_values v "
                             "on v.code = i.code join talks t on t.rowid = i.talk where t.id = ?", [talk_id]).fetchall())


def test_facet_keys_follow_the_talks_through_inserts_updates_deletes_and_a_bulk_load(db):
    """Each talk's facet keys (one character per facet value: a number stays a number) are
    written with it, rewritten when it changes, dropped with it, and rebuilt after a bulk load,
    which drops the triggers while it writes."""
    ensure_schema(db)
    row = {"id": "t1", "title": "Flash", "series": "GTC", "event": None, "year": 2024, "duration_bucket": "1-2 h",
           "topics": '["Attention", "Triton"]', "speakers": "[\"Tri O'Dao\"]", "sources": '["gtc"]',
           "newest_first": "2024 t1"}
    db.table("talks").insert(row)
    assert facet_keys_of(db, "t1") == sorted([("series", "GTC"), ("year", 2024), ("duration_bucket", "1-2 h"),
                                              ("topics", "Attention"), ("topics", "Triton"),
                                              ("speakers", "Tri O'Dao"), ("sources", "gtc")], key=repr)
    assert items_of(db, "t1") == [("sources", "gtc", "2024 t1"), ("speakers", "Tri O'Dao", "2024 t1"),
                                  ("topics", "Attention", "2024 t1"), ("topics", "Triton", "2024 t1")]
    db.table("talks").update("t1", {"series": None, "event": "GTC 2024", "topics": "not json",
                                    "newest_first": "2024-03-18 t1"})
    assert facet_keys_of(db, "t1") == sorted([("event", "GTC 2024"), ("year", 2024), ("duration_bucket", "1-2 h"),
                                              ("speakers", "Tri O'Dao"), ("sources", "gtc")], key=repr)
    assert items_of(db, "t1") == [("sources", "gtc", "2024-03-18 t1"), ("speakers", "Tri O'Dao", "2024-03-18 t1")]
    db.table("talks").delete("t1")
    assert db.table("talk_facet_keys").count == 0 and db.table("talk_items").count == 0
    with bulk_load(db, "talks"):
        db.table("talks").insert_all([{**row, "id": f"t{n}", "newest_first": f"2024 t{n}"} for n in range(3)])
        assert db.table("talk_facet_keys").count == 0
    assert db.table("talk_facet_keys").count == 3 and ("series", "GTC") in facet_keys_of(db, "t2")
    assert db.table("talk_items").count == 12 and ("topics", "Triton", "2024 t2") in items_of(db, "t2")
    db.table("talks").update("t2", {"series": "GPU MODE", "topics": '["Triton"]'})  # the triggers are back
    assert ("series", "GPU MODE") in facet_keys_of(db, "t2") and ("series", "GTC") not in facet_keys_of(db, "t2")
    assert [i for i in items_of(db, "t2") if i[0] == "topics"] == [("topics", "Triton", "2024 t2")]


def test_a_build_writes_the_facet_keys_sql_would_compute(snapshot_db_path, tmp_path):
    """The index built from the snapshot holds, for every talk, the facet keys it coded as the
    talks were made: read back, the (facet, value) pairs SQL computes from the rows."""
    def read_back(db) -> dict[int, list[tuple]]:
        meanings = {key: (facet, value) for key, facet, value in db.execute("select key, facet, value from talk_facet_values")}
        return {rowid: sorted((meanings[key] for key in keys), key=repr)
                for rowid, keys in db.execute("select rowid, keys from talk_facet_keys")}
    built = read_back(sqlite_utils.Database(snapshot_db_path))
    copy = tmp_path / "talks.db"
    shutil.copy(snapshot_db_path, copy)
    computed = sqlite_utils.Database(copy)
    with computed.conn:
        index_facet_keys(computed)
    assert built == read_back(computed)
    assert len(built) == computed.table("talks").count > 100
    assert sum(("series", "GPU MODE") in pairs for pairs in built.values()) > 50


def test_facet_keys_written_with_a_bulk_load_are_kept_and_the_triggers_come_back(db):
    """Keys coded as rows are made (`FacetCoder`, codes in the order rows have them) are kept
    by the bulk load; a load without them has them computed in SQL (series codes first)."""
    ensure_schema(db)
    rows = [{"id": "t1", "title": "A", "year": 2024, "topics": '["CUDA"]', "sources": '["gtc"]'},
            {"id": "t2", "title": "B", "series": "GTC", "year": 2024, "topics": '["CUDA", "Triton"]'}]
    coder = FacetCoder()
    coded = [coder.code(row) for row in rows]
    assert coded[0] == (facet_key(1) + facet_key(2) + facet_key(3),
                        ((1, "year", 2024), (2, "topics", "CUDA"), (3, "sources", "gtc")))
    assert coded[1] == (facet_key(4) + facet_key(1) + facet_key(2) + facet_key(5),
                        ((4, "series", "GTC"), (5, "topics", "Triton")))
    with bulk_load(db, "talks"):
        db.table("talks").insert_all(rows)
        write_facet_keys(db, [(keys, row["id"]) for (keys, _), row in zip(coded, rows)],
                         [value for _, new in coded for value in new])
    assert db.execute("select code from talk_facet_values where facet = 'year'").fetchone()[0] == 1
    assert facet_keys_of(db, "t2") == sorted([("series", "GTC"), ("year", 2024), ("topics", "CUDA"),
                                              ("topics", "Triton")], key=repr)
    db.table("talks").update("t1", {"series": "GPU MODE"})  # the triggers are back
    assert ("series", "GPU MODE") in facet_keys_of(db, "t1")
    db.table("talks").delete_where()
    with bulk_load(db, "talks"):
        db.table("talks").insert_all(rows)  # no keys written: computed once loaded
    assert db.execute("select code from talk_facet_values where facet = 'series'").fetchone()[0] == 1
    assert facet_keys_of(db, "t1") == sorted([("year", 2024), ("topics", "CUDA"), ("sources", "gtc")], key=repr)


def test_facet_keys_are_single_characters_past_the_surrogates(db):
    """A value's key is one character for any code: code 55040 and on skip the surrogates."""
    ensure_schema(db)
    db.execute("insert into talk_facet_values (code, facet, value) values (1, 'series', 'a'), "
               "(55039, 'series', 'b'), (55040, 'series', 'c'), (1000000, 'series', 'd')")
    keys = [key for key, in db.execute("select key from talk_facet_values order by code")]
    assert [ord(key) for key in keys] == [257, 55295, 57344, 1002304]
    assert keys == [facet_key(code) for code in (1, 55039, 55040, 1000000)]  # Python's rule is SQL's
    assert "".join(keys).encode("utf-8").decode("utf-8") == "".join(keys)


def test_a_fresh_build_writes_the_rows_comparing_would(db, tmp_path):
    """A first build writes without reading back (and builds indexes at the end); an index
    that already holds a talk compares. Both give the same rows, and the same indexes."""
    def items(n: int) -> list[TalkItem]:
        return [TalkItem(source="github", key=f"lecture-{n:03d}", title=f"Lecture {n}", number=n, duration_s=60 * n,
                         url=f"https://github.com/gpu-mode/lectures#l{n}", url_kind="readme",
                         speakers=[SpeakerRef(f"Speaker {n % 3}"), SpeakerRef("Mark Saroufim")],
                         links=[LinkRef("slides", f"https://example.org/{n}.pdf", "Slides")] * 2)]

    fresh, compared = db, open_db(str(tmp_path / "compared.db"))
    apply(compared, talk("Someone else's talk"))  # not fresh any more
    for target in (fresh, compared):
        clusters = []
        for n in range(1, 8):
            cluster = TalkCluster(f"gpumode-lecture-{n:03d}")
            for item in items(n):
                cluster.add(item, "source", 100.0)
            clusters.append(merge_talk(cluster))
        run_id = start_run(target, "test")
        with target.atomic():
            apply_talks(target, run_id, "2026-12-05", clusters)

    def rows(database, table):
        return sorted(tuple(r) for r in database.execute(f"select * from [{table}] where {where(table)}").fetchall())

    def where(table):
        return "id like 'gpumode-lecture-00%'" if table == "talks" else \
            "1" if table == "speakers" else "talk_id like 'gpumode-lecture-00%'"

    for table in ("talks", "talk_speakers", "links", "talk_sources", "speakers"):
        theirs = [r for r in rows(compared, table) if r[0] != "thomas-viehmann"]  # the earlier talk's speaker
        assert rows(fresh, table) == theirs, table
    assert len(rows(fresh, "links")) == 7 * 2 and len(rows(fresh, "talk_speakers")) == 14
    indexes = "select name from sqlite_master where type in ('index', 'trigger') order by name"
    assert fresh.execute(indexes).fetchall() == compared.execute(indexes).fetchall()
    assert fresh.execute("select count(*) from talks_fts where talks_fts match 'lecture'").fetchone()[0] == 7
    compared.close()


def test_rows_without_some_column_are_written_with_none_there(db):
    """write_rows reads the first row's columns from every row; a row that lacks one
    (a speaker without a bio key, say) gets NULL there, and nothing is half-written."""
    ensure_schema(db)
    history.write_rows(db, "speakers", [{"id": "a", "name": "A", "bio": "GPU person"}, {"id": "b", "name": "B"}])
    assert db.execute("select id, name, bio from speakers order by id").fetchall() == [
        ("a", "A", "GPU person"), ("b", "B", None)]


def test_a_build_where_most_talks_change_rebuilds_the_derived_tables_once(fresh_db_path):
    """Every title changed behind the index's back: the rebuild writes every talk, switching to
    rebuilding the FTS index, facet keys and talk_items at the end; all of them agree with the
    talks afterwards, and the triggers are back for the next build."""
    from gputalks.project.settings import default_settings
    from gputalks.index.pipeline import rebuild

    db = sqlite_utils.Database(fresh_db_path)
    items = ("select v.facet, v.value, i.newest_first, t.id from talk_items i join talk_facet_values v on v.code = i.code "
             "join talks t on t.rowid = i.talk")
    items_before = sorted(db.execute(items).fetchall())
    with db.conn:
        db.execute("update talks set title = title || ' (draft)'")
    db.close()
    report = rebuild(fresh_db_path, default_settings())
    assert report.exit_code == 0 and report.stats.talks_written == 150
    db = sqlite_utils.Database(fresh_db_path)
    assert db.execute("select count(*) from talks where title like '%(draft)'").fetchone() == (0,)
    assert db.execute("select count(*) from talks_fts where talks_fts match 'draft'").fetchone() == (0,)
    flash = db.execute("select rowid from talks where title like '%Flash Attention%'").fetchone()
    assert flash is not None and flash in db.execute("select rowid from talks_fts where talks_fts match 'flash'").fetchall()
    assert sorted(db.execute(items).fetchall()) == items_before  # (values are coded anew)
    assert db.execute("select count(*) from talk_facet_keys").fetchone() == (150,)
    assert db.execute("pragma integrity_check").fetchone() == ("ok",)
    db.table("talks").update(db.execute("select id from talks limit 1").fetchone()[0], {"topics": '["Triton"]'})
    assert db.execute("select count(*) from talk_items i join talk_facet_values v on v.code = i.code "
                      "where v.value = 'Triton'").fetchone()[0] > 0  # the triggers came back
