"""The shapes that cross the line between fetching, parsing and the index.

A source fetches `RawDocument`s (archived verbatim before anything reads them)
and parses them into `TalkItem`s: one per talk as that source sees it. The
index links items from several sources into one talk.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
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
        """The body as JSON; a `ParseError` naming the URL when it is not."""
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ParseError(f"{self.url}: not valid JSON ({exc})") from exc


@dataclass
class SpeakerRef:
    name: str
    profile_url: str | None = None
    bio: str | None = None


@dataclass
class LinkRef:
    """A link a source gives for a talk. kind: video, ondemand, slides, code,
    notebook, colab, paper, folder, other."""

    kind: str
    url: str
    label: str | None = None


@dataclass
class TalkItem:
    """A talk as one source describes it.

    `key` is unique within the source (`lecture-012`, `video-<id>`,
    `session-gtcspring21-s31151`). `attrs` holds source-specific facts the
    linker and the merge read (youtube_id, folder, channel, topic ...).
    `field_origin` says, per field, which document supplied it when a source
    has more than one (the GTC API or its page).
    """

    source: str
    key: str
    title: str
    url: str | None = None
    series: str | None = None
    event: str | None = None
    year: int | None = None
    number: int | None = None
    date: str | None = None
    duration_s: int | None = None
    description: str | None = None
    speakers: list[SpeakerRef] = field(default_factory=list)
    links: list[LinkRef] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    field_origin: dict[str, str] = field(default_factory=dict)


@dataclass
class Problem:
    """Something wrong with one item (or the whole source when item is None)."""

    source: str
    item: str | None
    reason: str
    severity: str = "error"  # error | warning | note


@dataclass
class ParseResult:
    items: list[TalkItem] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@dataclass
class FetchResult:
    """What a source's fetch step produced: the documents to archive, and the
    per-item problems met on the way (a video that failed, a 404 session)."""

    documents: list[RawDocument] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # Listings the source itself said are gone for good: their items may go
    # without the refresh treating the drop as a broken parser.
    vanished: list[str] = field(default_factory=list)


class ParseError(ValueError):
    """A document no longer parses (changed layout, truncated JSON ...)."""
