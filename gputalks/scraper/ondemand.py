"""NVIDIA On-Demand sessions: the session API, with the session page as fallback.

Session slugs like `gtcspring21-s31151` (case normalised: the wild has
`gtc25-S72571`). The API's `sessionData` gives title, date, length, abstract,
speakers and attributes; the page (`<title>` "Title | Event | NVIDIA
On-Demand", og:* and event_sessionId meta tags) fills what the API lacks or
replaces it when it fails. `field_origin` records which one supplied each field.
Published sessions rarely change, so each is asked again once every
`recheck_days`, spread over the days (`due_today`).
"""

from __future__ import annotations

import re
import sys
import zlib
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import parse_qs, quote, urlparse

if TYPE_CHECKING:
    from bs4 import BeautifulSoup

from gputalks.scraper.http import Fetcher, Wanted
from gputalks.scraper.records import FetchResult, ParseError, Problem, RawDocument, SpeakerRef, TalkItem, shared_origin
from gputalks.scraper.gtc_events import normalise_event, without_session_codes
from gputalks.scraper.titles import speaker_name

NAME = "gtc"
API = "https://api-prod.nvidia.com/services/nod/api/v1/session"
PAGE = "https://www.nvidia.com/en-us/on-demand/session/{slug}/"
BROWSER_UA = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/126.0 Safari/537.36")
DEFAULT_HEADERS = {"Origin": "https://www.nvidia.com", "Referer": "https://www.nvidia.com/",
                   "User-Agent": BROWSER_UA}
# Every slug form seen in public links: gtc24-s62400, gtc25-dlit71175, gtc26-cwes81481,
# gtcdc25-dct51159, gtcparis25-gp1085, gtcspring21-s31151, gtcfall20-a21323eu, gtcsj20-d2s43,
# gtccn2020-cns20516, gtcsiliconvalley2018-s8854: an event of letters and a 2-digit year (a
# 4-digit one after a place's letters: never "gtc2024"), a session code of letters, then digits,
# letters and digits.
SLUG_RE = re.compile(r"^(?P<event>gtc(?:[a-z]+\d{4}|[a-z]*\d\d))-(?P<id>[a-z]+\d[a-z0-9]*)$", re.I)



def normalise_slug(slug: str) -> str:
    """`gtc25-S72571` -> `gtc25-s72571`; anything not shaped like a slug is an error."""
    slug = slug.strip().strip("/").lower()
    if not SLUG_RE.match(slug):
        raise ValueError(f"{slug!r} is not an On-Demand session slug like gtcspring21-s31151")
    return slug


def api_url(slug: str, config: dict[str, Any] | None = None) -> str:
    return f"{(config or {}).get('api', API)}?id={slug}"


def page_url(slug: str, config: dict[str, Any] | None = None) -> str:
    return (config or {}).get("page", PAGE).format(slug=slug)


# ---- fetch -----------------------------------------------------------------

def request_headers(config: dict[str, Any]) -> dict[str, str]:
    return {**DEFAULT_HEADERS, **config.get("headers", {})}


def fetch_sessions(fetcher: Fetcher, config: dict[str, Any], result: FetchResult,
                   discovered: Sequence[str] = ()) -> list[RawDocument]:
    """Every configured session's documents, then those of the sessions a catalog's recordings
    name (8 at a time, per-host limited by the fetcher). A discovered session On-Demand does not
    have yet is a note, not a failure: recordings are published weeks after the event."""
    headers = request_headers(config)
    slugs = []
    for raw_slug in config.get("sessions", []):
        try:
            slugs.append(normalise_slug(raw_slug))
        except ValueError as exc:
            result.problems.append(Problem(NAME, raw_slug, str(exc)))
    configured = list(dict.fromkeys(slugs))
    known = set(configured)
    failing = fetcher.failed_last_time(NAME)
    fetched = fetcher.map(lambda slug: _fetch_session(fetcher, slug, config, headers, result, slug in failing),
                          configured)
    extra = [slug for slug in dict.fromkeys(discovered) if slug not in known]
    if extra:
        pending = FetchResult()
        found = fetcher.map(lambda slug: _fetch_session(fetcher, slug, config, headers, pending, slug in failing),
                            extra)
        _not_published_yet(pending, {slug for slug, documents in zip(extra, found) if not documents}, result)
        fetched.extend(found)
    return [doc for documents in fetched for doc in documents]


