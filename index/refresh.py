"""The refresh: fetch each source, archive what it returned, parse, link, write.

The whole refresh works on a copy of the index that is swapped in with an
atomic rename at the end (`store.building_copy`), so a reader sees the old
index or the new one, never a half-written one, and a refresh killed at any
point leaves the last good index. A source that fails keeps its last good
documents (and so its rows); the others refresh.

Exit codes: 0 everything refreshed; 1 partial (a source failed or yielded far
fewer items than last time: it kept its last good data); 3 every selected
source failed; 4 another refresh holds the lock. (2 is Click's usage error.)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import sqlite_utils

from scraper import github, gtc, youtube
from scraper.http import FetchError, Fetcher, make_client, utc_now
from scraper.records import ParseError, ParseResult, Problem
from scraper.snapshot import Snapshot

from .history import WriteStats, apply_talks
from .link import Overrides, link_talks
from .export import ExportError, load_curation, save_curation
from .merge import merge_talk
from .paths import CURATION_DIR, DEFAULT_CONFIG, DEFAULT_OVERRIDES
from .store import archive, building_copy, last_good_run, load_documents, open_db, previous_document

SOURCES: dict[str, ModuleType] = {"github": github, "youtube": youtube, "gtc": gtc}
EXIT_OK, EXIT_PARTIAL, EXIT_FAILED, EXIT_LOCKED = 0, 1, 3, 4
# A source yielding fewer than this share of its last good item count has
# most likely broken (a layout change), and is treated as failed.
SHRINK_LIMIT = 0.5


class RefreshLocked(RuntimeError):
    pass


@dataclass
class SourceOutcome:
    name: str
    status: str  # ok | failed | kept (not refreshed this run; last good data used)
    items: int = 0
    documents: int = 0
    error: str | None = None


@dataclass
class RunReport:
    run_id: int
    status: str
    exit_code: int
    outcomes: list[SourceOutcome] = field(default_factory=list)
    stats: WriteStats = field(default_factory=WriteStats)
    problems: list[Problem] = field(default_factory=list)
    requests: int = 0


def load_config(path: str | Path | None = None) -> dict[str, Any]:
    path = Path(path) if path else DEFAULT_CONFIG
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: sources config not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from exc


@contextmanager
def refresh_lock(db_path: str | Path, wait: bool = False) -> Iterator[None]:
    """One refresh at a time per database: the second waits (`wait`) or refuses."""
    lock_path = Path(f"{db_path}.lock")
    with open(lock_path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise RefreshLocked(f"another refresh of {db_path} is running ({holder}); "
                                "try again later or pass --wait") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} since {utc_now()}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)


def make_fetcher(db: sqlite_utils.Database, snapshot: str | Path | None,
                 on_request: Callable[[str], None] | None = None, **options: Any) -> Fetcher:
    """A fetcher that replays `snapshot` when given, else goes live."""
    timeout = options.pop("timeout", 20.0)
    if snapshot:
        recorded = Snapshot(snapshot)
        client, extractor = make_client(transport=recorded.transport()), recorded.extractor()
    else:
        client, extractor = make_client(timeout=timeout), youtube.YtDlpExtractor()
    return Fetcher(client, extractor=extractor, on_request=on_request,
                   previous=lambda s, m, u, b: previous_document(db, s, m, u, b), **options)


def _start_run(db: sqlite_utils.Database, mode: str) -> int:
    with db.atomic():
        return db.table("refresh_runs").insert({"started_at": utc_now(), "mode": mode,
                                                "status": "running"}).last_pk


def refresh(db_path: str | Path, config: dict[str, Any], *, snapshot: str | Path | None = None,
            sources: list[str] | None = None, overrides_path: str | Path | None = DEFAULT_OVERRIDES,
            report: Callable[[str], None] = lambda message: None,
            on_request: Callable[[str], None] | None = None, wait: bool = False,
            fetcher_options: dict[str, Any] | None = None) -> RunReport:
    """Fetch the selected sources (all configured ones by default) and rebuild the index."""
    selected = sources or [name for name in SOURCES if name in config]
    unknown = [name for name in selected if name not in SOURCES]
    if unknown:
        raise ValueError(f"unknown source {', '.join(unknown)}; known: {', '.join(SOURCES)}")
    Overrides.load(overrides_path)  # a bad overrides file fails before any fetching
    with refresh_lock(db_path, wait=wait), building_copy(db_path) as work_path:
        db = open_db(work_path)
        run_id = _start_run(db, "snapshot" if snapshot else "live")
        fetcher = make_fetcher(db, snapshot, on_request, **(fetcher_options or {}))
        fresh: dict[str, tuple[list[int], ParseResult]] = {}
        outcomes, problems = [], []
        for name in selected:
            report(f"{name}: fetching")
            done = _refresh_source(db, fetcher, name, config.get(name, {}))
            outcomes.append(done.outcome)
            problems.extend(done.problems)
            if done.parsed is not None:
                fresh[name] = (done.ids, done.parsed)
            report(f"{name}: {done.outcome.status}, {done.outcome.documents} documents, "
                   f"{done.outcome.items} items" + (f" ({done.outcome.error})" if done.outcome.error else ""))
        failed = [o for o in outcomes if o.status == "failed"]
        if failed and len(failed) == len(outcomes):
            status, code = "failed", EXIT_FAILED
        elif failed:
            status, code = "partial", EXIT_PARTIAL
        else:
            status, code = "ok", EXIT_OK
        try:
            return _finish(db, run_id, config, overrides_path, fresh, outcomes, problems, status, code,
                           fetcher.requests_made, fetcher.bytes_received, report)
        finally:
            db.close()


@dataclass
class SourceRefresh:
    """What fetching one source gave: its outcome, the parsed items when the
    documents changed (None when unchanged or failed), the archived ids, problems."""

    outcome: SourceOutcome
    parsed: ParseResult | None = None
    ids: list[int] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _refresh_source(db: sqlite_utils.Database, fetcher: Fetcher, name: str,
                    config: dict[str, Any]) -> SourceRefresh:
    """Fetch, archive and parse one source; never raises for bad input.

    Documents identical to the last good run's (all 304s, reused full infos)
    are not parsed again: the outcome is "unchanged".
    """
    module = SOURCES[name]
    try:
        fetched = module.fetch(fetcher, config)
    except FetchError as exc:
        return SourceRefresh(SourceOutcome(name, "failed", error=str(exc)),
                             problems=[Problem(name, None, str(exc))])
    with db.atomic():
        ids = archive(db, fetched.documents)
    problems = list(fetched.problems)
    errors = [p for p in problems if p.severity == "error"]
    if not ids and errors:  # every request failed: a failure of the source, not an empty source
        return SourceRefresh(SourceOutcome(name, "failed", error=f"nothing could be fetched ({len(errors)} "
                                           f"errors; first: {errors[0].reason})"), problems=problems)

    def failed(reason: str, items: int = 0) -> SourceRefresh:
        return SourceRefresh(SourceOutcome(name, "failed", items=items, documents=len(ids), error=reason),
                             ids=ids, problems=problems + [Problem(name, None, reason)])

    last = last_good_run(db, name)
    if last and last["document_ids"] == ids:
        return SourceRefresh(SourceOutcome(name, "unchanged", items=last["items"], documents=len(ids)),
                             ids=ids, problems=problems)
    try:
        parsed = module.parse(fetched.documents, config)
    except (ParseError, ValueError, KeyError, TypeError) as exc:
        return failed(f"documents no longer parse: {exc}")
    problems.extend(parsed.problems)
    if last and last["items"] and len(parsed.items) < SHRINK_LIMIT * last["items"] and not fetched.vanished:
        return failed(f"yielded {len(parsed.items)} items where the last good run had {last['items']}; "
                      "treated as a failure (kept the last good data), not as mass removal", len(parsed.items))
    return SourceRefresh(SourceOutcome(name, "ok", items=len(parsed.items), documents=len(ids)),
                         parsed, ids, problems)


def rebuild(db_path: str | Path, config: dict[str, Any], *,
            overrides_path: str | Path | None = DEFAULT_OVERRIDES,
            report: Callable[[str], None] = lambda message: None, wait: bool = False) -> RunReport:
    """Re-parse every source's last good documents from the archive; no network."""
    Overrides.load(overrides_path)
    if not Path(db_path).exists():
        raise FileNotFoundError(f"{db_path}: no index here; run `gputalks refresh` first")
    with refresh_lock(db_path, wait=wait), building_copy(db_path) as work_path:
        db = open_db(work_path)
        run_id = _start_run(db, "rebuild")
        try:
            return _finish(db, run_id, config, overrides_path, {}, [], [], "ok", EXIT_OK, 0, 0, report,
                           force=True)
        finally:
            db.close()


