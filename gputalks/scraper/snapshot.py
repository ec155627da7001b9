"""Replay a recorded refresh: a directory with `manifest.json` and the files it names.

Replay sits below the sources (an httpx transport, a yt-dlp stand-in), so the
sources run the same code live and offline. A request the manifest does not
hold is an error that names the URL (`NotRecorded`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gputalks.scraper.http import FETCHED_AT_HEADER, FETCHED_AT_KEY, FetchError, NotRecorded


@dataclass
class SnapshotEntry:
    source: str
    method: str
    url: str
    status: int
    content_type: str
    fetched_at: str
    path: Path
    request_body: str | None
    headers: dict[str, str]

    def body(self) -> bytes:
        return self.path.read_bytes()


class Snapshot:
    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        manifest_path = self.directory / "manifest.json"
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"{manifest_path}: no manifest.json in the snapshot directory") from None
        except ValueError as exc:
            raise ValueError(f"{manifest_path}: not valid JSON ({exc})") from exc
        self.recorded = manifest.get("recorded")
        self.entries: dict[tuple[str, str, str | None], SnapshotEntry] = {}
        for raw in manifest.get("responses", []):
            entry = SnapshotEntry(
                source=raw.get("source", ""), method=raw.get("method", "GET").upper(),
                url=raw["url"], status=int(raw.get("status", 200)),
                content_type=raw.get("content_type", "application/octet-stream"),
                fetched_at=raw.get("fetched_at") or self.recorded or "",
                path=self.directory / raw["file"], request_body=raw.get("request_body"),
                headers={k.lower(): v for k, v in (raw.get("headers") or {}).items()},
            )
            self.entries[(entry.method, entry.url, entry.request_body)] = entry

    def lookup(self, method: str, url: str, request_body: str | None = None) -> SnapshotEntry:
        # A snapshot records requests as sent, and a URL's #fragment is never sent.
        entry = self.entries.get((method.upper(), url.partition("#")[0], request_body or None))
        if entry is None:
            raise NotRecorded(url, f"not recorded in snapshot {self.directory}")
        if not entry.path.is_file():
            raise FetchError(url, f"snapshot file {entry.path} named by the manifest is missing")
        return entry

    def transport(self) -> "SnapshotTransport":
        return SnapshotTransport(self)

    def extractor(self) -> "SnapshotExtractor":
        return SnapshotExtractor(self)


class SnapshotTransport(httpx.BaseTransport):
    """Answers HTTP requests from the manifest, including 304s for a matching ETag."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.content.decode() if request.content else None
        entry = self.snapshot.lookup(request.method, str(request.url), body)
        headers = dict(entry.headers)
        headers["content-type"] = entry.content_type
        headers[FETCHED_AT_HEADER] = entry.fetched_at
        etag = entry.headers.get("etag")
        if etag and request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers=headers, request=request)
        return httpx.Response(entry.status, headers=headers, content=entry.body(), request=request)


class SnapshotExtractor:
    """Stands in for yt-dlp: the info dict recorded for the URL."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot

    def extract(self, url: str, flat: bool) -> dict[str, Any]:
        entry = self.snapshot.lookup("GET", url)
        if entry.status != 200:  # a recorded failure: the file holds yt-dlp's message
            raise FetchError(url, entry.body().decode("utf-8", "replace").strip() or f"HTTP Error {entry.status}")
        try:
            info = json.loads(entry.body())
        except ValueError as exc:
            raise FetchError(url, f"recorded info dict {entry.path} is not valid JSON ({exc})") from exc
        info[FETCHED_AT_KEY] = entry.fetched_at
        return info
