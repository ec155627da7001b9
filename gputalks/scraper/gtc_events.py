"""GTC events named as NVIDIA names them, from a session slug's event part (`gtcsj20`) or
from an event's text ("GTC Digital April 2021"): one name per GTC, shared by its sessions."""

from __future__ import annotations

import re
import sys

EVENT_IN_SLUG_RE = re.compile(r"^gtc(?P<season>[a-z]*)(?P<year>(?:20)?\d\d)$")
# How NVIDIA names each kind of GTC, by the slug's letters.
SEASONS = {"spring": "Spring", "fall": "Fall", "digital": "Spring", "dc": "DC", "sj": "San Jose",
           "siliconvalley": "Silicon Valley", "cn": "China", "paris": "Paris", "eu": "Europe",
           "israel": "Israel", "taipei": "Taipei"}
# ... and by the words of an event's text, the more specific first.
EVENT_WORDS = (("silicon valley", "Silicon Valley"), ("san jose", "San Jose"), ("china", "China"),
               ("paris", "Paris"), ("washington", "DC"), (" dc", "DC"), ("fall", "Fall"), ("spring", "Spring"),
               ("digital", "Spring"))
SPRING_MONTHS = ("march", "april", "may")
FALL_MONTHS = ("september", "october", "november")


def normalise_event(value: str | None, slug: str | None = None) -> tuple[str | None, int | None]:
    """One name per GTC, as NVIDIA names it: "GTC Digital April 2021", `gtcspring21`, "GTC
    Spring 2021" are all ("GTC Spring 2021", 2021); `gtcsj20` and "GTC San Jose 2020" are
    "GTC San Jose 2020", `gtcsiliconvalley2019` "GTC Silicon Valley 2019", `gtccn2020` "GTC
    China 2020"; from 2023 on, spring GTC in San Jose is "GTC YYYY"."""
    if slug:
        match = EVENT_IN_SLUG_RE.match(slug.lower().split("-")[0])
        if match:
            year = int(match["year"]) if len(match["year"]) == 4 else 2000 + int(match["year"])
            season = SEASONS.get(match["season"], match["season"].title())
            return _event_name(season, year), year
    if not value:
        return None, None
    inner = re.search(r"\(([^)]*gtc[^)]*)\)", value, re.I)
    text = (inner.group(1) if inner else value).lower()
    years = re.findall(r"\b(20\d\d)\b", text)
    if "gtc" not in text or not years:
        return value.strip(), int(years[0]) if years else None
    year = int(years[0])
    season = next((name for words, name in EVENT_WORDS if words in text), "")
    if not season and any(m in text for m in FALL_MONTHS):
        season = "Fall"
    elif not season and any(m in text for m in SPRING_MONTHS):
        season = "Spring"
    return _event_name(season, year), year


def _event_name(season: str, year: int) -> str:
    if season in ("Spring", "San Jose") and year >= 2023:
        season = ""  # GTC 2023 onwards is plain "GTC YYYY" (San Jose)
    return sys.intern(f"GTC {season} {year}".replace("  ", " "))  # one string per GTC, not per session