def _inputs_digest(db: sqlite_utils.Database, config: dict[str, Any], overrides_path) -> str:
    """Everything a build reads: each source's document set, the config, the
    overrides, the curation files and the code. Equal digests, equal index."""
    parts: dict[str, Any] = {"config": config}
    for name in SOURCES:
        last = last_good_run(db, name)
        parts[f"documents:{name}"] = last["document_ids"] if last else None
    files = [Path(overrides_path)] if overrides_path else []
    files += sorted(CURATION_DIR.glob("*.toml"))
    code = Path(__file__).parent
    files += sorted(code.glob("*.py")) + sorted((code.parent / "scraper").glob("*.py"))
    for path in files:
        parts[f"file:{path.name}:{path.parent.name}"] = hashlib.sha256(path.read_bytes()).hexdigest() \
            if path.exists() else None
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _finish(db, run_id, config, overrides_path, fresh, outcomes, problems, status, code,
            requests, received, report, force: bool = False) -> RunReport:
    """In one transaction: source runs, problems, the linked and merged talks, the run row.

    When nothing the build reads has changed since the last build (and no
    item failed on the way), nothing is parsed or written but the run row.
    """
    when = utc_now()
    outcome_of = {o.name: o for o in outcomes}
    stats = WriteStats()
    with db.atomic():
        for name, (ids, parsed) in fresh.items():
            _record_source_run(db, run_id, name, "ok", ids, len(parsed.items), None, when)
        for outcome in outcomes:
            if outcome.status == "failed":
                _record_source_run(db, run_id, outcome.name, "failed", [], outcome.items, outcome.error, when)
        digest = _inputs_digest(db, config, overrides_path)
        last_build = next(iter(db.query(
            "select id, inputs, problems_run, counts from refresh_runs where inputs is not null "
            "order by id desc limit 1")), None)
        troubled = any(p.severity in ("error", "warning") for p in problems)
        if not force and not troubled and last_build and last_build["inputs"] == digest:
            report("nothing changed since the last build")
            counts, problems_run = last_build["counts"], last_build["problems_run"]
        else:
            stats, counts = _build(db, run_id, when, config, overrides_path, fresh, outcome_of, outcomes,
                                   problems, report)
            problems_run = run_id
            if problems:
                db.table("problems").insert_all(
                    {"run_id": run_id, "source": p.source, "item": p.item, "severity": p.severity,
                     "reason": p.reason} for p in problems)
        db.table("refresh_runs").update(run_id, {
            "finished_at": utc_now(), "status": status, "exit_code": code,
            "sources": json.dumps({o.name: {"status": o.status, "items": o.items, "documents": o.documents,
                                            "error": o.error} for o in outcomes}),
            "counts": counts, "talks_written": stats.talks_written, "changes": stats.changes,
            "requests": requests, "bytes": received, "inputs": digest if problems_run == run_id else None,
            "problems_run": problems_run})
    return RunReport(run_id, status, code, outcomes, stats, problems, requests)


