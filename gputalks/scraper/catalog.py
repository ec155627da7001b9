"""The GTC conference catalogs (RainFocus): paged search answers, one item per session.

A catalog entry is a session as the event announced it. Its code (`S81595`) with the
event's code (`gtc26`) names its On-Demand recording (`gtc26-s81595`): the linker joins
the two by that slug (method `session-code`), and by title and year only where a
catalog gives no code. A session the catalog marks as not recorded stays catalog-only.
Each catalog may take only some sessions (`topics`, `levels`, `types`, `keywords`).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from functools import cached_property
from datetime import datetime
from typing import Any
from urllib.parse import quote_plus

from gputalks.scraper.http import Fetcher, Wanted
from gputalks.scraper.gtc_events import without_session_codes
from gputalks.scraper.ondemand import NAME, PAGE, SLUG_RE, is_catalog, normalise_event, parse_date, parse_duration
from gputalks.scraper.records import FetchResult, ParseError, Problem, RawDocument, SpeakerRef, TalkItem
from gputalks.scraper.titles import speaker_name

CATALOG = "https://events.rainfocus.com/api/search"
CATALOG_FORM = "type=session&browserTimezone=UTC&catalogDisplay=list"
SEARCH_URL = "https://www.nvidia.com/gtc/session-catalog/?search={title}"
SESSION_URL = "https://www.nvidia.com/gtc/session-catalog/sessions/{slug}/"
# What RainFocus's own codes mean (it answers HTTP 200 with responseCode other than "0").
REFUSALS = {"101": "the event's catalog ids are wrong or expired",
            "107": "the catalog's token is invalid or expired"}
FIX = ("copy the rfapiprofileid/rfwidgetid pair the event's catalog page sends (browser dev tools, "
       "Network tab, the POST to /api/search) into its [[gtc.catalogs]] entry")


class CatalogRefused(ParseError):
    """RainFocus answered, but refused: wrong or expired ids, an expired token."""


def fetch_catalog(fetcher: Fetcher, catalog: dict[str, Any], headers: dict[str, str],
                  result: FetchResult, url: str = CATALOG) -> list[RawDocument]:
    """Page through a RainFocus catalog search (`from=N` after the first page) until the
    total is reached or a page comes back empty, with a cap and a polite delay. The first
    page is the source's listing: when it fails or is refused, the source fails."""
    event = catalog.get("event", "catalog")
    ids = f"rfapiprofileid {catalog.get('rfapiprofileid', '')!r}, rfwidgetid {catalog.get('rfwidgetid', '')!r}"
    send = {**headers, "rfapiprofileid": catalog.get("rfapiprofileid", ""),
            "rfwidgetid": catalog.get("rfwidgetid", ""), "Accept": "application/json"}
    documents: list[RawDocument] = []
    offset, total = 0, None
    seen: dict[str, int] = {}  # each page's items (as JSON) -> the offset it was asked at
    for page in range(int(catalog.get("max_pages", 50))):
        form = CATALOG_FORM if offset == 0 else f"{CATALOG_FORM}&from={offset}"
        if page and catalog.get("delay", 1.0):
            time.sleep(float(catalog.get("delay", 1.0)))
        doc = fetcher.fetch_or_keep(Wanted(NAME, f"catalog {event} from={offset}", url, "POST", form, send),
                                    result, validate=lambda doc: catalog_page(doc.json(), ids),
                                    critical=offset == 0)
        if doc is None:
            break
        documents.append(doc)
        try:
            items, page_total = catalog_page(doc.json(), ids)
        except ParseError as exc:
            result.problems.append(Problem(NAME, f"catalog {event}", str(exc)))
            break
        total = page_total if page_total is not None else total
        fingerprint = json.dumps(items, sort_keys=True)
        if items and fingerprint in seen:  # the catalog ignores `from=`: paging on would only repeat it
            _cut_short(result, event, f"the page from={offset} repeats the page from={seen[fingerprint]}; "
                                      "stopped paging (the catalog ignores from=?)")
            break
        seen[fingerprint] = offset
        offset += len(items)
        if not items or (total is not None and offset >= total):
            break
    else:
        _cut_short(result, event, f"stopped at the cap of {catalog.get('max_pages', 50)} pages "
                                  f"({offset} of {total if total is not None else 'an unknown number of'} sessions); "
                                  "raise max_pages for it")
    return documents


def _cut_short(result: FetchResult, event: str, reason: str) -> None:
    """A catalog read only in part: the source is partial, and says why in one line."""
    result.problems.append(Problem(NAME, f"catalog {event}", reason))
    result.failed += 1


