"""Inside the talk: chapters and transcripts from recorded yt-dlp info dicts and WebVTT files."""

import asyncio
import json

import pytest
import sqlite_utils
from click.testing import CliRunner

from gputalks.cli import cli
from gputalks.project.settings import Settings, load_config
from gputalks.index.pipeline import RefreshOptions, rebuild, refresh
from gputalks.site.serve import served_datasette
from gputalks.scraper.captions import choose_track, parse_vtt
from gputalks.scraper.records import ParseError

from tests.conftest import REPO, copy_index

FIXTURES = REPO / "tests" / "fixtures" / "inside"
SETTINGS = Settings(load_config(FIXTURES / "sources.toml"))
VIDEOS = [f["url"].rsplit("=", 1)[1] for f in SETTINGS.sources["youtube"]["follow"]]


def test_rolling_automatic_captions_are_deduplicated_and_segmented():
    segments = parse_vtt((FIXTURES / "auto-rolling.en.vtt").read_text())
    assert [s.start_s for s in segments] == [0.16, 35.0, 70.0]
    assert segments[0].text == ("okay so today we're going to talk about the tensor memory accelerator TMA "
                                   "and how async copies pipeline loads")  # each rolled line once, tags gone
    assert segments[1].text == "next barriers and coscheduling"
    assert all(s.end_s - s.start_s <= 60 for s in segments)


def test_human_captions_entities_and_a_malformed_cue():
    human = parse_vtt((FIXTURES / "human.en.vtt").read_text())
    assert human[0].text == "The GPU is a throughput machine. The CPU is a latency machine."
    assert human[-1].text == "DRAM pages and warps & occupancy."
    kept = parse_vtt((FIXTURES / "malformed-cue.en.vtt").read_text())
    assert kept[0].text == "a fine first cue about TMA and a fine last cue"  # the bad block is skipped
    with pytest.raises(ParseError, match="not valid WebVTT"):
        parse_vtt((FIXTURES / "garbled.vtt").read_text())


def test_track_choice_prefers_people_then_english():
    both = json.loads((FIXTURES / "video-3l10o0DYJXg.json").read_text())
    assert choose_track(both, ["en"]).automatic is False
    auto = json.loads((FIXTURES / "video-xcpEl0cGCC4.json").read_text())
    track = choose_track(auto, ["en"])
    assert (track.language, track.automatic, track.ext) == ("en", True, "vtt")  # not json3, not en-fr, not de
    assert choose_track(json.loads((FIXTURES / "video-86FAWCzIe_4.json").read_text()), ["en"]) is None


@pytest.fixture(scope="module")
def inside_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("inside") / "talks.db"
    report = refresh(path, SETTINGS, RefreshOptions(snapshot=FIXTURES, sources=["youtube"]))
    assert report.exit_code == 0, report.problems
    return path


def test_chapters_segments_and_deep_links(inside_db):
    db = sqlite_utils.Database(inside_db)
    chapters = list(db.query("select title, start_s, deep_link from chapters where talk_id = 'youtube-xcpEl0cGCC4' "
                             "order by position"))
    assert [c["title"] for c in chapters] == ["Intro", "TMA pipelining", "Memory consistency, pre- vs post-Hopper"]
    assert chapters[1]["deep_link"] == "https://www.youtube.com/watch?v=xcpEl0cGCC4&t=30s"
    segments = list(db.query("select start_s, text, chapter, language, automatic, deep_link from segments "
                             "where talk_id = 'youtube-xcpEl0cGCC4' order by position"))
    # each segment carries the chapter it starts in, stored at build time
    assert [s["chapter"] for s in segments] == ["Intro", "TMA pipelining", "Memory consistency, pre- vs post-Hopper"]
    assert len(segments) == 3 and segments[1]["deep_link"] == "https://www.youtube.com/watch?v=xcpEl0cGCC4&t=35s"
    assert (segments[0]["language"], segments[0]["automatic"]) == ("en", 1)
    human = db.execute("select automatic from segments where talk_id = 'youtube-3l10o0DYJXg'").fetchone()
    assert human[0] == 0


def test_missing_404_and_garbled_captions_keep_the_talk(inside_db):
    transcript = dict(sqlite_utils.Database(inside_db).execute("select id, transcript from talks").fetchall())
    assert len(transcript) == 5  # every video keeps its talk row
    assert transcript["youtube-xcpEl0cGCC4"] == "en (automatic)"
    assert transcript["youtube-3l10o0DYJXg"] == "en"
    assert transcript["youtube-QQceTDjA4f4"] == "no transcript: caption track answered HTTP 404"
    assert transcript["youtube-pC0SIzZGFSc"].startswith("no transcript: captions are not valid WebVTT")
    assert transcript["youtube-86FAWCzIe_4"] == "no transcript: no caption track listed"


