"""Talk ids that survive a bad README week, as real `gputalks` processes on a replay: a lecture
keeps its talk id while its video still lists it, and the returning README section reattaches
to that talk, with no talk reborn under a `youtube-*` id and no phantom gone row."""

from __future__ import annotations

import sqlite3

from tests.faults import faulty_snapshot, gputalks, readme_cut, rewrite, sources_config


def live_and_gone(db_path) -> tuple[set[str], set[str]]:
    with sqlite3.connect(db_path) as db:
        rows = db.execute("select id, gone_since is not null from talks").fetchall()
    return {i for i, gone in rows if not gone}, {i for i, gone in rows if gone}


def test_a_readme_cut_past_gone_after_runs_keeps_every_lectures_talk_id(fresh_db_path, tmp_path):
    before, gone_before = live_and_gone(fresh_db_path)
    with sqlite3.connect(fresh_db_path) as db:
        with_video = {talk for (talk,) in db.execute(
            "select talk_id from talk_sources where source = 'youtube' and talk_id like 'gpumode-%'")}
    cut = faulty_snapshot(tmp_path / "cut", rewrite("github/readme.md", readme_cut(0.75)))
    config = sources_config(tmp_path)
    config.write_text(config.read_text().replace("[refresh]\n", "[refresh]\ngone_after_runs = 1\n"))
    for _ in range(2):  # past `gone_after_runs`
        done = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(cut), "--config", str(config))
        assert done.returncode == 0, done.stdout + done.stderr
    assert "github   unchanged    41 items" in done.stdout  # 17 lectures' sections cut, for 2 nights
    with sqlite3.connect(fresh_db_path) as db:  # past gone_after_runs: their README items are gone
        assert db.execute("select count(*) from talk_sources where source = 'github'").fetchone() == (41,)
    live, gone = live_and_gone(fresh_db_path)
    lost = before - live
    assert all(talk.startswith("gpumode-lecture-") for talk in lost)
    assert not lost & with_video  # a lecture whose video is still listed keeps its talk (all 17 here)
    assert not {talk for talk in live - before if talk.startswith("youtube-")}  # none reborn
    back = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(faulty_snapshot(
        tmp_path / "whole", lambda snapshot, responses: None)), "--config", str(config))
    assert back.returncode == 0, back.stdout + back.stderr
    assert live_and_gone(fresh_db_path) == (before, gone_before)  # every talk back, no phantom


def test_videos_that_lose_their_titles_stay_with_their_talks(fresh_db_path, tmp_path):
    """20 listed videos come back without titles. One of them was its lecture's by its number
    confirmed by its title (lecture 103): it rejoins that talk (`kept`, with the score it had), so
    the lecture's talk keeps its video, url and id, and no title-less `youtube-*` talk is born."""
    from tests.test_search_words import private_titles  # the listing with its first 20 titles emptied

    asked = ("select ts.source, ts.item_key, ts.talk_id, ts.method, ts.score, t.youtube_id, t.url from talk_sources ts "
             "join talks t on t.id = ts.talk_id where ts.source = 'youtube' order by ts.item_key")
    with sqlite3.connect(fresh_db_path) as db:
        before = db.execute(asked).fetchall()
    snapshot = faulty_snapshot(tmp_path, rewrite("youtube/gpumode-videos.json", private_titles))
    done = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(snapshot),
                    "--config", str(sources_config(tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(fresh_db_path) as db:
        after = db.execute(asked).fetchall()
    kept = [(key, talk, score) for _, key, talk, method, score, _, _ in after if method == "kept"]
    assert kept == [("MVh_guNbWMA", "gpumode-lecture-103", 96.6)]
    assert [row for row in before if row[1] == "MVh_guNbWMA"][0][2:5] == ("gpumode-lecture-103", "number+title", 96.6)
    # Every video in the talk it was in, which keeps its video's id and url.
    assert [(s, k, t, y, u) for s, k, t, _, _, y, u in after] == [(s, k, t, y, u) for s, k, t, _, _, y, u in before]
