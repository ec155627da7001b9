"""YouTube playlists, channels and single videos, through yt-dlp's Python API.

A flat listing (`extract_flat="in_playlist"`) gives ids, titles and usually
durations for one request. A video's full info (description, upload date,
chapters, tags) is extracted only when the video is new or its listing entry
changed since the last archived listing; otherwise the archived full info is
reused, so a nightly run stays a handful of requests.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from gputalks.scraper.captions import choose_track, parse_captions
from gputalks.scraper.http import Extractor, FetchError, Fetcher, Wanted
from gputalks.scraper.records import (Chapter, FetchResult, ParseError, ParseResult, Problem, RawDocument, TalkItem, Transcript,
                      shared_origin)
from gputalks.scraper.titles import lecture_number, watch_url, youtube_id_from_url

NAME = "youtube"
# What yt-dlp says when a playlist or channel seems gone. One such answer is
# not proof (YouTube answers 404 by mistake too): the listing is kept.
VANISHED_RE = re.compile(r"does not exist|playlist .*(unavailable|not found)|channel .*(terminated|removed)"
                         r"|This (account|channel) has been terminated|HTTP Error 404", re.I)
UNAVAILABLE_TITLES = {"[private video]", "[deleted video]", "[unavailable video]"}
# What YouTube says when it refuses a datacentre client, and the option that answers it.
REFUSALS = [
    (re.compile(r"confirm you.?re not a bot|sign in to confirm", re.I),
     "set [youtube.ytdlp] cookiefile to a signed-in browser's cookies.txt (or a proxy)"),
    (re.compile(r"HTTP Error 429|too many requests", re.I),
     "set [youtube.ytdlp] sleep_interval_requests (e.g. 2) or a proxy"),
    (VANISHED_RE, "its talks are kept; if it is gone for good, remove it from [[youtube.follow]]"),
]


class _QuietLogger:
    """yt-dlp prints its errors itself; ours come back as FetchErrors and problems instead."""

    def debug(self, message: str) -> None:
        pass

    warning = error = info = debug


def ytdlp_options(config: dict[str, Any]) -> dict[str, Any]:
    """[youtube.ytdlp]: options for yt-dlp, already checked by name and type
    (`index/validation.py`, `YtDlpOptions`)."""
    return dict(config.get("ytdlp", {}))


class YtDlpExtractor:
    """The live extractor: yt_dlp.YoutubeDL, never a subprocess, never our own scraping."""

    def __init__(self, options: dict[str, Any] | None = None):
        self.options = {"quiet": True, "no_warnings": True, "skip_download": True,
                        "socket_timeout": 30, "logger": _QuietLogger(), **(options or {})}

    def options_for(self, flat: bool) -> dict[str, Any]:
        """yt-dlp's options for a listing (`flat`) or a video's full info."""
        options = dict(self.options)
        if flat:
            options["extract_flat"] = "in_playlist"
            # A listing's entries carry no date; asked for, yt-dlp gives each an approximate one
            # ("2 years ago"), which a video keeps until its full info arrives.
            extractor_args = dict(options.get("extractor_args") or {})
            tab = dict(extractor_args.get("youtubetab") or {})
            tab.setdefault("approximate_date", [""])
            options["extractor_args"] = {**extractor_args, "youtubetab": tab}
        return options

    def extract(self, url: str, flat: bool) -> dict[str, Any]:
        import yt_dlp

        options = self.options_for(flat)
        try:
            with yt_dlp.YoutubeDL(options) as ydl:
                info = ydl.extract_info(url, download=False)
                return ydl.sanitize_info(info)
        except yt_dlp.utils.DownloadError as exc:
            message = str(exc).removeprefix("ERROR: ").strip()
            raise FetchError(url, message.splitlines()[0] if message else "yt-dlp failed") from exc


class ExplainedRefusals:
    """An extractor whose refusals (bot check, 429) say which [youtube.ytdlp] option helps."""

    def __init__(self, extractor: Extractor):
        self.extractor = extractor

    def extract(self, url: str, flat: bool) -> dict[str, Any]:
        try:
            return self.extractor.extract(url, flat)
        except FetchError as exc:
            hint = next((advice for pattern, advice in REFUSALS if pattern.search(exc.reason)), None)
            if hint is None:
                raise
            raise FetchError(url, f"{exc.reason} ({hint})", exc.status) from exc


def is_video_info(info: Any) -> bool:
    """A full info dict of one video. Recent yt-dlp may leave out `_type`: then
    a dict with an id and formats or a duration, and no entries, is one."""
    if not isinstance(info, dict) or not info.get("id") or "entries" in info:
        return False
    if "_type" in info:
        return info["_type"] == "video"
    return bool(info.get("formats")) or info.get("duration") is not None


def _entries(info: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in info.get("entries") or [] if isinstance(e, dict) and e.get("id")]


def _info_dict(doc: RawDocument) -> dict[str, Any]:
    """The document as an info dict; a ParseError for anything that is not a
    listing (with entries) or a video with a title (a dict null but for its
    id is a broken answer, not a video that lost its title)."""
    info = doc.json()
    if not isinstance(info, dict) or not (info.get("id") or "entries" in info):
        raise ParseError(f"{doc.url}: not a yt-dlp info dict")
    if "entries" not in info and not (info.get("title") or "").strip():
        raise ParseError(f"{doc.url}: info dict without a title")
    return info


def _entry_signature(entry: dict[str, Any]) -> tuple:
    return (entry.get("title"), entry.get("duration"))


def fetch(fetcher: Fetcher, config: dict[str, Any]) -> FetchResult:
    result = FetchResult()
    for follow in config.get("follow", []):
        url = follow["url"]
        full_info = follow.get("full_info", config.get("full_info", "new"))  # new | always | never
        if follow.get("kind", "playlist") == "video":
            doc = fetcher.fetch_or_keep(Wanted(NAME, url, url, extract_flat=False), result,
                                        validate=_info_dict)
            if doc:
                result.documents.append(doc)
            continue
        previous = fetcher.last_version(NAME, "GET", url, None)
        listing = fetcher.fetch_or_keep(Wanted(NAME, url, url, extract_flat=True), result,
                                        validate=_info_dict, critical=True, optional=True)
        if listing is None:
            continue
        result.documents.append(listing)
        if full_info == "never":
            continue
        before = {e["id"]: _entry_signature(e) for e in _entries(previous.json())} if previous else {}
        wanted = []
        for entry in _entries(listing.json()):
            video = watch_url(entry["id"])
            archived = fetcher.last_version(NAME, "GET", video, None)
            if archived and before.get(entry["id"]) == _entry_signature(entry) and full_info == "new":
                result.documents.append(archived)  # unchanged in the listing: no new extraction
            else:
                wanted.append((entry["id"], video))
        extracted = fetcher.map(lambda job: fetcher.fetch_or_keep(
            Wanted(NAME, job[0], job[1], extract_flat=False), result, optional=True,
            validate=_info_dict), wanted)
        result.documents.extend(doc for doc in extracted if doc)
    _fetch_captions(fetcher, config, result)
    return result


def _unchanged(fetcher: Fetcher, doc: RawDocument) -> bool:
    """A reused archived info dict, or a fresh one identical to the archived one."""
    if doc.id is not None:
        return True
    previous = fetcher.last_version(NAME, "GET", doc.url, None)
    return previous is not None and previous.sha256 == doc.sha256


def caption_settings(config: dict[str, Any]) -> tuple[bool, list[str]]:
    captions = config.get("captions", {})
    return bool(captions.get("enabled", True)), list(captions.get("languages", ["en"]))


def _fetch_captions(fetcher: Fetcher, config: dict[str, Any], result: FetchResult) -> None:
    """The chosen caption track of every video with full info, fetched through
    the same client and archive. A video whose full info was reused (unchanged)
    reuses its archived track; error answers (404) are archived as they came,
    so the talk can say why it has no transcript."""
    enabled, languages = caption_settings(config)
    if not enabled:
        return
    jobs = []
    for doc in list(result.documents):
        info = doc.json()
        if not is_video_info(info):
            continue
        track = choose_track(info, languages)
        if track is None:
            continue
        archived = fetcher.last_version(NAME, "GET", track.url, None)
        if archived is not None and _unchanged(fetcher, doc):
            result.documents.append(archived)  # the video did not change, nor did its track
        else:
            jobs.append((info["id"], track.url))

    def fetch_track(job: tuple[str, str]) -> RawDocument | None:
        video_id, url = job
        try:
            return fetcher.request(NAME, "GET", url, accept_errors=True)
        except FetchError as exc:
            result.problems.append(Problem(NAME, video_id, f"captions: {exc}"))
            return None

    result.documents.extend(doc for doc in fetcher.map(fetch_track, jobs) if doc)


def _date(info: dict[str, Any]) -> str | None:
    """upload_date (YYYYMMDD) from full info; flat entries may carry a timestamp instead."""
    upload = info.get("upload_date")
    if isinstance(upload, str) and re.fullmatch(r"\d{8}", upload):
        return f"{upload[:4]}-{upload[4:6]}-{upload[6:]}"
    stamp = info.get("release_timestamp") or info.get("timestamp")
    if isinstance(stamp, (int, float)):
        return datetime.fromtimestamp(stamp, timezone.utc).date().isoformat()
    return None


# A date read from a listing entry's timestamp, not a full info dict's upload_date.
APPROXIMATE_DATE = shared_origin({"date": "approximate, from the listing"})


def _item(info: dict[str, Any], series: str | None) -> TalkItem:
    video_id = info["id"]
    date = _date(info)
    title = (info.get("title") or "").strip()
    approximate = date is not None and not info.get("upload_date")
    return TalkItem(
        source=NAME, key=video_id, title=title, url=watch_url(video_id), url_kind="video", series=series,
        number=lecture_number(title), date=date, year=int(date[:4]) if date else None,
        duration_s=int(info["duration"]) if isinstance(info.get("duration"), (int, float)) else None,
        description=(info.get("description") or None), tags=list(info.get("tags") or []),
        youtube_id=video_id, chapters=_chapters(info),
        **({"field_origin": APPROXIMATE_DATE} if approximate else {}))


def _chapters(info: dict[str, Any]) -> list[Chapter]:
    return [Chapter(float(c.get("start_time") or 0),
                    float(c["end_time"]) if c.get("end_time") is not None else None,
                    (c.get("title") or "").strip())
            for c in info.get("chapters") or [] if isinstance(c, dict)]


def _attach_transcript(item: TalkItem, info: dict[str, Any], captions: dict[str, RawDocument],
                       config: dict[str, Any], result: ParseResult) -> None:
    """Segments and the transcript's status ("en (automatic)", or why there is none)."""
    enabled, languages = caption_settings(config)
    track = choose_track(info, languages) if enabled else None
    status = Transcript()
    doc = captions.get(track.url) if track else None
    if not enabled:
        status.reason = "captions are off for this source"
    elif track is None:
        status.reason = "no caption track listed"
    elif doc is None:
        status.reason = "caption track not fetched (see gputalks status)"
    elif not 200 <= doc.status < 300:
        status.reason = f"caption track answered HTTP {doc.status}"
    else:
        try:
            item.segments = parse_captions(doc.text(), track.ext)
            status.language, status.automatic = track.language, track.automatic
        except ParseError as exc:
            status.reason = str(exc)
    if status.reason and track is not None:
        result.problems.append(Problem(NAME, item.key, f"no transcript: {status.reason}", severity="warning"))
    item.transcript = status


