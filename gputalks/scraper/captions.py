"""Captions: choosing a video's track, and cutting its WebVTT into searchable segments.

yt-dlp lists tracks in an info dict's `subtitles` (made by people) and
`automatic_captions` (speech recognition), by language, each with formats.
A human track is preferred, English first; of its formats, only direct text
files are taken (WebVTT, then SRT, then YouTube's json3), never an HLS
playlist (`protocol: m3u8_native`, which recent yt-dlp lists as `vtt`).
WebVTT and SRT are read by webvtt-py, json3 with the json module; automatic
tracks repeat each line as the next one rolls in, so repeated lines are
dropped, then cues are grouped into segments of about 30-60 s, cut on cue
boundaries.
"""

from __future__ import annotations

import html
import io
import json
import re
from dataclasses import dataclass
from typing import Any

import webvtt
from webvtt.errors import MalformedCaptionError, MalformedFileError

from gputalks.scraper.records import ParseError, Segment

TARGET_S, MAX_S = 30.0, 60.0
FORMATS = ("vtt", "srt", "json3")  # in order of preference
Line = tuple[float, float, str]
TAG_RE = re.compile(r"<[^>]*>")


@dataclass
class Track:
    language: str
    automatic: bool
    url: str
    ext: str


def choose_track(info: dict[str, Any], languages: list[str]) -> Track | None:
    """The best caption track: human before automatic, then by `languages` order
    (a language matches its variants: "en" takes "en-US"), then any language;
    within a language, the first direct text format of FORMATS. Among automatic
    tracks the video's own language comes first (`<lang>-orig`, or the video's
    `language`), and YouTube's machine translations (`tlang=` in the URL: an
    "en" track of a German talk) are never taken: the stored language is the
    language really spoken."""
    spoken = info.get("language")

    def rank(lang: str, automatic: bool) -> tuple:
        wanted = next((n for n, w in enumerate(languages) if lang == w or lang.startswith(w + "-")),
                      len(languages))
        original = automatic and (lang.endswith(ORIGINAL_SUFFIX) or lang == spoken)
        return (not original, wanted) if automatic else (wanted,)

    def pick(tracks: dict[str, Any] | None, automatic: bool) -> Track | None:
        tracks = tracks or {}
        for lang in sorted(tracks, key=lambda lang: rank(lang, automatic)):
            own = lang.removesuffix(ORIGINAL_SUFFIX)
            if automatic and not lang.endswith(ORIGINAL_SUFFIX) and "-" in lang and own.split("-")[0] in tracks:
                continue  # translated automatic tracks ("en-fr"): the original is better
            direct = [f for f in tracks[lang] or [] if isinstance(f, dict) and f.get("url")
                      and "tlang=" not in f["url"]
                      and not str(f.get("protocol") or "").startswith(("m3u8", "http_dash_segments"))]
            for ext in FORMATS:
                fmt = next((f for f in direct if f.get("ext") == ext), None)
                if fmt:
                    return Track(own, automatic, fmt["url"], ext)
        return None

    human = pick(info.get("subtitles"), automatic=False)
    if human and _wanted(human.language, languages):
        return human
    auto = pick(info.get("automatic_captions"), automatic=True)
    if auto and (_wanted(auto.language, languages) or not human):
        return auto
    return human or auto


ORIGINAL_SUFFIX = "-orig"  # yt-dlp's key for the automatic track of the language spoken


def _wanted(language: str, languages: list[str]) -> bool:
    return any(language == w or language.startswith(w + "-") for w in languages)


def _seconds(timestamp: str) -> float:
    hours, minutes, seconds = ("0:" * (2 - timestamp.count(":")) + timestamp).split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def parse_vtt(text: str) -> list[Segment]:
    """Segments of about 30-60 s; ParseError when the file is not WebVTT."""
    return parse_captions(text, "vtt")


def parse_captions(text: str, ext: str) -> list[Segment]:
    """Segments of a caption file in one of FORMATS; ParseError when it is not one."""
    if ext == "json3":
        cues = _json3_cues(text)
    else:
        try:
            captions = webvtt.from_buffer(io.StringIO(text), format=ext)
        except (MalformedFileError, MalformedCaptionError, ValueError, IndexError) as exc:
            name = "WebVTT" if ext == "vtt" else ext.upper()
            raise ParseError(f"captions are not valid {name} ({exc})") from exc
        cues = [(_seconds(c.start), _seconds(c.end), c.raw_text) for c in captions]
    lines: list[Line] = []
    recent: list[str] = []
    for start, end, text_of_cue in cues:
        for raw in text_of_cue.splitlines():
            line = " ".join(html.unescape(TAG_RE.sub("", raw)).split())
            if not line or line in recent:
                continue  # empty, or a rolling repeat of a line already taken
            lines.append((start, end, line))
            recent = (recent + [line])[-3:]
    if not lines and cues:
        raise ParseError("captions hold no text")
    return _segments(lines)


def _json3_cues(text: str) -> list[Line]:
    """YouTube's json3 timed text: `events` with `tStartMs`, `dDurationMs` and `segs` of `utf8`."""
    try:
        events = json.loads(text)["events"]
        return [(e["tStartMs"] / 1000, (e["tStartMs"] + e.get("dDurationMs", 0)) / 1000,
                 "".join(seg.get("utf8", "") for seg in e["segs"]))
                for e in events if isinstance(e, dict) and e.get("segs")]
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"captions are not valid json3 ({exc})") from exc


def _segments(lines: list[Line]) -> list[Segment]:
    segments: list[Segment] = []
    current: list[tuple[float, float, str]] = []
    for line in lines:
        if current and (line[0] - current[0][0] >= TARGET_S or line[1] - current[0][0] > MAX_S):
            segments.append(_segment(current))
            current = []
        current.append(line)
    if current:
        segments.append(_segment(current))
    return segments


def _segment(lines: list[tuple[float, float, str]]) -> Segment:
    return Segment(round(lines[0][0], 3), round(max(l[1] for l in lines), 3), " ".join(l[2] for l in lines))
