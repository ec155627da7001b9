"""The shapes that cross the line between fetching, parsing and the index.

A source fetches `RawDocument`s (archived verbatim before anything reads them)
and parses them into `TalkItem`s: one per talk as that source sees it. The
index links items from several sources into one talk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from datetime import datetime, timezone
from typing import Any, Literal, TypeVar, dataclass_transform

import orjson

R = TypeVar("R")


@dataclass_transform(field_specifiers=(field,))
def record(cls: type[R]) -> type[R]:
    """A slotted dataclass that pickles as its class and its field values. Python 3.11's
    slotted dataclasses pickle through a `__getstate__` written in Python that lists the
    fields again for every object; a build's worker sends every parsed speaker to the build's
    process (GTC's 37,000 items at 100,000 talks: 0.37 -> 0.22 s to pickle, 0.22 -> 0.10 s
    to unpickle)."""
    slotted = dataclass(slots=True)(cls)
    values = attrgetter(*(f.name for f in fields(slotted)))
    slotted.__reduce__ = lambda self: (slotted, values(self))
    return slotted


@record
class RawDocument:
    """One response as a source received it: what `raw_documents` stores."""

    source: str
    method: str
    url: str
    status: int
    content_type: str
    fetched_at: str
    body: bytes
    request_body: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    id: int | None = None  # set once the document is in the archive

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; a `ParseError` naming the URL when it is not. orjson reads it
        (half the time of `json` on a rebuild's 38,000 documents at 100,000 talks); what it
        refuses, `json` reads as before (NaN, integers past 64 bits) or explains."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            pass
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ParseError(f"{self.url}: not valid JSON ({exc})") from exc


Severity = Literal["error", "warning", "unlinked", "note"]
LinkKind = Literal["video", "ondemand", "catalog", "readme", "slides", "code", "notebook", "colab", "paper",
                   "folder", "book", "other"]


@record
class SpeakerRef:
    name: str
    profile_url: str | None = None
    bio: str | None = None
    affiliation: str | None = None


@record
class LinkRef:
    """A link a source gives for a talk."""

    kind: LinkKind
    url: str
    label: str | None = None


@record
class Chapter:
    """A chapter of a video, as yt-dlp lists it."""

    start_s: float
    end_s: float | None
    title: str


@record
class Segment:
    """A 30-60 s passage of a transcript."""

    start_s: float
    end_s: float
    text: str


@record
class Transcript:
    """Which caption track a video's segments come from, or why it has none."""

    language: str | None = None
    automatic: bool = False
    reason: str | None = None

    def describe(self) -> str:
        if self.language:
            return self.language + (" (automatic)" if self.automatic else "")
        return f"no transcript: {self.reason or 'unknown'}"


NO_ORIGIN: Mapping[str, str] = {}
_ORIGINS: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {(): NO_ORIGIN}


def shared_origin(origin: dict[str, str]) -> Mapping[str, str]:
    """One mapping per distinct `field_origin`, shared by the items that have it, never changed:
    GTC's 111,000 items at 300,000 talks have a handful, and the other sources' none."""
    return _ORIGINS.setdefault(tuple(origin.items()), origin)


@record
class TalkItem:
    """A talk as one source describes it: the contract between sources and the index.

    `key` is unique within the source (`lecture-012`, `<video id>`,
    `gtcspring21-s31151`, `catalog-<id>`); `url` is the item's own page, a
    link of kind `url_kind`. `field_origin` says, per field, which document
    supplied it when a source has more than one (the GTC API or its page).
    The fields after `field_origin` are set by one source each.
    """

    source: str
    key: str
    title: str
    url: str | None = None
    url_kind: LinkKind = "other"
    series: str | None = None
    event: str | None = None
    year: int | None = None
    number: int | None = None
    date: str | None = None
    duration_s: int | None = None
    description: str | None = None
    speakers: Sequence[SpeakerRef] = ()
    links: Sequence[LinkRef] = ()
    tags: Sequence[str] = ()
    field_origin: Mapping[str, str] = field(default_factory=lambda: NO_ORIGIN)
    # YouTube: chapters, segments and transcript come with a full info dict.
    youtube_id: str | None = None
    full_info: bool = False
    chapters: Sequence[Chapter] = ()
    segments: Sequence[Segment] = ()
    transcript: Transcript | None = None
    # GitHub: the lecture's folder in the repo, its files, folders the README names that are not its own.
    folder: str | None = None
    folder_files: Sequence[str] = ()
    folder_mismatch: Sequence[str] = ()
    # GTC: On-Demand page, catalog entries (not On-Demand sessions), GTC's own attributes.
    ondemand_url: str | None = None
    from_catalog: bool = False
    session_slug: str | None = None  # a catalog entry's On-Demand slug, from its code
    topic: str | None = None
    level: str | None = None

    def __post_init__(self) -> None:
        # A build holds every item at once, and most have no chapters, segments, tags,
        # folder files...: they share the one empty tuple instead of an empty list each.
        for name in EMPTY_BY_DEFAULT:
            if not getattr(self, name):
                setattr(self, name, ())


EMPTY_BY_DEFAULT = ("speakers", "links", "tags", "chapters", "segments", "folder_files", "folder_mismatch")


@record
class Problem:
    """Something wrong with one item (or the whole source when item is None).
    "unlinked" is an item the linker could not place; "note" is informational."""

    source: str
    item: str | None
    reason: str
    severity: Severity = "error"


@record
class ParseResult:
    items: list[TalkItem] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@record
class FetchResult:
    """What a source's fetch step produced: the documents to archive, and the
    per-item problems met on the way (a video that failed, a 404 session)."""

    documents: list[RawDocument] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    asked: int = 0  # per-item fetches made (`Fetcher.fetch_or_keep`)
    failed: int = 0  # of those, how many failed (each kept its last archived version, if any)
    fatal: str | None = None  # a failure that leaves the source nothing usable (its listing)


class ParseError(ValueError):
    """A document no longer parses (changed layout, truncated JSON ...)."""


def utc_now() -> str:
    """Now, as every record of a fetch or a run says it: UTC, to the second, ISO 8601 with Z."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
