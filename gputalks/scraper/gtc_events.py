"""GTC as NVIDIA names it: one name per GTC, from a session slug's event part (`gtcsj20`), an
On-Demand page title's event ("GTC Digital April 2021") or a catalog's ("GTC 2026"), shared by
its sessions; and session titles without the session codes NVIDIA appends to them.

The naming table, every GTC 2009-2026: the spring conference in San Jose is "GTC YYYY" until
2015 and from 2024 ("GTC San Jose 2016-2020", "GTC Silicon Valley 2019" where a source says so);
the virtual years are "GTC Spring 2021-2023" (NVIDIA's "GTC Digital Spring/April") and "GTC Fall
2020-2022" ("GTC Digital Fall"); the regional ones are "GTC China", "GTC Europe", "GTC Japan",
"GTC Taiwan", "GTC Israel", "GTC DC" and "GTC Paris", with their year."""

from __future__ import annotations

import re
import sys

EVENT_IN_SLUG_RE = re.compile(r"^gtc(?P<season>[a-z]*)(?P<year>(?:20)?\d\d)$")
# How NVIDIA names each kind of GTC, by the slug's letters.
SEASONS = {"spring": "Spring", "fall": "Fall", "digital": "Spring", "dc": "DC", "sj": "San Jose",
           "siliconvalley": "Silicon Valley", "cn": "China", "china": "China", "paris": "Paris", "eu": "Europe",
           "europe": "Europe", "israel": "Israel", "il": "Israel", "taipei": "Taiwan", "taiwan": "Taiwan",
           "tw": "Taiwan", "japan": "Japan", "jp": "Japan"}
# ... and by the words of an event's text, the more specific first.
EVENT_WORDS = (("silicon valley", "Silicon Valley"), ("san jose", "San Jose"), ("china", "China"),
               ("paris", "Paris"), ("europe", "Europe"), ("munich", "Europe"), ("japan", "Japan"), ("tokyo", "Japan"),
               ("taiwan", "Taiwan"), ("taipei", "Taiwan"), ("israel", "Israel"), ("tel aviv", "Israel"),
               ("washington", "DC"), (" dc", "DC"), ("fall", "Fall"), ("spring", "Spring"))
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
    elif not season and (any(m in text for m in SPRING_MONTHS) or "digital" in text):
        season = "Spring"  # "GTC Digital" alone: the spring conference, held online
    return _event_name(season, year), year


def _event_name(season: str, year: int) -> str:
    if season in ("Spring", "San Jose") and (year >= 2024 or year <= 2015) or season == "San Jose" and year > 2020:
        season = ""  # the spring conference in San Jose: "GTC YYYY" until 2015 and from 2024
    elif season == "San Jose" and year == 2021:
        season = "Spring"
    return sys.intern(f"GTC {season} {year}".replace("  ", " "))  # one string per GTC, not per session


# A session code as NVIDIA appends it to titles ("... A21323", "... [S81595]", "... (DLIT71175)",
# "... S41234-CN"): its kind (S talk, SE special event, A and E fall/regional talks, P poster, CWE
# connect with the experts, DLIT/DLIW/DLIS training labs), five digits, maybe a region.
SESSION_CODE_RE = re.compile(r"\s*[-–|:]?\s*[\[(]?\b(?:SE|S|A|E|P|CWES?|DLI[TWS]?|T)\d{5}(?:-[A-Z]{2,3})?[\])]?\s*$"
                             r"|^\s*[\[(]?(?:SE|S|A|E|P|CWES?|DLI[TWS]?|T)\d{5}(?:-[A-Z]{2,3})?[\])]?\s*[-–:|]\s*", re.I)


def without_session_codes(title: str | None) -> str | None:
    """"GTC 2026 Keynote S81595" -> "GTC 2026 Keynote", "Advanced CUDA A21323" -> "Advanced
    CUDA": every session-code form, at either end; a title's own "B200" or "A6000" stays."""
    if not title:
        return title
    return SESSION_CODE_RE.sub("", title).strip() or title
