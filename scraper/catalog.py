"""The GTC conference catalog (RainFocus): paged search answers, one item per session.

Catalog entries are sessions as the event announced them; the linker joins one
to its On-Demand session when title and year agree.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote_plus

from .http import Fetcher, Wanted
from .ondemand import NAME, is_catalog, normalise_event
from .records import FetchResult, ParseError, Problem, RawDocument, SpeakerRef, TalkItem
from .titles import speaker_name

CATALOG = "https://events.rainfocus.com/api/search"
CATALOG_FORM = "type=session&browserTimezone=UTC&catalogDisplay=list"
SESSION_URL = "https://www.nvidia.com/gtc/session-catalog/?search={title}"


def fetch_catalog(fetcher: Fetcher, catalog: dict[str, Any], headers: dict[str, str],
                  result: FetchResult, url: str = CATALOG) -> list[RawDocument]:
    """Page through a RainFocus catalog search until done, with a cap and a polite delay."""
    event = catalog.get("event", "catalog")
    send = {**headers, "rfapiprofileid": catalog.get("rfapiprofileid", ""),
            "rfwidgetid": catalog.get("rfwidgetid", ""), "Accept": "application/json"}
    documents: list[RawDocument] = []
    offset, total = 0, None
    for page in range(int(catalog.get("max_pages", 50))):
        form = CATALOG_FORM if offset == 0 else f"{CATALOG_FORM}&from={offset}"
        if page and catalog.get("delay", 1.0):
            time.sleep(float(catalog.get("delay", 1.0)))
        doc = fetcher.fetch_or_keep(Wanted(NAME, f"catalog {event} from={offset}", url, "POST", form, send),
                                    result, validate=lambda doc: catalog_page(doc.json()))
        if doc is None:
            break
        documents.append(doc)
        try:
            items, page_total = catalog_page(doc.json())
        except ParseError as exc:
            result.problems.append(Problem(NAME, f"catalog {event}", str(exc)))
            break
        total = page_total if page_total is not None else total
        offset += len(items)
        if not items or (total is not None and offset >= total):
            break
    else:
        result.problems.append(Problem(NAME, f"catalog {event}", f"stopped at the cap of "
                                f"{catalog.get('max_pages', 50)} pages", severity="warning"))
    return documents


def catalog_page(data: Any) -> tuple[list[dict[str, Any]], int | None]:
    """A search page's items and total: `sectionList[0]` on the first page, top level after."""
    if not isinstance(data, dict):
        raise ParseError("catalog search: expected a JSON object")
    if data.get("sectionList"):
        section = data["sectionList"][0]
        return list(section.get("items") or []), section.get("total")
    if "items" in data:
        return list(data.get("items") or []), data.get("total")
    raise ParseError("catalog search: no sectionList or items (did the response shape change?)")


def parse_catalogs(documents: list[RawDocument], config: dict[str, Any],
                   problems: list[Problem]) -> list[TalkItem]:
    """Catalog entries. Documents come in fetch order, and each catalog's first
    page (the one with `sectionList`) starts the next configured catalog."""
    catalogs = config.get("catalogs", [])
    url_template = config.get("catalog_session_url", SESSION_URL)
    items: dict[str, TalkItem] = {}
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
        event, year = normalise_event(catalogs[index].get("event") if index < len(catalogs) else None)
        for entry in entries:
            session_id, title = entry.get("sessionID"), (entry.get("title") or "").strip()
            if not session_id or not title:
                problems.append(Problem(NAME, "catalog", f"catalog entry without id or title: {entry!r:.80}"))
                continue
            speakers = [SpeakerRef(speaker_name(p["fullName"]), bio=p.get("globalBio") or None,
                                   affiliation=_affiliation(p))
                        for p in entry.get("participants") or [] if (p.get("fullName") or "").strip()]
            key = f"catalog-{session_id}"
            items.setdefault(key, TalkItem(
                source=NAME, key=key, title=title, series="GTC", event=event, year=year,
                description=entry.get("abstract") or None, speakers=speakers,
                url=url_template.format(title=quote_plus(title), id=session_id), url_kind="catalog",
                from_catalog=True))
    return list(items.values())


def _affiliation(participant: dict) -> str | None:
    """"Senior Engineer, NVIDIA": the participant's job title and company, where given."""
    parts = [(participant.get(key) or "").strip() for key in ("jobTitle", "companyName")]
    return ", ".join(part for part in parts if part) or None
