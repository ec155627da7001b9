"""The archive and the history on an in-memory index: the store's rules alone,
without fetching or parsing."""

from __future__ import annotations

import pytest

from gputalks.index.history import apply_talks, recent_changes
from gputalks.index.merge import merge_talk
from gputalks.index.link import TalkCluster
from gputalks.index.runs import start_run
from gputalks.index.schema import TABLES, ensure_schema
from gputalks.index.store import SqliteArchive, archive, load_documents, open_db
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
    assert set(TABLES) <= set(db.table_names())
    assert db.table("talks").detect_fts() == "talks_fts"


def test_a_version_is_archived_once_and_read_back_in_order(db):
    first, same, changed = document(b"# v1"), document(b"# v1"), document(b"# v2")
    ids = archive(db, [first, same, changed])
    assert ids[0] == ids[1] != ids[2]
    assert db.table("raw_documents").count == 2
    loaded = load_documents(db, [ids[2], ids[0]])
    assert [d.body for d in loaded] == [b"# v2", b"# v1"]
    assert loaded[0].etag == '"v"' and loaded[0].source == "github"


def test_the_fetchers_view_is_the_newest_good_version(tmp_path):
    path = tmp_path / "talks.db"
    db = open_db(path)
    with db.atomic():
        archive(db, [document(b"# v1"), document(b"# v2"),
                     document(b"other", url="https://api.github.com/x")])
    db.close()
    view = SqliteArchive(path)
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
    matches = [{"source": m.source, "item_key": m.item_key, "talk_id": m.talk_id, "method": m.method,
                "score": m.score, "url": None, "title": None} for c in clusters for m in c.matches]
    with db.atomic():
        stats = apply_talks(db, run_id, f"2026-12-0{run_id}", [merge_talk(c) for c in clusters], matches)
    return stats.__dict__


def test_history_writes_only_differences_and_never_deletes_a_talk(db):
    assert apply(db, talk("Flash Attention")) == {"talks_written": 1, "changes": 1, "new": 1, "gone": 0}
    assert apply(db, talk("Flash Attention")) == {"talks_written": 0, "changes": 0, "new": 0, "gone": 0}
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