def configured_documents(documents: list[RawDocument], config: dict[str, Any]) -> list[RawDocument]:
    """The documents the config still asks for: configured listings and videos,
    the videos those listings hold, and caption tracks."""
    follows = {f["url"] for f in config.get("follow", [])}
    listed = {entry["id"] for doc in documents if doc.url in follows
              for entry in _entries(_json_or_empty(doc))}
    return [d for d in documents if d.url in follows or youtube_id_from_url(d.url) in listed
            or not youtube_id_from_url(d.url)]


def _json_or_empty(doc: RawDocument) -> dict[str, Any]:
    try:
        info = doc.json()
    except ParseError:
        return {}
    return info if isinstance(info, dict) else {}


def parse(documents: list[RawDocument], config: dict[str, Any]) -> ParseResult:
    """Listing entries, completed by full info dicts where they were fetched."""
    result = ParseResult()
    follows = {f["url"]: f for f in config.get("follow", [])}
    series_of: dict[str, str | None] = {}
    listed: dict[str, dict[str, Any]] = {}
    full: dict[str, dict[str, Any]] = {}
    captions = {doc.url: doc for doc in documents if doc.url not in follows and not youtube_id_from_url(doc.url)}
    for doc in documents:
        if doc.url in captions:
            continue
        info = doc.json()
        if not isinstance(info, dict):
            raise ParseError(f"{doc.url}: expected a yt-dlp info dict, got {type(info).__name__}")
        follow = follows.get(doc.url, {})
        if info.get("_type") == "playlist" or "entries" in info:
            for entry in _entries(info):
                listed.setdefault(entry["id"], entry)
                series_of.setdefault(entry["id"], follow.get("series"))
            if not _entries(info):
                result.problems.append(Problem(NAME, doc.url, "listing has no entries", severity="warning"))
        elif info.get("id"):
            full[info["id"]] = info
            if follow:
                series_of[info["id"]] = follow.get("series")
        else:
            raise ParseError(f"{doc.url}: info dict without id or entries")
    for video_id in list(dict.fromkeys([*listed, *full])):
        info = {**listed.get(video_id, {}), **{k: v for k, v in full.get(video_id, {}).items() if v is not None}}
        title = (info.get("title") or "").strip()
        if title.lower() in UNAVAILABLE_TITLES or info.get("availability") in ("private", "needs_auth"):
            result.problems.append(Problem(NAME, video_id, f"video unavailable ({title or info.get('availability')})"))
            continue
        item = _item(info, series_of.get(video_id))
        item.full_info = video_id in full
        if video_id in full:
            _attach_transcript(item, full[video_id], captions, config, result)
        if item.duration_s is None:
            result.problems.append(Problem(NAME, video_id, f"'{title}': no duration", severity="warning"))
        result.items.append(item)
    return result
