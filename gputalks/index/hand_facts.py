"""Facts a maintainer set by hand (overrides.toml `[[facts]]`) laid over a merged talk: each
given field wins over every source, and the talk's `field_sources` says "set by hand" with where
a reader can check it. An entry the sources now agree with is said to be stale, so it can go."""

from __future__ import annotations

import json
from typing import Any

from gputalks.durations import parse_length
from gputalks.index.merge import SORTED_JSON, MergedTalk, duration_bucket, json_list, speaker_id
from gputalks.scraper.records import Problem, SpeakerRef

FIELDS = ("speakers", "date", "description", "event", "series", "topics", "length")
SET_BY_HAND = "set by hand"


def _now(talk: MergedTalk, name: str) -> Any:
    """What the sources gave for the field, in the form the entry gives it."""
    row = talk.row
    if name == "speakers":
        return [s.name for s in talk.speakers]
    if name == "topics":
        return json.loads(row.get("topics") or "[]")
    if name == "length":
        return row.get("duration_s")
    return row.get(name)


def apply_facts(talk: MergedTalk, facts: dict[str, Any], where: str) -> list[Problem]:
    """Lay the entry's fields over the talk; a note for each field the sources now give alike."""
    stale, sources = [], json.loads(talk.row.get("field_sources") or "{}")
    for name in (n for n in FIELDS if facts.get(n) is not None):
        value = parse_length(facts[name]) if name == "length" else facts[name]
        if _now(talk, name) == value:
            stale.append(name)
        if name == "speakers":
            talk.speakers = [SpeakerRef(n) for n in dict.fromkeys(value) if speaker_id(n)]
            talk.row["speakers"] = json_list(tuple(s.name for s in talk.speakers))
            talk.row["speaker_names"] = ", ".join(s.name for s in talk.speakers) or None
        elif name == "topics":
            talk.row["topics"] = json_list(tuple(value))
        elif name == "length":
            talk.row["duration_s"], talk.row["duration_bucket"] = value, duration_bucket(value)
        else:
            talk.row[name] = value
            if name == "date":
                talk.row["year"] = int(value[:4])
        sources["duration_s" if name == "length" else name] = f"{SET_BY_HAND} ({facts['source']})"
    talk.row["field_sources"] = SORTED_JSON(sources)
    if not stale:
        return []
    return [Problem("overrides", talk.row["id"], f"{where}: [[facts]] {', '.join(stale)}: the sources now give the same; "
                    "the entry can go", severity="warning")]