def _not_published_yet(pending: FetchResult, missing: set[str], result: FetchResult) -> None:
    """Fold a fetch of discovered sessions into `result`, the failures of those with nothing
    (never published yet) as notes."""
    unpublished = [p for p in pending.problems if p.item in missing and p.severity == "error"]
    pending.problems = [Problem(NAME, p.item, f"not on On-Demand (yet): {p.reason}", severity="note")
                        if p in unpublished else p for p in pending.problems]
    pending.asked -= len(unpublished)
    pending.failed -= len(unpublished)
    _fold(pending, result)


def due_today(slug: str, recheck_days: int, today: date | None = None) -> bool:
    """Whether an already archived session is asked again today: each one
    once every `recheck_days` days, spread evenly over the days."""
    if recheck_days <= 1:
        return True
    day = (today or datetime.now(timezone.utc).date()).toordinal()
    return (day + zlib.crc32(slug.encode())) % recheck_days == 0


def _fetch_session(fetcher: Fetcher, slug: str, config: dict[str, Any], headers: dict[str, str],
                   result: FetchResult, failed_last_time: bool = False) -> list[RawDocument]:
    """The API answer, and the page when the API fails or lacks a field.

    The API is asked by slug; when it does not know the slug, by the page's `event_sessionId`,
    and the answer archived under that form is asked first on the next nights. Published
    sessions rarely change: one archived less than a recheck period ago is reused without a
    request (`recheck_days`, default 1 = every run), unless its last ask failed: then it is asked
    every night until it answers, so a vanished session is reported, never "unchanged".
    """
    page_address = page_url(slug, config)
    api_address, archived = _api_answered(fetcher, slug, config)
    if archived is not None and not failed_last_time and not due_today(slug, int(config.get("recheck_days", 1))):
        page = fetcher.last_version(NAME, "GET", page_address, None)
        return [archived] + ([page] if page else [])
    by_address = FetchResult()
    api = fetcher.fetch_or_keep(Wanted(NAME, slug, api_address, headers=headers), by_address,
                                validate=lambda doc: parse_session(doc.json(), slug))
    unanswered = by_address.failed > 0  # `api` is then the last archived answer, kept
    if api is not None and not unanswered and archived is not None and api.id == archived.id:
        # The API answer did not change (304): neither did what the page added to it.
        page = fetcher.last_version(NAME, "GET", page_address, None)
        if page is not None:
            _fold(by_address, result)
            return [api, page]
    page = None
    if api is None or unanswered or _needs_page(api):
        page = fetcher.fetch_or_keep(Wanted(NAME, slug, page_address, headers={**headers, "Accept": "text/html"}),
                                     result, optional=api is not None and not unanswered,
                                     validate=lambda doc: parse_page(doc.text(), slug))
    by_id = _session_id_address(page, slug, config) if unanswered and page is not None else None
    if by_id and by_id != api_address:  # a renamed or never-known slug: the page's id form
        by_session_id = FetchResult()
        answer = fetcher.fetch_or_keep(Wanted(NAME, slug, by_id, headers=headers), by_session_id,
                                       validate=lambda doc: parse_session(doc.json(), slug))
        if answer is not None and not by_session_id.failed:  # it answered: the slug form's failure is a note
            api = answer
            by_address.problems = [Problem(NAME, slug, f"{p.reason}; answered by the page's event_sessionId",
                                           severity="note") for p in by_address.problems]
            by_address.failed = 0
        _fold(by_session_id, result)
    _fold(by_address, result)
    return [doc for doc in (api, page) if doc is not None]


def _fold(part: FetchResult, result: FetchResult) -> None:
    result.problems.extend(part.problems)
    result.asked += part.asked
    result.failed += part.failed
    result.fatal = result.fatal or part.fatal


def _api_answered(fetcher: Fetcher, slug: str, config: dict[str, Any]) -> tuple[str, RawDocument | None]:
    """The API form to ask, and its archived answer: the form that answered last, by slug or by
    the page's `event_sessionId` (a session On-Demand renamed answers only that way)."""
    by_slug = api_url(slug, config)
    archived = fetcher.last_version(NAME, "GET", by_slug, None)
    page = fetcher.last_version(NAME, "GET", page_url(slug, config), None)
    by_id = _session_id_address(page, slug, config) if page is not None else None
    by_id_archived = fetcher.last_version(NAME, "GET", by_id, None) if by_id else None
    if by_id_archived is not None and (archived is None or (by_id_archived.id or 0) > (archived.id or 0)):
        return by_id, by_id_archived
    return by_slug, archived


