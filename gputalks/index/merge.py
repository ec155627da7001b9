"""The merged talk: each field from the best source, and which source that was.

Duration and date come from the video, speakers and slides from the README,
abstracts and events from GTC. `field_sources` records the choice, per field.
"""

from __future__ import annotations

import json
from dataclasses import asdict, field
from functools import lru_cache
from typing import Any

from gputalks.scraper.records import LinkRef, SpeakerRef, TalkItem, record
from gputalks.scraper.titles import deep_link, parse_lecture_title, slugify, watch_url

from gputalks.index.link import TalkCluster
from gputalks.search.words import folder_words

# `json.dumps` with options builds an encoder on every call (0.35 s per 100,000 against 0.24).
UNICODE_JSON = json.JSONEncoder(ensure_ascii=False).encode
SORTED_JSON = json.JSONEncoder(sort_keys=True).encode


@lru_cache(maxsize=16384)
def json_list(values: tuple[str, ...]) -> str:
    """A list's JSON, encoded once per distinct list. The benchmark's 100,000 talks have 4
    distinct lists of sources, 6 of field choices and 4,552 of topics (0.5 s of encoding
    before, in the build's slower half)."""
    return json.dumps(list(values))


@lru_cache(maxsize=1024)
def _field_sources_json(choices: tuple[tuple[str, str], ...]) -> str:
    return SORTED_JSON(dict(choices))


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


@record
class MergedTalk:
    """A talks row plus the rows that hang off it."""

    row: dict[str, Any]
    speakers: list[SpeakerRef] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    chapters: list[dict[str, Any]] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)  # talk_sources: each item and how it linked
    # Its facet keys and the (code, facet, value) rows it coded first (`FacetCoder`), if coded.
    facet_keys: str | None = None
    facet_values: tuple[tuple[int, str, Any], ...] = ()


def _inside(cluster_id: str, items: list[TalkItem], youtube_id: str | None):
    """(chapters, segments, transcript status text) from the video with full info."""
    video = next((i for i in items if i.source == "youtube" and i.full_info), None)
    if video is None or youtube_id is None:
        return [], [], None
    chapters = [{"talk_id": cluster_id, "position": n, **asdict(c), "deep_link": deep_link(youtube_id, c.start_s)}
                for n, c in enumerate(video.chapters)]
    status = video.transcript
    segments = [{"talk_id": cluster_id, "position": n, **asdict(segment),
                 "chapter": chapter_at(video.chapters, segment.start_s),
                 "language": status.language if status else None,
                 "automatic": int(bool(status and status.automatic)),
                 "deep_link": deep_link(youtube_id, segment.start_s)}
                for n, segment in enumerate(video.segments)]
    return chapters, segments, status.describe() if status else None


def chapter_at(chapters, start_s: float) -> str | None:
    """The title of the chapter a segment starts in, stored on the segment so search
    inside talks needs no look-up per hit."""
    titles = [c.title for c in chapters if c.start_s <= start_s]
    return titles[-1] if titles else None


def speaker_id(name: str) -> str:
    """One id per person however sources spell them ("Nitin " = "Nitin")."""
    return slugify(name)


def duration_bucket(seconds: int | None) -> str | None:
    if seconds is None:
        return None
    for limit, label in BUCKETS:
        if seconds < limit:
            return label
    return "> 2 h"


def _slides(item: TalkItem) -> str | None:
    return next((link.url for link in item.links if link.kind == "slides"), None)


def _title(item: TalkItem) -> str | None:
    """A video's title, less a "Lecture N:" prefix (the README's title wins over it anyway)."""
    if item.source == "youtube":
        lecture = parse_lecture_title(item.title)
        if lecture is not None and lecture.number is not None:
            return lecture.title or None
    return item.title


# fields read otherwise than as the item's attribute of that name
_READ = {"slides_url": _slides, "speakers": lambda item: item.speakers or None, "title": _title}
# source -> the fields it can give, in PRIORITY's order
_FIELDS_OF = {source: [name for name, ranked in PRIORITY.items() if source in ranked]
              for source in {source for ranked in PRIORITY.values() for source in ranked}}


def _value(item: TalkItem, name: str) -> Any:
    read = _READ.get(name)
    value = read(item) if read is not None else getattr(item, name)
    return value if value not in ("", None) else None


