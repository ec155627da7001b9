"""The YouTube source and the caption chooser on yt-dlp's real output
(../shared/data/real/ytdlp, real/vtt): shapes nobody here wrote."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
from click.testing import CliRunner

from gputalks.cli import cli
from gputalks.project.validation import ConfigError, SourcesConfig, validated
from gputalks.scraper import youtube
from gputalks.scraper.captions import choose_track, parse_captions, parse_vtt
from gputalks.scraper.records import ParseError, RawDocument

from tests.conftest import REPO, SHARED, SNAPSHOT

REAL = SHARED / "real"
FULL = json.loads((REAL / "ytdlp" / "pinchflat-565a1d4-media_metadata.json").read_text())
CHANNEL = json.loads((REAL / "ytdlp" / "pinchflat-565a1d4-channel_source_metadata.json").read_text())
FLAT = json.loads((REAL / "ytdlp" / "sukadia-flat-playlist-PLIF2opf2.json").read_text())
WATCH = "https://www.youtube.com/watch?v=bwRHIkYqYJo"


def as_document(info: dict, url: str) -> RawDocument:
    return RawDocument(source="youtube", method="GET", url=url, status=200, content_type="application/json",
                       fetched_at="2026-12-02T06:00:00Z", body=json.dumps(info).encode())


def test_the_chooser_never_takes_an_hls_playlist():
    auto_de = FULL["automatic_captions"]["de"]
    assert auto_de[0]["ext"] == "vtt" and auto_de[0]["protocol"] == "m3u8_native"  # the trap, as yt-dlp lists it
    no_human = {**FULL, "subtitles": {}}
    track = choose_track(no_human, ["de"])
    # German is asked for, but this English talk's German automatic track is YouTube's machine
    # translation (tlang=de): the track taken is the language spoken, and says so.
    assert (track.language, track.automatic) == ("en", True) and "tlang=" not in track.url
    assert track.url.startswith("https://www.youtube.com/api/timedtext") and "manifest" not in track.url
    human = choose_track(FULL, ["de"])
    assert (human.language, human.automatic, human.ext) == ("de", False, "vtt")


def test_a_human_track_without_vtt_and_an_automatic_one_whose_only_vtt_is_hls():
    info = copy.deepcopy(FULL)
    info["subtitles"]["de"] = [f for f in info["subtitles"]["de"] if f["ext"] != "vtt"]
    info["automatic_captions"]["de"] = [f for f in info["automatic_captions"]["de"]
                                        if f["ext"] != "vtt" or f.get("protocol") == "m3u8_native"]
    human = choose_track(info, ["de"])
    assert (human.automatic, human.ext) == (False, "json3")  # converted, not skipped
    info["subtitles"] = {}
    info["automatic_captions"] = {"en-orig": [f for f in info["automatic_captions"]["en-orig"]
                                              if f["ext"] != "vtt"] + [{"ext": "vtt", "protocol": "m3u8_native",
                                                                        "url": "https://manifest.googlevideo.com/x"}]}
    auto = choose_track(info, ["en"])
    assert (auto.language, auto.automatic, auto.ext) == ("en", True, "json3")  # the HLS "vtt" is never taken


def test_a_translation_is_never_taken_as_the_talk_s_own_language():
    """A German talk (the real dump, its spoken track made German): YouTube offers an "en" track
    that is a machine translation (tlang=en). Asked for English, the chooser takes the German
    original and stores "de"."""
    original = FULL["automatic_captions"]["en-orig"]
    german = {**FULL, "language": "de", "subtitles": {},
              "automatic_captions": {"de-orig": original,
                                     "en": [dict(f, url=f["url"] + "&tlang=en") for f in original],
                                     "it": [dict(f, url=f["url"] + "&tlang=it") for f in original]}}
    track = choose_track(german, ["en"])
    assert (track.language, track.automatic) == ("de", True) and "tlang=" not in track.url


def test_json3_and_srt_tracks_become_segments():
    json3 = json.dumps({"events": [
        {"tStartMs": 0, "dDurationMs": 2500, "segs": [{"utf8": "Tensor cores "}, {"utf8": "and TMA"}]},
        {"tStartMs": 2500, "dDurationMs": 1000, "aAppend": 1, "segs": [{"utf8": "\n"}]},
        {"tStartMs": 31000, "dDurationMs": 2000, "segs": [{"utf8": "next: warp specialisation"}]}]})
    segments = parse_captions(json3, "json3")
    assert [(s.start_s, s.text) for s in segments] == [(0.0, "Tensor cores and TMA"),
                                                      (31.0, "next: warp specialisation")]
    srt = "1\n00:00:01,000 --> 00:00:04,000\nShared memory banks\n\n2\n00:00:40,000 --> 00:00:42,500\nConflicts\n"
    assert [(s.start_s, s.end_s, s.text) for s in parse_captions(srt, "srt")] == [
        (1.0, 4.0, "Shared memory banks"), (40.0, 42.5, "Conflicts")]


def test_a_real_human_caption_file():
    segments = parse_vtt((REAL / "vtt" / "1c7-crashcourse-youtube-dl-human.vtt").read_text())
    assert segments[0].start_s == 0.16
    assert segments[0].text.startswith("Hi I’m John Green and this is Crash Course European History. Last time,")
    assert all(s.end_s - s.start_s <= 60 for s in segments)


def test_a_full_info_dict_without_type_is_a_video():
    untyped = {k: v for k, v in FULL.items() if k != "_type"}
    assert youtube.is_video_info(FULL) and youtube.is_video_info(untyped)
    assert not youtube.is_video_info(CHANNEL) and not youtube.is_video_info(FLAT)
    parsed = youtube.parse([as_document(untyped, WATCH)], {"captions": {"languages": ["de"]}})
    item = parsed.items[0]
    assert (item.key, item.title, item.duration_s, item.date) == (
        "bwRHIkYqYJo", "Trying to Wheelie Without the Rear Brake", 582, "2021-07-20")
    assert item.full_info and [c.title for c in item.chapters][:3] == ["Introduction", "Rules", "Challenge #1"]
    assert item.chapters[-1].end_s == 582.0 and "berm peak" in item.tags
    # The chosen track was not fetched here: the transcript says so instead of failing.
    assert item.transcript.reason == "caption track not fetched (see gputalks status)"


def test_a_channel_with_no_entries_and_a_flat_dump_with_null_timestamps():
    url = "https://www.youtube.com/c/TheUselessTrials"
    parsed = youtube.parse([as_document(CHANNEL, url)], {"follow": [{"url": url, "kind": "channel"}]})
    assert parsed.items == [] and [p.reason for p in parsed.problems] == ["listing has no entries"]
    playlist = FLAT["webpage_url"]
    flat = youtube.parse([as_document(FLAT, playlist)], {"follow": [{"url": playlist, "series": "OST"}]})
    assert [(i.key, i.duration_s, i.date, i.series) for i in flat.items] == [
        ("Je8iIWgavh4", 115, None, "OST"), ("nvQNUxoN8gw", 180, None, "OST"),
        ("ZxnMdkQ-OXE", 83, None, "OST"), ("M0_Zvp59TaA", 297, None, "OST")]


@pytest.mark.parametrize("source", [FULL, FLAT["entries"][0]])
def test_no_field_being_null_crashes_the_parser(source):
    nulled = {key: None for key in source} | {"id": source["id"]}
    parsed = youtube.parse([as_document(nulled, f"https://www.youtube.com/watch?v={source['id']}")], {})
    assert [i.key for i in parsed.items] == [source["id"]]
    assert parsed.items[0].title == "" and parsed.items[0].duration_s is None


def test_status_after_a_bot_check_says_which_option_to_set(fresh_db_path, tmp_path):
    snapshot = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, snapshot)
    manifest = json.loads((snapshot / "manifest.json").read_text())
    listing = next(e for e in manifest["responses"] if e["url"] == "https://www.youtube.com/@GPUMODE/videos")
    listing["status"] = 403
    (snapshot / listing["file"]).write_text("[youtube:tab] @GPUMODE: Sign in to confirm you're not a bot. "
                                            "This helps protect our community. Learn more")
    (snapshot / "manifest.json").write_text(json.dumps(manifest))
    refreshed = CliRunner().invoke(cli, ["--project", str(REPO), "refresh", "--db", str(fresh_db_path), "--snapshot", str(snapshot),
                                         "--source", "youtube"])
    assert "Sign in to confirm" in refreshed.output
    status = CliRunner().invoke(cli, ["status", "--db", str(fresh_db_path)])
    assert "set [youtube.ytdlp] cookiefile" in status.output


def test_ytdlp_options_are_checked_by_name_and_type():
    def check(options):
        return validated(SourcesConfig, {"youtube": {"ytdlp": options}}, "gputalks.toml")["youtube"]

    assert youtube.ytdlp_options(check({"cookiefile": "cookies.txt", "sleep_interval_requests": 2})) == {
        "cookiefile": "cookies.txt", "sleep_interval_requests": 2}
    with pytest.raises(ConfigError, match=r"^gputalks.toml: \[youtube.ytdlp\] cookies: unknown key \(a typo\?\)$"):
        check({"cookies": "x"})
    with pytest.raises(ConfigError, match=r"\[youtube.ytdlp\] sleep_interval_requests: Input should be a valid number, got .2s."):
        check({"sleep_interval_requests": "2s"})
    extractor = youtube.YtDlpExtractor(youtube.ytdlp_options(check({"proxy": "socks5://127.0.0.1:9"})))
    assert extractor.options["proxy"] == "socks5://127.0.0.1:9" and extractor.options["quiet"] is True


@pytest.mark.parametrize("path", sorted((REAL / "ytdlp").glob("*.json")), ids=lambda p: p.name)
def test_a_real_info_dict_reads_back_as_the_standard_library_reads_it(path):
    body = path.read_bytes()
    assert RawDocument("youtube", "GET", WATCH, 200, "application/json", "t", body).json() == json.loads(body)


def test_json_that_only_the_standard_library_accepts_still_reads_and_bad_json_names_the_url():
    """yt-dlp writes with Python's json: NaN and integers past 64 bits can appear, and are read
    as before; what is not JSON at all is a ParseError that names the document."""
    body = b'{"id": "bwRHIkYqYJo", "duration": NaN, "view_count": 123456789012345678901234567890}'
    info = RawDocument("youtube", "GET", WATCH, 200, "application/json", "t", body).json()
    assert info["view_count"] == 123456789012345678901234567890 and info["duration"] != info["duration"]
    with pytest.raises(ParseError, match=r"watch\?v=bwRHIkYqYJo: not valid JSON \(Expecting value: line 1 column 1"):
        RawDocument("youtube", "GET", WATCH, 200, "application/json", "t", b"<html>").json()