def catalog_page(data: Any, ids: str = "the configured ids") -> tuple[list[dict[str, Any]], int | None]:
    """A search page's items and total: `sectionList[0]` on the first page, top level after."""
    if not isinstance(data, dict):
        raise ParseError("catalog search: expected a JSON object")
    code = str(data.get("responseCode", "0"))
    if code != "0":
        meaning = REFUSALS.get(code, "RainFocus refused the search")
        raise CatalogRefused(f"catalog search: RainFocus answered {code} {data.get('responseMessage') or ''}"
                             .rstrip() + f": {meaning} ({ids}); {FIX}")
    if data.get("sectionList"):
        section = data["sectionList"][0]
        return list(section.get("items") or []), section.get("total")
    if "items" in data:
        return list(data.get("items") or []), data.get("total")
    raise ParseError("catalog search: no sectionList or items (did the response shape change?)")


@dataclass(frozen=True)
class CatalogFilter:
    """Which sessions a catalog takes, on the catalog's own attributes: any of the topics
    (part of "Area - Subarea"), any of the levels, any of the session types, and any keyword,
    each kind an empty list taking every session. A keyword is a term: "CUDA" is not "CUDA-Q",
    "CUDA-X" or "CUDA-accelerated" (write those to take them). It counts in the title, or in the
    abstract when the abstract names the keywords `mentions` times: a passing "optimized CUDA
    kernels" does not make a retail talk a CUDA talk. `ignore` phrases are not keywords."""

    topics: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    mentions: int = 1
    ignore: tuple[str, ...] = ()  # phrases that only look like a keyword ("Triton Inference Server")

    @classmethod
    def of(cls, spec: dict[str, Any]) -> "CatalogFilter":
        lists = (tuple(word.casefold() for word in spec.get(name) or ())
                 for name in ("topics", "levels", "types", "keywords"))
        return cls(*lists, int(spec.get("mentions", 1)), tuple(text.casefold() for text in spec.get("ignore") or ()))

    @cached_property
    def _terms(self) -> re.Pattern:
        """Any keyword as a term, the longest first, so "CUDA kernels" is one mention, not two."""
        words = sorted(self.keywords, key=len, reverse=True)
        return re.compile(rf"(?<![\w-])(?:{'|'.join(map(re.escape, words))})(?![\w-])")

    def _named(self, text: str) -> int:
        """How many times the text names a keyword, as a term (not inside a hyphenated word)."""
        for phrase in self.ignore:
            text = text.replace(phrase, " ")
        return len(self._terms.findall(text))

    def takes(self, session: "CatalogSession") -> bool:
        return all((
            not self.topics or any(part in (session.topic or "").casefold() for part in self.topics),
            not self.levels or any(level in (session.level or "").casefold() for level in self.levels),
            not self.types or (session.type or "").casefold() in self.types,
            not self.keywords or self._named(session.title.casefold()) > 0
            or self._named((session.abstract or "").casefold()) >= self.mentions,
        ))


@dataclass(frozen=True)
class CatalogSession:
    """One catalog entry, as read from a RainFocus item."""

    session_id: str
    title: str
    code: str | None
    event_code: str | None
    abstract: str | None
    topic: str | None
    level: str | None
    type: str | None
    recorded: bool
    times: tuple[dict[str, Any], ...]
    length: Any
    speakers: tuple[SpeakerRef, ...]

    @classmethod
    def read(cls, entry: dict[str, Any], event_code: str | None) -> "CatalogSession | None":
        session_id, title = entry.get("sessionID"), without_session_codes((entry.get("title") or "").strip()) or ""
        if not session_id or not title:
            return None
        attributes: dict[str, str] = {}
        for attribute in entry.get("attributevalues") or []:
            if isinstance(attribute, dict) and attribute.get("attribute"):
                attributes.setdefault(str(attribute["attribute"]).casefold(), str(attribute.get("value") or ""))
        return cls(
            session_id=str(session_id), title=title, code=(entry.get("code") or "").strip() or None,
            event_code=(entry.get("eventCode") or event_code or "").strip().lower() or None,
            abstract=entry.get("abstract") or None, topic=attributes.get("topic") or None,
            level=attributes.get("technical level") or None,
            type=attributes.get("session type") or entry.get("type") or None,
            recorded=attributes.get("recording", "").casefold() != "no",
            times=tuple(t for t in entry.get("times") or [] if isinstance(t, dict)),
            length=entry.get("length"), speakers=_speakers(entry.get("participants") or []))

    @property
    def slug(self) -> str | None:
        """The On-Demand slug its code names (`gtc26` + `S81595` -> `gtc26-s81595`)."""
        if not self.code or not self.event_code:
            return None
        slug = f"{self.event_code}-{self.code}".lower()
        return slug if SLUG_RE.match(slug) else None

    def date(self, year: int | None) -> str | None:
        """The session's day: `utcStartTime`, else the catalog's "Monday, March 16" in the event's year."""
        for time_slot in self.times:
            if found := parse_date(time_slot.get("utcStartTime")):
                return found
            if year and time_slot.get("date"):
                try:
                    return datetime.strptime(f"{time_slot['date']} {year}", "%A, %B %d %Y").date().isoformat()
                except ValueError:
                    continue
        return None