def _chosen(items: list[TalkItem]) -> tuple[dict[str, Any], dict[str, str]]:
    """Each PRIORITY field's value, from the first item of the first source in its order that
    has one, and where it came from ("source" or "source:document")."""
    values: dict[str, Any] = dict.fromkeys(PRIORITY)
    origins: dict[str, str] = {}
    if len(items) == 1:  # most talks: their one item's values are theirs
        item = items[0]
        ranked_items = {name: (item,) for name in _FIELDS_OF.get(item.source, ())}
    else:
        by_source: dict[str, list[TalkItem]] = {}
        for item in items:
            by_source.setdefault(item.source, []).append(item)
        ranked_items = {name: [i for source in ranked for i in by_source.get(source, ())]
                        for name, ranked in PRIORITY.items()}
    for name, candidates in ranked_items.items():
        for item in candidates:
            value = _value(item, name)
            if value is not None:
                values[name] = value
                origin = item.field_origin.get(name)
                origins[name] = f"{item.source}:{origin}" if origin else item.source
                break
    return values, origins


def _first(items: list[TalkItem], name: str) -> Any:
    """The first item's non-empty value of a source-specific field."""
    for item in items:
        value = getattr(item, name)
        if value is not None and value != "":
            return value
    return None


def merge_talk(cluster: TalkCluster) -> MergedTalk:
    items = cluster.items
    chosen, sources = _chosen(items)
    row: dict[str, Any] = {"id": cluster.talk_id, **chosen}
    speakers: list[SpeakerRef] = row.pop("speakers") or []
    seen: set[str] = set()
    unique = []
    for s in speakers:
        sid = speaker_id(s.name)
        if sid and sid not in seen:
            seen.add(sid)
            unique.append(SpeakerRef(s.name.strip(), s.profile_url, s.bio, s.affiliation))
    # The event's year for GTC talks, else the year of the chosen date. A GTC talk whose only
    # date is a later upload's is dated by its event's year: a GTC Spring 2021 talk uploaded in
    # 2022 is a 2021 talk ("2021", not a made-up day).
    event_year = next((i.year for i in items if i.source == "gtc" and i.year), None)
    if event_year and row.get("date") and not sources.get("date", "").startswith("gtc") \
            and not str(row["date"]).startswith(str(event_year)):
        row["date"], sources["date"] = str(event_year), "gtc:the event's year; the video came later"
    if event_year and not row.get("date"):  # a session known by its event alone: dated by its year
        row["date"], sources["date"] = str(event_year), "gtc:the event's year"
    year = event_year or (int(row["date"][:4]) if row.get("date") else None)
    youtube_id = _first(items, "youtube_id")
    ondemand = _first(items, "ondemand_url")
    source_url = next((i.url for i in items if i.url), None)
    row.update({
        "year": year,
        "duration_bucket": duration_bucket(row["duration_s"]),
        "youtube_id": youtube_id,
        "youtube_url": watch_url(youtube_id) if youtube_id else None,
        "ondemand_url": ondemand,
        "url": (watch_url(youtube_id) if youtube_id else None) or ondemand or source_url,
        "repo_folder": _first(items, "folder"),
        "folder_words": folder_words(_first(items, "folder_files") or ()),
        "topic": _first(items, "topic"),
        "level": _first(items, "level"),
        "speakers": UNICODE_JSON([s.name for s in unique]),
        "speaker_names": ", ".join(s.name for s in unique) or None,
        "sources": json_list(tuple(sorted({i.source for i in items}))),
        "field_sources": _field_sources_json(tuple(sources.items())),
    })
    chapters, segments, row["transcript"] = _inside(cluster.talk_id, items, youtube_id)
    links: dict[tuple[str, str], dict[str, Any]] = {}
    for item in items:
        for link in _item_links(item):
            links.setdefault((link.kind, link.url), {"talk_id": cluster.talk_id, "kind": link.kind,
                                                     "url": link.url, "label": link.label,
                                                     "source": item.source})
    sources_rows = [{"source": m.source, "item_key": m.item_key, "talk_id": m.talk_id, "method": m.method,
                     "score": m.score, "url": item.url, "title": item.title}
                    for item, m in zip(items, cluster.matches)]
    return MergedTalk(row=row, speakers=unique, links=sorted(links.values(), key=lambda l: (l["kind"], l["url"])),
                      chapters=chapters, segments=segments, sources=sources_rows)


def _item_links(item: TalkItem) -> list[LinkRef]:
    links = list(item.links)
    if item.url:
        links.append(LinkRef(item.url_kind, item.url, item.title or None))
    return links
