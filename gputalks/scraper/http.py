"""The one HTTP client every source fetches through.

Timeouts, a descriptive User-Agent, retries with backoff on connect errors,
timeouts, 429 and 5xx (honouring Retry-After), no retry on other 4xx, and
conditional requests (If-None-Match / If-Modified-Since) against the last
archived version of the same request, so an unchanged document costs a 304.
The same `Fetcher` runs live or against a snapshot: only the httpx transport
and the yt-dlp extractor differ.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, TypeVar

import httpx

from gputalks.scraper.records import FetchResult, ParseError, Problem, RawDocument, utc_now

USER_AGENT = "gputalks/0.1 (+https://github.com/gputalks/gputalks; index of GPU programming talks)"
RETRY_STATUSES = {429, 500, 502, 503, 504}
T = TypeVar("T")
R = TypeVar("R")
# A header the snapshot transport sets so a replayed document keeps the time
# it was really fetched.
FETCHED_AT_HEADER = "x-gputalks-fetched-at"

# The same, for an info dict a replayed extractor returns.
FETCHED_AT_KEY = "_gputalks_fetched_at"



THREAD_PREFIX, GRACE_S = "gputalks-fetch-", 1.0  # the threads that wait on hosts; how late a fetch is given up


def threads_waiting() -> bool:
    """Whether a fetch thread is still waiting on a host (an abandoned source)."""
    return any(t.is_alive() and t.name.startswith(THREAD_PREFIX) for t in threading.enumerate())


class FetchError(Exception):
    """A request that failed for good (after retries); `reason` is one line."""

    def __init__(self, url: str, reason: str, status: int | None = None):
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status


class NotRecorded(FetchError):
    """The snapshot being replayed holds no response for this request."""


class DeadlinePassed(FetchError):
    """The source's (or the run's) time is up: the source fails and keeps its last good data."""


class Archive(Protocol):
    """What the fetcher asks of the archive (the index's store), from any of its threads: a
    request's newest archived version (conditional requests, an item's last version)."""

    def last_version(self, source: str, method: str, url: str, request_body: str | None) -> RawDocument | None: ...

    def failed_last_time(self, source: str) -> set[str]: ...


class Extractor(Protocol):
    """What yt-dlp does for us: URL in, info dict out."""

    def extract(self, url: str, flat: bool) -> dict[str, Any]: ...


def make_client(transport: httpx.BaseTransport | None = None, timeout: float = 20.0,
                user_agent: str = USER_AGENT) -> httpx.Client:
    return httpx.Client(
        transport=transport,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        headers={"User-Agent": user_agent},
        follow_redirects=True,
    )


def retry_after_seconds(response: httpx.Response, default: float) -> float:
    """Seconds a Retry-After header asks for (delta or HTTP date), else default."""
    value = response.headers.get("retry-after")
    if not value:
        return default
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


@dataclass(frozen=True)
class FetchPolicy:
    """How patiently and how politely to fetch: per-request timeout, retries with
    exponential backoff (`sleep` is injectable for tests), the longest
    Retry-After honoured, threads in all and per host."""

    timeout: float = 20.0
    retries: int = 3
    backoff: float = 1.0
    max_wait: float = 120.0
    concurrency: int = 4
    per_host: int = 4
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class Wanted:
    """One item's document: an HTTP request, or a yt-dlp extraction when
    `extract_flat` is set (True: a flat listing; False: full info)."""

    source: str
    item: str
    url: str
    method: str = "GET"
    data: str | None = None
    headers: dict[str, str] | None = None
    extract_flat: bool | None = None


class Fetcher:
    """Fetches documents for the sources.

    `archive` gives the last archived version of a request, used for
    conditional requests; on a 304 that archived document is returned as is
    (same id, nothing to re-archive).
    """

    def __init__(self, client: httpx.Client, extractor: Extractor | None = None,
                 archive: Archive | None = None, policy: FetchPolicy = FetchPolicy(),
                 on_request: Callable[[str], None] | None = None):
        self.client = client
        self.extractor = extractor
        self.archive = archive
        self.retries = policy.retries
        self.backoff = policy.backoff
        self.max_wait = policy.max_wait
        self.sleep = policy.sleep
        self.on_request = on_request
        self.concurrency = max(1, policy.concurrency)
        self.per_host = max(1, policy.per_host)
        self._lock = threading.Lock()
        self._hosts: dict[str, threading.BoundedSemaphore] = {}
        self.requests_made = 0
        self.bytes_received = 0
        self.not_modified = 0
        self.timeout = policy.timeout
        self.deadline: float | None = None  # time.monotonic() by which the current source must be done

    def __enter__(self) -> "Fetcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the client's connections (and a replay's open transport)."""
        self.client.close()

    def set_deadline(self, deadline: float | None) -> None:
        """Bound what follows: each request's timeout is capped to the time left,
        and a request once it has passed is a `DeadlinePassed`."""
        self.deadline = deadline

    def _time_left(self, url: str) -> float | None:
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed(url, "deadline passed before this request")
        return left

    def within_deadline(self, source: str, work: Callable[[], R]) -> R:
        """`work()` (a source's whole fetch), given up GRACE_S after the deadline: a host that sends
        its headers a byte a second, or a hung yt-dlp extraction, blocks inside a read that no
        timeout ends. Its thread is abandoned (a `DeadlinePassed`), and nothing waits for it:
        what it fetches later is never archived, and the command exits without joining it."""
        if self.deadline is None:
            return work()
        done: dict[str, Any] = {}

        def run() -> None:
            try:
                done["result"] = work()
            except BaseException as exc:  # handed to the caller's thread
                done["error"] = exc

        thread = threading.Thread(target=run, name=f"{THREAD_PREFIX}{source}", daemon=True)
        thread.start()
        thread.join(max(0.0, self.deadline - time.monotonic()) + GRACE_S)
        if thread.is_alive():
            raise DeadlinePassed(source, f"deadline passed: {source} did not finish within its time "
                                         "(a host or an extraction hung); abandoned")
        if "error" in done:
            raise done["error"]
        return done["result"]

    def map(self, work: Callable[[T], R], items: list[T]) -> list[R]:
        """`work` over items on up to `concurrency` threads, results in order.
        Politeness per host is kept by the per-host limit in `_send`."""
        if self.concurrency == 1 or len(items) < 2:
            return [work(item) for item in items]
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix=THREAD_PREFIX)
        try:
            results = list(pool.map(work, items))
        except BaseException:
            # Ctrl-C or SIGTERM (or a failure): do not wait for threads sleeping in a retry's
            # backoff; the command ends at once (see the CLI), the threads with the process.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        return results

    def _count_request(self, url: str) -> None:
        with self._lock:
            self.requests_made += 1
        if self.on_request:
            self.on_request(url)

    def _count_response(self, received: int, not_modified: bool = False) -> None:
        with self._lock:
            self.bytes_received += received
            self.not_modified += int(not_modified)

    def _host_slot(self, url: str) -> threading.BoundedSemaphore:
        host = httpx.URL(url).host
        with self._lock:
            return self._hosts.setdefault(host, threading.BoundedSemaphore(self.per_host))

    def last_version(self, source: str, method: str, url: str, request_body: str | None) -> RawDocument | None:
        if self.archive is None:
            return None
        return self.archive.last_version(source, method, url, request_body)

    def failed_last_time(self, source: str) -> set[str]:
        """The items whose fetch failed in the source's last run: asked again at once, not
        when a recheck period says (a vanished session must not read as unchanged)."""
        return set() if self.archive is None else self.archive.failed_last_time(source)

    def request(self, source: str, method: str, url: str, *, data: str | None = None,
                headers: dict[str, str] | None = None, accept_errors: bool = False) -> RawDocument:
        """The response as a document; a FetchError for a failed status unless
        `accept_errors` (then the error response itself is the document)."""
        send_headers = dict(headers or {})
        previous = self.last_version(source, method, url, data)
        if previous is not None:
            if previous.etag:
                send_headers["If-None-Match"] = previous.etag
            if previous.last_modified:
                send_headers["If-Modified-Since"] = previous.last_modified
        if data is not None:
            send_headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        response = self._send(method, url, data, send_headers)
        if response.status_code == 304 and previous is not None:
            self._count_response(0, not_modified=True)
            return previous
        if not 200 <= response.status_code < 300 and not accept_errors:
            raise FetchError(url, f"HTTP {response.status_code} {response.reason_phrase}".strip(),
                             response.status_code)
        return RawDocument(
            source=source, method=method, url=url, status=response.status_code,
            content_type=response.headers.get("content-type", ""),
            fetched_at=response.headers.get(FETCHED_AT_HEADER) or utc_now(),
            body=response.content, request_body=data,
            etag=response.headers.get("etag"),
            last_modified=response.headers.get("last-modified"),
        )

    def _send(self, method: str, url: str, data: str | None,
              headers: dict[str, str]) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                left = self._time_left(url)
                timeout = httpx.USE_CLIENT_DEFAULT if left is None else httpx.Timeout(min(self.timeout, left))
                self._count_request(url)
                with self._host_slot(url):
                    response = self._answer(method, url, data, headers, timeout)
            except httpx.TimeoutException as exc:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    raise DeadlinePassed(url, f"deadline passed while waiting for an answer "
                                              f"(attempt {attempt})") from exc
                if attempt > self.retries:
                    raise FetchError(url, f"timed out after {attempt} attempts ({type(exc).__name__})") from exc
                self._pause(url, self._delay(attempt))
                continue
            except httpx.TransportError as exc:
                if attempt > self.retries:
                    raise FetchError(url, f"connection failed after {attempt} attempts: {exc}") from exc
                self._pause(url, self._delay(attempt))
                continue
            self._count_response(len(response.content))
            if response.status_code in RETRY_STATUSES and attempt <= self.retries:
                wait = retry_after_seconds(response, self._delay(attempt))
                if wait > self.max_wait:
                    raise FetchError(url, f"HTTP {response.status_code}, Retry-After {wait:.0f}s is longer "
                                          f"than the {self.max_wait:.0f}s we wait", response.status_code)
                self._pause(url, wait)
                continue
            return response

    def _answer(self, method: str, url: str, data: str | None, headers: dict[str, str], timeout) -> httpx.Response:
        """The whole answer, its body read within the time left: a host that trickles a byte a
        second never times out a read, so the body is read in chunks against the clock, and
        past the deadline the request is abandoned (a `DeadlinePassed`)."""
        request = self.client.build_request(method, url, content=data, headers=headers, timeout=timeout)
        streamed = self.client.send(request, stream=True)
        try:
            chunks = []
            for chunk in streamed.iter_bytes():
                chunks.append(chunk)
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    raise DeadlinePassed(url, "deadline passed while the answer trickled in")
        finally:
            streamed.close()
        headers = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() != "content-encoding"]
        return httpx.Response(streamed.status_code, headers=headers, content=b"".join(chunks), request=request,
                              extensions=streamed.extensions)

    def _pause(self, url: str, seconds: float) -> None:
        """Wait before a retry, never past the deadline."""
        left = self._time_left(url)
        self.sleep(seconds if left is None else min(seconds, left))

    def _delay(self, attempt: int) -> float:
        return self.backoff * (2 ** (attempt - 1))

    def fetch_or_keep(self, wanted: Wanted, result: FetchResult, *, optional: bool = False,
                      validate: Callable[[RawDocument], object] | None = None,
                      critical: bool = False) -> RawDocument | None:
        """One per-item fetch (HTTP, or yt-dlp when `wanted.extract_flat` is set), counted in `result`.

        On failure, or when `validate` raises ParseError (truncated JSON, HTML
        where JSON was expected): a problem for the item, and the last archived
        version of the request instead, so the item keeps its data. A document
        the snapshot did not record is a note when `optional`, not a failure.
        A `critical` document (a listing) that fails fails the whole source.
        """
        source, item = wanted.source, wanted.item
        try:
            if wanted.extract_flat is not None:
                doc = self.extract(source, wanted.url, wanted.extract_flat)
            else:
                doc = self.request(source, wanted.method, wanted.url, data=wanted.data, headers=wanted.headers)
            if validate is not None and doc.id is None:
                validate(doc)
            with self._lock:
                result.asked += 1
            return doc
        except (FetchError, ParseError) as exc:
            kept = self.last_version(source, wanted.method, wanted.url, wanted.data)
            if isinstance(exc, NotRecorded) and optional:
                result.problems.append(Problem(source, item, exc.reason, severity="note"))
                return kept
            reason = exc.reason if isinstance(exc, FetchError) and item == wanted.url else str(exc)
            suffix = "; kept the last archived version" if kept else ""
            result.problems.append(Problem(source, item, f"{reason}{suffix}"))
            with self._lock:
                result.asked += 1  # a recorded absence (the note above) is not an answer
                result.failed += 1
                if isinstance(exc, DeadlinePassed) and result.fatal is None:
                    result.fatal = f"deadline passed ({wanted.url}: {exc.reason})"
                elif critical and result.fatal is None:
                    result.fatal = f"{item}: {reason}" if reason.startswith(wanted.url) else f"{wanted.url}: {reason}"
            return kept

    def extract(self, source: str, url: str, flat: bool) -> RawDocument:
        """Run yt-dlp on a URL and return its info dict as a JSON document."""
        if self.extractor is None:
            raise FetchError(url, "no yt-dlp extractor configured")
        self._time_left(url)
        self._count_request(url)
        with self._host_slot(url):
            info = dict(self.extractor.extract(url, flat))
        fetched_at = info.pop(FETCHED_AT_KEY, None) or utc_now()
        body = json.dumps(info, ensure_ascii=False, sort_keys=True).encode()
        self._count_response(len(body))
        return RawDocument(source=source, method="GET", url=url, status=200,
                           content_type="application/json", fetched_at=fetched_at, body=body)