def _session_id_address(page: RawDocument, slug: str, config: dict[str, Any]) -> str | None:
    """The API asked by the page's `event_sessionId`; the slug rides in the fragment (never sent)
    so the archived answer stays the session's."""
    try:
        session_id = parse_page(page.text(), slug).get("session_id")
    except ParseError:
        return None
    if not session_id or session_id.lower() == slug:
        return None
    return f"{(config or {}).get('api', API)}?id={quote(session_id, safe='')}#{slug}"


def _needs_page(api: RawDocument) -> bool:
    """The page is fetched when the API answer lacks a title, abstract or speakers."""
    try:
        data = api.json()["sessionData"]
    except (ParseError, KeyError, TypeError):
        return True
    return not (data.get("sTitle") or "").strip() or not data.get("sAbstract") or not data.get("speakerList")


# ---- parse -----------------------------------------------------------------

def parse_duration(value: Any) -> int | None:
    """sLength as seconds: minutes as a number, "45 min", "1:05:32" or "PT45M"."""
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)):
        return int(value * 60) if value < 600 else int(value)
    text = str(value).strip().lower()
    if re.fullmatch(r"\d+(:\d\d){1,2}", text):
        seconds = 0
        for part in text.split(":"):
            seconds = seconds * 60 + int(part)
        return seconds
    hours = re.search(r"(\d+)\s*h", text)
    minutes = re.search(r"(\d+)\s*m", text)
    if hours or minutes:
        return int(hours.group(1) if hours else 0) * 3600 + int(minutes.group(1) if minutes else 0) * 60
    if text.isdigit():
        return parse_duration(int(text))
    return None


def parse_date(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)):  # epoch milliseconds or seconds
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, timezone.utc).date().isoformat()
    match = re.search(r"(\d{4})-(\d{2})-(\d{2})", str(value))
    return match.group(0) if match else None


def parse_session(data: Any, slug: str) -> dict[str, Any]:
    """The fields of one API answer (`sessionData`)."""
    if not isinstance(data, dict) or not isinstance(data.get("sessionData"), dict):
        raise ParseError(f"session {slug}: no sessionData in the API answer")
    s = data["sessionData"]
    attributes: dict[str, Any] = {}
    for attr in s.get("attributes") or []:
        if isinstance(attr, dict) and attr.get("attribute"):
            attributes.setdefault(attr["attribute"].lower(), attr.get("value"))
    speakers = []
    for p in s.get("speakerList") or []:
        name = f"{(p.get('firstName') or '').strip()} {(p.get('lastName') or '').strip()}".strip()
        if name:
            speakers.append(SpeakerRef(name=speaker_name(name), bio=p.get("bio") or None))
    return {"title": without_session_codes((s.get("sTitle") or "").strip()) or None, "date": parse_date(s.get("sDate")),
            "duration_s": parse_duration(s.get("sLength")), "description": s.get("sAbstract") or None,
            "speakers": speakers, "event_raw": attributes.get("event"), "attributes": attributes,
            "session_id": s.get("sessionID")}


def parse_page(html: str, slug: str) -> dict[str, Any]:
    """The fields a session page holds (title pattern "Title | Event | NVIDIA On-Demand")."""
    from bs4 import BeautifulSoup  # imported when a page is read: most builds read none (40 ms)

    soup = BeautifulSoup(html, "html.parser")
    try:
        return _page_fields(soup, slug)
    finally:
        # A tree's parent and child links are cycles: taken apart here, the page is freed at once
        # (a build runs with the cyclic collector off). BeautifulSoup.decompose() alone leaves
        # the root's children whole (bs4 4.15), so they are decomposed first.
        for element in list(soup.contents):
            element.decompose()
        soup.decompose()