def test_tracks_are_fetched_only_for_new_or_changed_videos(inside_db, tmp_path):
    copy = copy_index(inside_db, tmp_path / "talks.db")
    again = refresh(copy, SETTINGS, RefreshOptions(snapshot=FIXTURES, sources=["youtube"]))
    # the info dicts, and the track that answered 404 (asked again: it may appear); the rest came from the archive
    assert again.requests == len(VIDEOS) + 1
    assert again.stats.talks_written == 0


def test_search_tma_on_the_command_line(inside_db):
    result = CliRunner().invoke(cli, ["search", "TMA", "--db", str(inside_db)])
    assert result.exit_code == 0
    talks, moments = result.output.split("\n\n", 1)
    assert talks.splitlines()[0] in ("all your words:", "related topic:")  # talks first, as the site ranks them
    assert moments.splitlines()[0].startswith("CUDA + ThunderKittens, but increasingly drunk / TMA pipelining  [0:30, chapter]")
    inside = CliRunner().invoke(cli, ["search", "TMA", "--inside", "--db", str(inside_db)])
    assert inside.exit_code == 0 and inside.output == moments
    assert "https://www.youtube.com/watch?v=xcpEl0cGCC4&t=30s" in result.output
    assert "the tensor memory accelerator [TMA]" in result.output  # the transcript passage, highlighted
    assert "https://www.youtube.com/watch?v=xcpEl0cGCC4&t=0s" in result.output


def test_search_inside_in_datasette(inside_db):
    ds = served_datasette(inside_db)

    async def get(path):
        return await ds.client.get(path)

    rows = asyncio.run(get("/talks/search_inside_talks.json?q=TMA&_shape=objects")).json()["rows"]
    assert rows[0]["chapter"] == "TMA pipelining" and rows[0]["deep_link"].endswith("&t=30s")
    assert any(r["kind"] == "transcript" and "[TMA]" in r["snippet"] for r in rows)
    html = asyncio.run(get("/talks/search_inside_talks?q=TMA")).text
    assert 'href="https://www.youtube.com/watch?v=xcpEl0cGCC4&amp;t=30s"' in html
    row_page = asyncio.run(get("/talks/talks/youtube-xcpEl0cGCC4")).text
    assert "<h2>Chapters</h2>" in row_page and ">0:30</a> TMA pipelining" in row_page
    # stemming: "pipelines" finds "pipeline"
    assert asyncio.run(get("/talks/search_inside_talks.json?q=pipelines&_shape=objects")).json()["rows"]


def test_talks_are_ranked_by_their_whole_transcript_then_passages_within_them(inside_db):
    db = sqlite_utils.Database(inside_db)
    talk_of = dict(db.execute("select rowid, id from talks").fetchall())
    ranked = [talk_of[r] for r, in db.execute("select rowid from transcripts_fts where transcripts_fts match 'throughput' "
                                              "order by rank")]
    assert ranked == ["youtube-3l10o0DYJXg"]  # "The GPU is a throughput machine", said in one talk only
    assert db.execute("select count(*) from transcripts_fts").fetchone()[0] == 2  # the two talks with captions


def test_search_inside_one_talk_finds_only_that_talk(inside_db):
    ds = served_datasette(inside_db)

    def rows(q, talk):
        url = f"/talks/search_inside_talks.json?q={q}&talk={talk}&_shape=objects"
        return asyncio.run(ds.client.get(url)).json()["rows"]

    inside = rows("TMA", "youtube-xcpEl0cGCC4")
    assert {r["talk_id"] for r in inside} == {"youtube-xcpEl0cGCC4"}
    assert any(r["kind"] == "transcript" and "[TMA]" in r["snippet"] for r in inside)
    assert rows("TMA", "youtube-3l10o0DYJXg") == []  # the other talk never says it
    assert rows("throughput", "youtube-3l10o0DYJXg")[0]["snippet"].startswith("The GPU is a [throughput] machine")


def test_an_index_from_before_the_talk_level_transcripts_gets_them_on_its_next_build(inside_db, tmp_path):
    copy = copy_index(inside_db, tmp_path / "talks.db")
    db = sqlite_utils.Database(copy)
    db.execute("drop table transcripts_fts")
    db.table("segments").enable_fts(["text"], create_triggers=True, tokenize="porter", replace=True)  # text only
    db.close()
    assert rebuild(copy, SETTINGS).exit_code == 0
    assert "[TMA]" in CliRunner().invoke(cli, ["search", "TMA", "--db", str(copy)]).output
    db = sqlite_utils.Database(copy)
    assert db.execute("select count(*) from transcripts_fts").fetchone()[0] == 2
    assert db.table("segments_fts").columns_dict.keys() == {"text", "talk_id"}
