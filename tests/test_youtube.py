"""The YouTube source on the recorded yt-dlp info dicts."""

import json

import pytest

from gputalks.scraper import titles, youtube
from gputalks.scraper.http import Fetcher, make_client
from gputalks.scraper.records import RawDocument
from gputalks.scraper.snapshot import Snapshot

from tests.conftest import SNAPSHOT


def doc(path: str, url: str) -> RawDocument:
    return RawDocument(source="youtube", method="GET", url=url, status=200,
                       content_type="application/json", fetched_at="2026-12-02T06:00:00Z",
                       body=(SNAPSHOT / path).read_bytes())


@pytest.mark.parametrize("title, number", [
    ("Lecture 12: Flash Attention", 12),
    ("Lecture 1 How to profile CUDA kernels in PyTorch", 1),
    ("Lecture 75 [ScaleML Series] GPU Programming Fundamentals + ThunderKittens", 75),
    ("Lecture 9 Reductions", 9),
    ("Bonus Lecture: CUDA C++ llm.cpp", None),
    ("Notes on AI Hardware (Stanford MLSys #88)", None),
])
def test_lecture_number_forms(title, number):
    assert titles.lecture_number(title) == number


def test_parse_listing_and_full_info(config):
    listing = doc("youtube/gpumode-videos.json", "https://www.youtube.com/@GPUMODE/videos")
    full = doc("youtube/video-3l10o0DYJXg.json", "https://www.youtube.com/watch?v=3l10o0DYJXg")
    result = youtube.parse([listing, full], config["youtube"])
    items = {i.key: i for i in result.items}
    assert len(items) == 120  # 119 listed + one single video
    flash = items["zEuwuCTEf_0"]
    assert (flash.title, flash.number, flash.duration_s, flash.series) == (
        "Lecture 12: Flash Attention", 12, 4334, "GPU MODE")
    assert flash.url == "https://www.youtube.com/watch?v=zEuwuCTEf_0"
    gtc = items["3l10o0DYJXg"]
    assert gtc.date == "2022-07-05" and gtc.year == 2022 and gtc.series == "GTC"
    assert "on-demand/session/gtcspring21-s31151" in gtc.description
    assert gtc.full_info is True and flash.full_info is False
    # entries without a duration are kept, and reported
    no_duration = {p.item for p in result.problems if "no duration" in p.reason}
    assert {"WiB_3Csfj_Q", "DOXx3QRZuR8", "j4zJbrNE9lA"} <= no_duration
    assert items["WiB_3Csfj_Q"].duration_s is None


def test_flat_entries_with_a_timestamp_get_a_date(config):
    listing = json.loads((SNAPSHOT / "youtube/gpumode-videos.json").read_text())
    listing["entries"] = listing["entries"][:1]
    listing["entries"][0]["timestamp"] = 1761955200  # what yt-dlp gives when the tab lists it
    body = RawDocument(source="youtube", method="GET", url="https://www.youtube.com/@GPUMODE/videos", status=200,
                       content_type="application/json", fetched_at="x", body=json.dumps(listing).encode())
    item = youtube.parse([body], config["youtube"]).items[0]
    assert (item.date, item.year) == ("2025-11-01", 2025)


