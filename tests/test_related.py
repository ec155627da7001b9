"""Related talks: ranked by the build for every talk (index/related.py), stored in talk_related,
read by the talk page."""

import json

import sqlite_utils
from bs4 import BeautifulSoup

from gputalks.index.related import Facts, TalkFacts, ranked
from gputalks.project.settings import default_settings
from gputalks.index.pipeline import rebuild

from tests.test_datasette import datasette_for, get


def related_of(db, talk_id: str) -> list[str]:
    return json.loads(db.execute("select related from talk_related where talk_id = ?", [talk_id]).fetchone()[0])


def facts(talk_id: str, title: str = "", topics=(), speakers=(), event=None, series=None, number=None,
          date: str = "") -> TalkFacts:
    return TalkFacts(talk_id, title, frozenset(topics), frozenset(speakers), event, series, number, date)


def test_every_talk_of_the_snapshot_has_related_talks_stored(snapshot_db):
    live = {row[0] for row in snapshot_db.execute("select id from talks where gone_since is null")}
    stored = dict(snapshot_db.execute("select talk_id, related from talk_related").fetchall())
    assert len(stored) >= 140 and set(stored) <= live
    for talk_id, related in stored.items():
        ids = json.loads(related)
        assert 1 <= len(ids) <= 5 and talk_id not in ids and set(ids) <= live and len(set(ids)) == len(ids)


def test_a_speakers_talks_come_first_and_close_titles_among_them(snapshot_db):
    ninja = related_of(snapshot_db, "gtc-gtc24-s62401")  # Stephen Jones, "How To Write A CUDA Program: The Ninja Edition"
    jones = {row[0] for row in snapshot_db.execute(
        "select talk_id from talk_speakers where speaker_id = 'stephen-jones'")}
    assert len(ninja) == 5 and set(ninja) <= jones
    # his "How to Write a CUDA Program" talks (a close title) before "CUDA: New Features and Beyond" (same event)
    assert ninja.index("gtc-gtc25-s72897") < ninja.index("gtc-gtc24-s62400")


def test_the_flash_attention_page_leads_to_related_talks_and_its_neighbours(snapshot_db_path, snapshot_db):
    ds = datasette_for(snapshot_db_path)
    soup = BeautifulSoup(get(ds, "/talks/talks/gpumode-lecture-012").text, "html.parser")
    related = [a["href"].rsplit("/", 1)[1] for a in soup.select(".gt-related a")]
    assert related == related_of(snapshot_db, "gpumode-lecture-012") and len(related) >= 3
    # Thomas Viehmann's other lecture, then the lectures beside it
    assert related[0] == "gpumode-lecture-004" and {"gpumode-lecture-011", "gpumode-lecture-013"} <= set(related)
    assert soup.select_one('.gt-neighbours a[rel="prev"]')["href"].endswith("/gpumode-lecture-011")
    assert soup.select_one('.gt-neighbours a[rel="next"]')["href"].endswith("/gpumode-lecture-013")
    topic = soup.select_one(".gt-topics a")["href"]
    assert topic == "/topic/Attention"
    feed = BeautifulSoup(get(ds, topic).text, "html.parser").select_one('link[type="application/atom+xml"]')["href"]
    assert get(ds, feed).status_code == 200


def test_ranking_weighs_speakers_lectures_topics_events_and_titles():
    talks = [
        facts("a", "Tensor Cores in Depth", topics=["GEMM"], speakers=["Ann"], event="GTC 2024"),
        facts("same-speaker", "Something Else", speakers=["Ann"], date="2020-01-01"),
        facts("topic-old", "Unrelated Words", topics=["GEMM"], date="2021-01-01"),
        facts("topic-new", "Other Words", topics=["GEMM"], date="2025-01-01"),
        facts("topic-event", "More Words", topics=["GEMM"], event="GTC 2024", date="2019-01-01"),
        facts("topic-title", "Tensor Cores Explained", topics=["GEMM"], date="2018-01-01"),
        facts("nothing", "Nothing Shared", topics=["Triton"]),
        facts("l1", "Lecture One", series="S", number=1), facts("l2", "Lecture Two", series="S", number=2),
        facts("l5", "Lecture Five", series="S", number=5),
    ]
    found = {talk: json.loads(related) for talk, related in ranked(talks)}
    # speaker 3 > topic + title 2 > topic + event 1.5 > topic 1 (the newer first)
    assert found["a"] == ["same-speaker", "topic-title", "topic-event", "topic-new", "topic-old"]
    assert found["l1"] == ["l2"] and "l5" not in found and "nothing" not in found
    assert found["same-speaker"] == ["a"]


def test_a_rebuild_ranks_them_in_its_worker_as_the_refresh_did(fresh_db_path, snapshot_db):
    """The refresh ranks in-process (fresh documents), a rebuild in its forked worker, while the
    writer indexes: the same rows, and those of ranking the stored talks here."""
    before = dict(snapshot_db.execute("select talk_id, related from talk_related").fetchall())
    assert rebuild(fresh_db_path, default_settings()).exit_code == 0
    db = sqlite_utils.Database(fresh_db_path)
    assert dict(db.execute("select talk_id, related from talk_related").fetchall()) == before
    talks = Facts()
    for row in db.query("select * from talks where gone_since is null order by id"):
        talks.add(row)
    assert dict(ranked(talks)) == before


def test_a_build_that_keeps_what_it_did_not_make_keeps_their_related_talks(fresh_db_path):
    """A night without its archive keeps the talks it did not make (nothing marked gone for want
    of a file): their related talks stay too; any other build replaces them all."""
    from gputalks.index.related import write_related

    db = sqlite_utils.Database(fresh_db_path)
    before = dict(db.execute("select talk_id, related from talk_related").fetchall())
    ranked_now = [("gpumode-lecture-012", '["gpumode-lecture-011"]')]
    with db.atomic():
        write_related(db, ranked_now, keep=True)
    after = dict(db.execute("select talk_id, related from talk_related").fetchall())
    assert after == {**before, "gpumode-lecture-012": '["gpumode-lecture-011"]'} and len(after) == len(before)
    with db.atomic():
        write_related(db, ranked_now)
    assert db.execute("select talk_id, related from talk_related").fetchall() == ranked_now