def _page_fields(soup: BeautifulSoup, slug: str) -> dict[str, Any]:
    def meta(name: str) -> str | None:
        tag = soup.find("meta", attrs={"property": name}) or soup.find("meta", attrs={"name": name})
        return tag.get("content").strip() if tag and tag.get("content") else None

    full_title = meta("og:title") or (soup.title.get_text(strip=True) if soup.title else None)
    if not full_title:
        raise ParseError(f"session page {slug}: no <title> or og:title (page layout changed?)")
    parts = [p.strip() for p in full_title.split(" | ")]
    if parts and parts[-1].lower() == "nvidia on-demand":
        parts = parts[:-1]
    heading = soup.find("h1")
    speakers = []
    for span in soup.select(".speakers span, .speaker-name"):
        name = span.get_text(" ", strip=True).split(",")[0].strip()
        if name:
            speakers.append(SpeakerRef(name=speaker_name(name)))
    title = parts[0] if parts else (heading.get_text(strip=True) if heading else None)
    return {"title": without_session_codes(title),
            "event_raw": parts[1] if len(parts) > 1 else None, "description": meta("og:description"),
            "session_id": meta("event_sessionId"), "image": meta("og:image"), "speakers": speakers}


def is_catalog(doc: RawDocument) -> bool:
    """A catalog answer: the catalog is the one source asked by POST."""
    return doc.method == "POST"


def document_kind(doc: RawDocument) -> tuple[str, str | None]:
    """("api", slug), ("page", slug), ("catalog", None) or ("unknown", None), by
    request shape rather than host, so archived documents outlive a changed URL."""
    if is_catalog(doc):
        return "catalog", None
    address, _, fragment = doc.url.partition("#")
    query = address.partition("?")[2]
    if query.startswith("id=") and SLUG_RE.match(query[3:]):  # the API's own form, read without urllib
        return "api", query[3:].lower()
    if query.startswith("id=") and SLUG_RE.match(fragment):  # asked by event_sessionId, for this slug
        return "api", fragment.lower()
    url = urlparse(doc.url)
    ids = parse_qs(url.query).get("id") if "id=" in url.query else None
    if ids:
        return "api", ids[0].lower()
    segments = [s for s in url.path.split("/") if s]
    if segments and SLUG_RE.match(segments[-1]):
        return "page", segments[-1].lower()
    return "unknown", None


def parse_sessions(documents: list[RawDocument], problems: list[Problem]) -> list[TalkItem]:
    """Session items from API answers and pages (documents of other kinds are skipped)."""
    api: dict[str, dict[str, Any]] = {}
    pages: dict[str, dict[str, Any]] = {}
    for doc in documents:
        kind, slug = document_kind(doc)
        if kind == "catalog":
            continue
        if not slug:
            problems.append(Problem(NAME, doc.url, "document is neither a session nor a catalog page"))
            continue
        try:
            if kind == "api":
                api[slug] = parse_session(doc.json(), slug)
            else:
                pages[slug] = parse_page(doc.text(), slug)
        except ParseError as exc:
            problems.append(Problem(NAME, slug, str(exc)))
    items = []
    for slug in dict.fromkeys([*api, *pages]):
        item = _session_item(slug, api.get(slug), pages.get(slug))
        if item is None:
            problems.append(Problem(NAME, slug, "no title from the API or the page"))
            continue
        items.append(item)
    return items


def _session_item(slug: str, api: dict[str, Any] | None, page: dict[str, Any] | None) -> TalkItem | None:
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for name in ("title", "date", "duration_s", "description", "speakers", "event_raw"):
        for label, fields in (("api", api), ("page", page)):
            if fields and fields.get(name):
                merged[name], origin[name] = fields[name], label
                break
    if not merged.get("title"):
        return None
    event, year = normalise_event(merged.get("event_raw"), slug)
    attributes = (api or {}).get("attributes", {})
    origin["event"] = origin.get("event_raw", "slug")
    url = PAGE.format(slug=slug)  # the public page, whatever host the documents came from
    return TalkItem(
        source=NAME, key=slug, title=merged["title"], url=url, series="GTC", event=event, year=year,
        date=merged.get("date"), duration_s=merged.get("duration_s"), description=merged.get("description"),
        speakers=merged.get("speakers", []), field_origin=shared_origin(origin),
        url_kind="ondemand", ondemand_url=url, topic=_shared(attributes.get("topic")),
        level=_shared(attributes.get("level")))


def _shared(value: str | None) -> str | None:
    """Topics and levels repeat across every session: one string each, not one per item."""
    return sys.intern(value) if isinstance(value, str) else value