def test_unavailable_and_failing_videos_are_per_item_problems(tmp_path, config):
    """A private video in the listing, and a full-info extraction that fails,
    are problems for those items only; the rest of the listing stays."""
    listing = json.loads((SNAPSHOT / "youtube/gpumode-videos.json").read_text())
    listing["entries"][0]["title"] = "[Private video]"
    (tmp_path / "listing.json").write_text(json.dumps(listing))
    manifest = {"recorded": "2026-12-02T06:00:00Z", "responses": [
        {"source": "youtube", "method": "GET", "url": "https://www.youtube.com/@GPUMODE/videos",
         "status": 200, "content_type": "application/json", "file": "listing.json"}]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    recorded = Snapshot(tmp_path)
    fetcher = Fetcher(make_client(transport=recorded.transport()), extractor=recorded.extractor())
    follow = {"follow": [{"url": "https://www.youtube.com/@GPUMODE/videos", "kind": "channel",
                          "series": "GPU MODE"},
                         {"url": "https://www.youtube.com/watch?v=gone", "kind": "video"}]}
    fetched = youtube.fetch(fetcher, follow)
    assert len(fetched.documents) == 1  # the listing; full infos were not recorded
    gone = [p for p in fetched.problems if p.item == "https://www.youtube.com/watch?v=gone"]
    assert gone and gone[0].severity == "error" and "not recorded" in gone[0].reason
    parsed = youtube.parse(fetched.documents, follow)
    assert len(parsed.items) == 118
    assert any(p.item == "WRAQYXBA_Qc" and "unavailable" in p.reason for p in parsed.problems)


def test_full_info_only_for_new_or_changed_videos(config, archived):
    """With the listing and a video's full info archived, an unchanged entry reuses the archive."""
    listing = doc("youtube/gpumode-videos.json", "https://www.youtube.com/@GPUMODE/videos")
    archived_full = RawDocument(source="youtube", method="GET", url="https://www.youtube.com/watch?v=zEuwuCTEf_0",
                                status=200, content_type="application/json", fetched_at="x",
                                body=b'{"id": "zEuwuCTEf_0", "_type": "video"}')
    recorded = Snapshot(SNAPSHOT)
    fetcher = Fetcher(make_client(transport=recorded.transport()), extractor=recorded.extractor(),
                      archive=archived(listing, archived_full))
    follow = {"follow": [config["youtube"]["follow"][0]], "full_info": "new"}
    fetched = youtube.fetch(fetcher, follow)
    assert archived_full in fetched.documents  # reused, not extracted again
    assert fetcher.requests_made == 1 + 118  # the listing + every video without archived full info


class FailingExtractor:
    """yt-dlp's answers for a listing that fails, by message (as yt-dlp words them)."""

    def __init__(self, message: str):
        self.message = message

    def extract(self, url, flat):
        from gputalks.scraper.http import FetchError

        raise FetchError(url, self.message)


@pytest.mark.parametrize("message, hint", [
    ("[youtube:tab] PLxyz: The playlist does not exist.", "remove it from [[youtube.follow]]"),
    ("Sign in to confirm you're not a bot. This helps protect our community.", "[youtube.ytdlp] cookiefile"),
    ("HTTP Error 429: Too Many Requests", "[youtube.ytdlp] sleep_interval_requests"),
])
def test_a_failed_listing_is_kept_whatever_it_says(message, hint, archived):
    """One answer is no proof that a playlist is gone: every failure keeps the listing, and fails the source."""
    listing = doc("youtube/gpumode-videos.json", "https://www.youtube.com/@GPUMODE/videos")
    fetcher = Fetcher(make_client(), extractor=youtube.ExplainedRefusals(FailingExtractor(message)),
                      archive=archived(listing))
    fetched = youtube.fetch(fetcher, {"follow": [{"url": listing.url, "kind": "channel"}], "full_info": "never"})
    assert listing in fetched.documents
    assert len(fetched.problems) == 1 and message in fetched.problems[0].reason and hint in fetched.problems[0].reason
    assert fetched.fatal and hint in fetched.fatal and (fetched.asked, fetched.failed) == (1, 1)


def test_a_listing_date_is_kept_as_approximate_until_the_full_info_arrives():
    """yt-dlp's flat listing, asked with youtubetab:approximate_date, gives each entry a
    `timestamp` and no upload_date: the talk gets that date, and its provenance says it is
    approximate; a full info dict's upload_date is exact."""
    from gputalks.scraper import youtube

    listed = youtube._item({"id": "zEuwuCTEf_0", "title": "Lecture 12: Flash Attention", "timestamp": 1709251200,
                            "_type": "url"}, "GPU MODE")
    assert listed.date == "2024-03-01" and listed.field_origin == {"date": "approximate, from the listing"}
    full = youtube._item({"id": "zEuwuCTEf_0", "title": "Lecture 12: Flash Attention", "upload_date": "20240302",
                          "timestamp": 1709251200}, "GPU MODE")
    assert full.date == "2024-03-02" and "date" not in full.field_origin


def test_the_live_listing_asks_yt_dlp_for_approximate_dates():
    from gputalks.scraper.youtube import YtDlpExtractor

    extractor = YtDlpExtractor({"extractor_args": {"youtube": {"player_client": ["web"]}}})
    listing, video = extractor.options_for(flat=True), extractor.options_for(flat=False)
    assert listing["extract_flat"] == "in_playlist"
    assert listing["extractor_args"] == {"youtube": {"player_client": ["web"]},
                                         "youtubetab": {"approximate_date": [""]}}
    assert video["extractor_args"] == {"youtube": {"player_client": ["web"]}} and "extract_flat" not in video
