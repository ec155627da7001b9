"""The merged talk: each field from the best source, and which source that was.

Duration and date come from the video, speakers and slides from the README,
abstracts and events from GTC. `field_sources` records the choice, per field.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from scraper.records import LinkRef, SpeakerRef, TalkItem

from scraper.youtube import lecture_number

from .link import TalkCluster

# field -> sources in order of preference
PRIORITY: dict[str, list[str]] = {
    "title": ["github", "gtc", "youtube"],
    "series": ["github", "gtc", "youtube"],
    "event": ["gtc", "youtube", "github"],
    "number": ["github", "youtube"],
    # A GTC talk's date is the event's (a re-upload's date is not); otherwise the video's.
    "date": ["gtc", "youtube", "github"],
    "duration_s": ["youtube", "gtc", "github"],
    "description": ["gtc", "youtube", "github"],
    "speakers": ["github", "gtc", "youtube"],
    "slides_url": ["github", "gtc", "youtube"],
}
BUCKETS = [(30 * 60, "< 30 min"), (60 * 60, "30-60 min"), (120 * 60, "1-2 h")]


@dataclass
class MergedTalk:
    """A talks row plus the rows that hang off it."""

    row: dict[str, Any]
    speakers: list[SpeakerRef] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    chapters: list[dict[str, Any]] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)


def deep_link(youtube_id: str, start_s: float) -> str:
    return f"https://www.youtube.com/watch?v={youtube_id}&t={int(start_s)}s"


def _inside(cluster_id: str, items: list[TalkItem], youtube_id: str | None):
    """(chapters, segments, transcript status text) from the video with full info."""
    video = next((i for i in items if i.source == "youtube" and i.attrs.get("full_info")), None)
    if video is None or youtube_id is None:
        return [], [], None
    chapters = [{"talk_id": cluster_id, "position": n, "start_s": float(c.get("start_time") or 0),
                 "end_s": float(c["end_time"]) if c.get("end_time") is not None else None,
                 "title": (c.get("title") or "").strip(), "deep_link": deep_link(youtube_id, c.get("start_time") or 0)}
                for n, c in enumerate(video.attrs.get("chapters") or [])]
    status = video.attrs.get("transcript") or {}
    segments = [{"talk_id": cluster_id, "position": n, **segment, "language": status.get("language"),
                 "automatic": int(bool(status.get("automatic"))),
                 "deep_link": deep_link(youtube_id, segment["start_s"])}
                for n, segment in enumerate(video.attrs.get("segments") or [])]
    if status.get("language"):
        text = f"{status['language']}{' (automatic)' if status.get('automatic') else ''}"
    else:
        text = f"no transcript: {status.get('reason', 'unknown')}" if status else None
    return chapters, segments, text


@lru_cache(maxsize=65536)
def speaker_id(name: str) -> str:
    """One id per person however sources spell them ("Nitin " = "Nitin")."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def duration_bucket(seconds: int | None) -> str | None:
    if seconds is None:
        return None
    for limit, label in BUCKETS:
        if seconds < limit:
            return label
    return "> 2 h"


def _value(item: TalkItem, name: str) -> Any:
    if name == "slides_url":
        return next((l.url for l in item.links if l.kind == "slides"), None)
    if name == "speakers":
        return item.speakers or None
    if name == "title" and item.source == "youtube" and lecture_number(item.title) is not None:
        return re.sub(r"^\W*lecture\s*\d+\s*[:.\-–—]?\s*", "", item.title, flags=re.I) or None
    value = getattr(item, name)
    return value if value not in ("", None) else None


def _pick(by_source: dict[str, list[TalkItem]], name: str) -> tuple[Any, str | None]:
    for source in PRIORITY[name]:
        for item in by_source.get(source, ()):
            value = _value(item, name)
            if value is not None:
                origin = item.field_origin.get(name)
                return value, f"{item.source}:{origin}" if origin else item.source
    return None, None


def _first_attr(items: list[TalkItem], name: str) -> Any:
    return next((i.attrs[name] for i in items if i.attrs.get(name) not in (None, "")), None)


def merge_talk(cluster: TalkCluster) -> MergedTalk:
    items = cluster.items
    by_source: dict[str, list[TalkItem]] = {}
    for item in items:
        by_source.setdefault(item.source, []).append(item)
    row: dict[str, Any] = {"id": cluster.talk_id}
    sources: dict[str, str] = {}
    for name in PRIORITY:
        row[name], origin = _pick(by_source, name)
        if origin:
            sources[name] = origin
    speakers: list[SpeakerRef] = row.pop("speakers") or []
    seen: set[str] = set()
    unique = []
    for s in speakers:
        sid = speaker_id(s.name)
        if sid and sid not in seen:
            seen.add(sid)
            unique.append(SpeakerRef(s.name.strip(), s.profile_url, s.bio))
    # The event's year for GTC talks, else the year of the chosen date.
    year = next((i.year for i in items if i.source == "gtc" and i.year), None) or (
        int(row["date"][:4]) if row.get("date") else None)
    youtube_id = _first_attr(items, "youtube_id")
    ondemand = _first_attr(items, "ondemand_url")
    source_url = next((i.url for i in items if i.url), None)
    row.update({
        "year": year,
        "duration_bucket": duration_bucket(row["duration_s"]),
        "youtube_id": youtube_id,
        "youtube_url": f"https://www.youtube.com/watch?v={youtube_id}" if youtube_id else None,
        "ondemand_url": ondemand,
        "url": (f"https://www.youtube.com/watch?v={youtube_id}" if youtube_id else None) or ondemand or source_url,
        "repo_folder": _first_attr(items, "folder"),
        "topic": _first_attr(items, "topic"),
        "level": _first_attr(items, "level"),
        "speakers": json.dumps([s.name for s in unique], ensure_ascii=False),
        "speaker_names": ", ".join(s.name for s in unique) or None,
        "sources": json.dumps(sorted({i.source for i in items})),
        "field_sources": json.dumps(sources, sort_keys=True),
    })
    chapters, segments, row["transcript"] = _inside(cluster.talk_id, items, youtube_id)
    links: dict[tuple[str, str], dict[str, Any]] = {}
    for item in items:
        for link in _item_links(item):
            links.setdefault((link.kind, link.url), {"talk_id": cluster.talk_id, "kind": link.kind,
                                                     "url": link.url, "label": link.label,
                                                     "source": item.source})
    return MergedTalk(row=row, speakers=unique, links=sorted(links.values(), key=lambda l: (l["kind"], l["url"])),
                      chapters=chapters, segments=segments)


def _item_links(item: TalkItem) -> list[LinkRef]:
    links = list(item.links)
    if item.url:
        kind = item.attrs.get("link_kind") or {"youtube": "video", "gtc": "ondemand",
                                               "github": "readme"}.get(item.source, "other")
        links.append(LinkRef(kind, item.url, item.title or None))
    return links
