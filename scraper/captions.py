"""Captions: choosing a video's track, and cutting its WebVTT into searchable segments.

yt-dlp lists tracks in an info dict's `subtitles` (made by people) and
`automatic_captions` (speech recognition), by language, each with formats.
A human track is preferred, English first. The WebVTT is parsed with
webvtt-py; automatic tracks repeat each line as the next one rolls in, so
repeated lines are dropped, then cues are grouped into segments of about
30-60 s, cut on cue boundaries.
"""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass
from typing import Any

import webvtt
from webvtt.errors import MalformedCaptionError, MalformedFileError

from .records import ParseError, Segment

TARGET_S, MAX_S = 30.0, 60.0
TAG_RE = re.compile(r"<[^>]*>")


@dataclass
class Track:
    language: str
    automatic: bool
    url: str
    ext: str


def choose_track(info: dict[str, Any], languages: list[str]) -> Track | None:
    """The best WebVTT track: human before automatic, then by `languages` order
    (a language matches its variants: "en" takes "en-US"), then any language."""
    def pick(tracks: dict[str, Any] | None, automatic: bool) -> Track | None:
        tracks = tracks or {}
        ranked = sorted(tracks, key=lambda lang: next(
            (n for n, wanted in enumerate(languages) if lang == wanted or lang.startswith(wanted + "-")),
            len(languages)))
        for lang in ranked:
            if automatic and "-" in lang and lang.split("-")[0] in tracks:
                continue  # translated automatic tracks ("en-fr"): the original is better
            for fmt in tracks[lang] or []:
                if fmt.get("ext") == "vtt" and fmt.get("url"):
                    return Track(lang, automatic, fmt["url"], "vtt")
        return None

    human = pick(info.get("subtitles"), automatic=False)
    if human and _wanted(human.language, languages):
        return human
    auto = pick(info.get("automatic_captions"), automatic=True)
    if auto and _wanted(auto.language, languages):
        return auto
    return human or auto


def _wanted(language: str, languages: list[str]) -> bool:
    return any(language == w or language.startswith(w + "-") for w in languages)


def _seconds(timestamp: str) -> float:
    hours, minutes, seconds = ("0:" * (2 - timestamp.count(":")) + timestamp).split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def parse_vtt(text: str) -> list[Segment]:
    """Segments of about 30-60 s; ParseError when the file is not WebVTT."""
    try:
        captions = webvtt.from_buffer(io.StringIO(text))
    except (MalformedFileError, MalformedCaptionError, ValueError) as exc:
        raise ParseError(f"captions are not valid WebVTT ({exc})") from exc
    lines: list[tuple[float, float, str]] = []
    recent: list[str] = []
    for caption in captions:
        start, end = _seconds(caption.start), _seconds(caption.end)
        for raw in caption.raw_text.splitlines():
            line = " ".join(html.unescape(TAG_RE.sub("", raw)).split())
            if not line or line in recent:
                continue  # empty, or a rolling repeat of a line already taken
            lines.append((start, end, line))
            recent = (recent + [line])[-3:]
    if not lines and captions:
        raise ParseError("captions hold no text")
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