def _build(db, run_id, when, config, overrides_path, fresh, outcome_of, outcomes, problems, report):
    """Parse what was not parsed already, link, merge and write; (stats, counts JSON)."""
    parsed_by_source: dict[str, ParseResult] = {name: parsed for name, (_, parsed) in fresh.items()}
    for name, module in SOURCES.items():
        if name in parsed_by_source or name not in config:
            continue
        last = last_good_run(db, name)
        if last is None:
            continue
        try:
            parsed_by_source[name] = module.parse(load_documents(db, last["document_ids"]),
                                                  config.get(name, {}))
        except (ParseError, ValueError, KeyError, TypeError) as exc:
            problems.append(Problem(name, None, f"archived documents no longer parse: {exc}"))
            continue
        if name not in outcome_of:
            outcomes.append(SourceOutcome(name, "kept", items=len(parsed_by_source[name].items),
                                          documents=len(last["document_ids"])))
        problems.extend(parsed_by_source[name].problems)
    report("linking and writing the index")
    items = [item for parsed in parsed_by_source.values() for item in parsed.items]
    linked = link_talks(items, Overrides.load(overrides_path))
    problems.extend(linked.problems)
    merged = [merge_talk(cluster) for cluster in linked.clusters]
    titles = {(i.source, i.key): (i.url, i.title) for i in items}
    matches = [{"source": m.source, "item_key": m.item_key, "talk_id": m.talk_id, "method": m.method,
                "score": m.score, "url": titles[(m.source, m.item_key)][0],
                "title": titles[(m.source, m.item_key)][1]}
               for cluster in linked.clusters for m in cluster.matches]
    stats = apply_talks(db, run_id, when, merged, matches)
    problems.extend(_load_curation(db))
    counts = {name: len(parsed.items) for name, parsed in parsed_by_source.items()}
    counts["talks"] = len(merged)
    return stats, json.dumps(counts)


def _load_curation(db: sqlite_utils.Database) -> list[Problem]:
    """The docs' curated tables, mirrored into the index so Datasette shows them."""
    try:
        unresolved = save_curation(db, load_curation())
    except ExportError as exc:
        return [Problem("curation", None, str(exc))]
    return [Problem("curation", None, reason, severity="warning") for reason in unresolved]


def _record_source_run(db, run_id, name, status, ids, items, error, when) -> None:
    db.table("source_runs").insert({"run_id": run_id, "source": name, "status": status,
                                    "document_ids": json.dumps(ids), "items": items, "error": error,
                                    "started_at": when, "finished_at": when})