def _speakers(participants: list[Any]) -> tuple[SpeakerRef, ...]:
    """The participants in their display order, each person once ("Stephen Jones (SW)" is
    Stephen Jones), with job title and company as the affiliation."""
    ordered = sorted((p for p in participants if isinstance(p, dict)),
                     key=lambda p: p.get("displayorder") if isinstance(p.get("displayorder"), int) else 999)
    speakers: dict[str, SpeakerRef] = {}
    for p in ordered:
        full = p.get("fullName") or p.get("globalFullName") or f"{p.get('firstName') or ''} {p.get('lastName') or ''}"
        name = speaker_name(full) if full.strip() else ""
        if name and name.casefold() not in speakers:
            speakers[name.casefold()] = SpeakerRef(name, bio=p.get("globalBio") or p.get("bio") or None,
                                                   affiliation=_affiliation(p))
    return tuple(speakers.values())


def _affiliation(participant: dict) -> str | None:
    """"Senior Engineer, NVIDIA": the participant's job title and company, where given."""
    parts = [(participant.get(key) or "").strip() for key in ("jobTitle", "companyName")]
    return ", ".join(part for part in parts if part) or None


def catalog_sessions(documents: list[RawDocument], config: dict[str, Any], problems: list[Problem]
                     ) -> list[tuple[dict[str, Any], CatalogSession]]:
    """Each catalog's sessions that its filters take, with the catalog's config. Documents come
    in fetch order, and each catalog's first page (the one with `sectionList`) starts the next
    configured catalog."""
    catalogs = config.get("catalogs", [])
    taken: list[tuple[dict[str, Any], CatalogSession]] = []
    index = -1
    for doc in filter(is_catalog, documents):
        try:
            data = doc.json()
            entries, _ = catalog_page(data)
        except ParseError as exc:
            problems.append(Problem(NAME, "catalog", str(exc)))
            continue
        if data.get("sectionList") or index < 0:
            index += 1
        spec = catalogs[index] if index < len(catalogs) else {}
        wanted = CatalogFilter.of(spec)
        for entry in entries:
            session = CatalogSession.read(entry, spec.get("event_code")) if isinstance(entry, dict) else None
            if session is None:
                problems.append(Problem(NAME, "catalog", f"catalog entry without id or title: {entry!r:.80}"))
            elif wanted.takes(session):
                taken.append((spec, session))
    return taken


def recorded_slugs(documents: list[RawDocument], config: dict[str, Any]) -> list[str]:
    """The On-Demand sessions to fetch for catalogs with `recordings = true`: every recorded
    session they take whose code names a slug (no catalog page is read when none follows them)."""
    if not any(spec.get("recordings") for spec in config.get("catalogs", [])):
        return []
    return list(dict.fromkeys(session.slug for spec, session in catalog_sessions(documents, config, [])
                              if spec.get("recordings") and session.recorded and session.slug))


def parse_catalogs(documents: list[RawDocument], config: dict[str, Any],
                   problems: list[Problem]) -> list[TalkItem]:
    """Catalog entries as items: keyed by their On-Demand slug where the code names one."""
    items: dict[str, TalkItem] = {}
    for spec, session in catalog_sessions(documents, config, problems):
        event, year = normalise_event(spec.get("event"))
        slug = session.slug
        key = f"catalog-{slug or session.session_id}"
        template = config.get("catalog_session_url", SESSION_URL)
        if not slug and "{slug}" in template:
            template = SEARCH_URL  # no code: the catalog's search for the title
        url = template.format(slug=slug, title=quote_plus(session.title), id=session.session_id)
        items.setdefault(key, TalkItem(
            source=NAME, key=key, title=session.title, series="GTC", event=event, year=year,
            date=session.date(year), duration_s=parse_duration(session.length),
            description=session.abstract, speakers=session.speakers, url=url, url_kind="catalog",
            from_catalog=True, session_slug=slug,
            ondemand_url=PAGE.format(slug=slug) if slug and session.recorded else None,
            topic=session.topic, level=session.level))
    return list(items.values())
