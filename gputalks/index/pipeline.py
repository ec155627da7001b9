"""The refresh: fetch each source, archive what it returned, parse, link, merge, write.

    refresh()  -> lock, the archive (talks.archive.db), run row   (runs.py, store.py)
      per source: fetch (scraper/<source>.py through scraper/http.py, which asks
                  the archive for last versions: raw_documents.SqliteArchive)
                  -> archive (raw_documents.archive) -> parse (scraper/<source>.py)
      finish():  source runs into the archive; when nothing a build reads
                 changed, stop: the served index is not touched. Else build()
                 on a working copy of talks.db:
                  link (link.py) -> merge (merge.py) -> write (history.py)
                  -> curation mirror (curation.py) -> build's run row (runs.py)
                 and swap it in                          (store.building_copy)

A source that fails keeps its last good documents (and so its rows); the
others refresh. `rebuild` runs `finish` alone on the archive, no network.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from gputalks.scraper import youtube
from gputalks.scraper.http import FetchError, FetchPolicy, Fetcher, make_client
from gputalks.scraper.records import ParseError, Problem, utc_now
from gputalks.scraper.snapshot import Snapshot
from gputalks.index.build import (SOURCES, ArchiveUnreadable, Build, Progress, SourceRefresh, collector_paused, talks_beside,
                    write_talks)
from gputalks.project.settings import Settings
from gputalks.tables.curation import CurationError, load_curation
from gputalks.index.enrich import Vocabulary
from gputalks.index.history import WriteStats
from gputalks.index.overrides import Overrides
from gputalks.project.resources import PACKAGE
from gputalks.project.validation import ConfigError, RefreshConfig
from gputalks.index.carry import SourceState, carried_items, next_carry, restrict
from gputalks.exit_codes import EXIT_FAILED, EXIT_OK
from gputalks.index.runs import (RunReport, SourceOutcome, SourceStatus, copy_run, last_good_run,
                   record_source_run, refresh_lock, run_status, served_build, start_run)
from gputalks.index.raw_documents import SqliteArchive, archive
from gputalks.index.store import (IndexFiles, StoreError, archive_missing, building_copy, drop_legacy_tables,
                                  open_archive, open_working_copy, read_only)

# A source yielding fewer than this share of its last good item count has
# most likely broken (a layout change), and is treated as failed.
SHRINK_LIMIT = 0.5
def make_fetcher(archive_path: Path, snapshot: str | Path | None, policy: FetchPolicy,
                 ytdlp_options: dict[str, Any], on_request: Callable[[str], None] | None = None) -> Fetcher:
    """A fetcher that replays `snapshot` when given, else goes live."""
    if snapshot:
        recorded = Snapshot(snapshot)
        client, extractor = make_client(transport=recorded.transport()), recorded.extractor()
    else:
        client, extractor = make_client(timeout=policy.timeout), youtube.YtDlpExtractor(ytdlp_options)
    return Fetcher(client, extractor=youtube.ExplainedRefusals(extractor), archive=SqliteArchive(archive_path),
                   policy=policy, on_request=on_request)


@dataclass(frozen=True)
class RefreshOptions:
    """`sources`: only these (the others keep their last good data); `snapshot`:
    replay this recorded refresh instead of the network; `wait`: queue behind a
    running refresh instead of refusing; `lenient`: overrides naming talks or
    items the index does not hold are warnings, not errors."""

    sources: list[str] | None = None
    snapshot: str | Path | None = None
    wait: float = 0.0  # seconds to queue behind another refresh (inf: as long as it takes)
    policy: FetchPolicy | None = None  # default: from [refresh] of the config
    lenient: bool = False


def refresh(db_path: str | Path, settings: Settings, options: RefreshOptions = RefreshOptions(),
            progress: Progress = Progress()) -> RunReport:
    """Fetch the selected sources (all configured ones by default) and rebuild the index."""
    report, snapshot = progress.report, options.snapshot
    selected = options.sources or [name for name in SOURCES if name in settings.sources]
    unknown = [name for name in selected if name not in SOURCES]
    if unknown:
        raise ValueError(f"unknown source {', '.join(unknown)}; known: {', '.join(SOURCES)}")
    ytdlp = youtube.ytdlp_options(settings.sources.get("youtube", {}))
    limits = RefreshConfig(**settings.sources.get("refresh", {}))
    files = IndexFiles.of(db_path)
    files.check_writable()
    warnings = check_settings(files, settings, options.lenient)  # before any fetching
    missing = archive_missing(files)  # before the lock: a foreign file gets nothing written beside it
    with refresh_lock(files.index, wait=options.wait):
        ledger, news = open_archive(files)
        if news:
            progress.notice(news)
        build = Build(ledger, files, start_run(ledger, "snapshot" if snapshot else "live"), settings, report,
                      keep=missing)
        build.problems.extend(warnings)
        try:
            _fetch_sources(build, selected, options, limits, ytdlp, progress)
            return _finish(build)
        finally:
            ledger.close()


def _fetch_sources(build: Build, selected: list[str], options: RefreshOptions, limits: RefreshConfig,
                   ytdlp: dict[str, Any], progress: Progress) -> None:
    """Fetch, archive and parse each selected source into `build`. The fetcher (its
    connections, a replay's manifest) is closed and let go of before the build
    links and writes (16 MiB less at the peak of a 100,000-talk replay)."""
    report, snapshot, settings = progress.report, options.snapshot, build.settings
    policy = options.policy or FetchPolicy(timeout=limits.request_timeout, retries=limits.retries,
                                           backoff=limits.backoff)
    run_ends = time.monotonic() + limits.run_deadline
    with make_fetcher(build.files.archive, snapshot, policy, ytdlp, progress.on_request) as fetcher:
        for name in selected:
            report(f"{name}: fetching")
            if not snapshot:  # deadlines bound waiting on hosts; a replay reads local files
                fetcher.set_deadline(min(time.monotonic() + limits.source_deadline, run_ends))
            done = _refresh_source(build.ledger, fetcher, name, settings.sources.get(name, {}),
                                   limits.gone_after_runs)
            build.outcomes.append(done.outcome)
            build.problems.extend(done.problems)
            if done.parsed is not None:
                build.fresh[name] = done
            report(f"{name}: {done.outcome.status}, {done.outcome.documents} documents, "
                   f"{done.outcome.items} items" + (f" ({done.outcome.error})" if done.outcome.error else ""))
        build.requests, build.received = fetcher.requests_made, fetcher.bytes_received


def _refresh_source(db: sqlite_utils.Database, fetcher: Fetcher, name: str,
                    config: dict[str, Any], gone_after: int) -> SourceRefresh:
    """Fetch, archive and parse one source; never raises for bad input.

    The outcome is honest: "unchanged" only when every answer was the same as
    the last good run's, "partial" when some items failed (they keep their
    last version), "failed" when nothing usable came back (it keeps its last
    good data). Items the source stopped listing are carried (`carry.py`).
    """
    module = SOURCES[name]
    try:
        fetched = fetcher.within_deadline(name, lambda: module.fetch(fetcher, config))
    except FetchError as exc:
        return SourceRefresh(SourceOutcome(name, "failed", error=str(exc)),
                             problems=[Problem(name, None, str(exc))])
    with db.atomic():
        ids = archive(db, fetched.documents)
    problems = list(fetched.problems)

    def failed(reason: str, items: int = 0) -> SourceRefresh:
        return SourceRefresh(SourceOutcome(name, "failed", items=items, documents=len(ids), error=reason),
                             ids=ids, problems=problems + [Problem(name, None, reason)])

    # Items are fetched concurrently: order errors so the message is the same every run.
    errors = sorted((p for p in problems if p.severity == "error"), key=lambda p: (p.item or "", p.reason))
    if fetched.fatal:
        return failed(f"{fetched.fatal}; kept the last good data")
    if fetched.asked and fetched.failed == fetched.asked:
        return failed(f"every request failed ({fetched.failed}; first: {errors[0].reason}); kept the last good data")
    if not ids and errors:
        return failed(f"nothing could be fetched ({len(errors)} errors; first: {errors[0].reason})")
    last = last_good_run(db, name)
    same = last is not None and last.document_ids == ids and last.config == config
    status: SourceStatus = "partial" if fetched.failed else ("unchanged" if same else "ok")
    failures = (f"{fetched.failed} of {fetched.asked} requests failed ({errors[0].reason}); those items kept "
                "their last version") if fetched.failed and errors else None
    if same and not last.carried:  # nothing new to parse: the last good run stands
        return SourceRefresh(SourceOutcome(name, status, items=len(last.item_keys), documents=len(ids),
                                           note=failures), ids=ids, problems=problems)
    try:
        parsed = module.parse(fetched.documents, config)
    except (ParseError, ValueError, KeyError, TypeError) as exc:
        return failed(f"documents no longer parse: {exc}; kept the last good data")
    problems.extend(parsed.problems)
    listed = {item.key for item in parsed.items}
    if last and last.item_keys and len(listed) < SHRINK_LIMIT * len(last.item_keys):
        return failed(f"yielded {len(listed)} items where the last good run had {len(last.item_keys)}; "
                      "treated as a failure (kept the last good data), not as mass removal", len(listed))
    carry = next_carry(last, listed, gone_after)
    try:
        carried = carried_items(db, module, carry, config).items
    except (ParseError, ValueError, KeyError, TypeError) as exc:  # dropping them would mark them gone
        return failed(f"carried items no longer parse: {exc}; kept the last good data")
    carry = restrict(carry, {item.key for item in carried})
    parsed.items.extend(carried)
    note = failures
    if carry:
        missing = sum(len(g.absent) for g in carry)
        carried_note = f"{missing} items no longer listed are kept until missing for {gone_after} successful runs"
        problems.append(Problem(name, None, carried_note, severity="note"))
        note = "; ".join(filter(None, (failures, carried_note)))
    state = SourceState(ids, config, sorted(listed), carry)
    return SourceRefresh(SourceOutcome(name, status, items=len(parsed.items), documents=len(ids), note=note),
                         parsed, ids, problems, state)


def rebuild(db_path: str | Path, settings: Settings, *, wait: float = 0.0, lenient: bool = False,
            progress: Progress = Progress()) -> RunReport:
    """Re-parse every source's last good documents from the archive; no network."""
    files = IndexFiles.of(db_path)
    if not files.index.exists():
        raise FileNotFoundError(f"{db_path}: no index here; run `gputalks refresh` first")
    files.check_writable()
    warnings = check_settings(files, settings, lenient)
    if archive_missing(files):
        raise StoreError(f"{files.archive}: missing; rebuild re-reads the archived documents, and without "
                         f"them every talk would be marked gone. Restore the archive beside {files.index.name} "
                         "(a backup, the nightly's state release), or run `gputalks refresh`, which starts a "
                         "new one from what it fetches and marks nothing gone")
    with refresh_lock(files.index, wait=wait):
        ledger, news = open_archive(files)
        if news:
            progress.notice(news)
        try:
            build = Build(ledger, files, start_run(ledger, "rebuild"), settings, progress.report)
            build.problems.extend(warnings)
            return _finish(build, force=True)
        finally:
            ledger.close()


def check_settings(files: IndexFiles, settings: Settings, lenient: bool) -> list[Problem]:
    """Before anything runs: curation files that parse, overrides that parse and
    name talks the index holds. A ConfigError otherwise (with `lenient`, unknown
    talks are warnings); an item no source lists now is always a warning."""
    try:
        load_curation(list(settings.curation))
    except CurationError as exc:
        raise ConfigError(str(exc).splitlines()) from None
    Vocabulary.load(settings.topics)
    overrides = Overrides.load(settings.overrides)
    if not files.index.exists() or not (overrides.same or overrides.never):
        return []
    with closing(sqlite_utils.Database(read_only(files.index))) as db:
        typos, vanished = overrides.unknown_ids(db)
    if typos and not lenient:
        raise ConfigError(typos + ["(fix or remove these decisions; --lenient makes them warnings)"])
    return [Problem("overrides", None, line, severity="warning") for line in typos + vanished]


def _inputs_digest(build: Build) -> str:
    """Everything a build reads: each source's document set, the config, the
    overrides, the curation files and the code. Equal digests, equal index."""
    parts: dict[str, Any] = {"config": build.settings.sources}
    for name in SOURCES:
        last = last_good_run(build.ledger, name)
        parts[f"documents:{name}"] = last.columns() if last else None
    overrides = build.settings.overrides
    files = ([Path(overrides)] if overrides else []) + list(build.settings.curation) + [build.settings.topics]
    files += sorted(PACKAGE.rglob("*.py"))
    for path in files:
        parts[f"file:{path.name}:{path.parent.name}"] = hashlib.sha256(path.read_bytes()).hexdigest() \
            if path.exists() else None
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _finish(build: Build, force: bool = False) -> RunReport:
    """Record the source runs; then, unless nothing the build reads changed
    since the served index was built, build a working copy and swap it in;
    then close the run. An unchanged night writes a few rows to the archive
    and leaves the served index alone (a night with item errors rebuilds, so
    the problems the index and `status` show are that night's)."""
    ledger, when = build.ledger, utc_now()
    status, code = run_status(build.outcomes) if build.outcomes else ("ok", EXIT_OK)
    stats = WriteStats()
    with ledger.atomic():
        for done in build.fresh.values():
            record_source_run(ledger, build.run_id, done.outcome, done.state, when)
        for outcome in build.outcomes:
            if outcome.status == "failed":
                record_source_run(ledger, build.run_id, outcome, None, when)
    digest = _inputs_digest(build)
    served = served_build(build.files.index)
    # A night with failures rebuilds, so the index's problems are this night's.
    troubled = any(p.severity == "error" for p in build.problems)
    if not force and not troubled and served and served.inputs == digest and not served.legacy:
        build.report("nothing changed since the last build: the index is left as it is")
        counts, problems_run, built = served.counts, served.run_id, False
    else:
        try:
            # The worker (forked with the collector already paused) parses while this process
            # copies the index.
            with collector_paused(), closing(talks_beside(build)) as talks, \
                    building_copy(build.files.index) as work_path:
                build.db = open_working_copy(work_path)
                try:
                    with build.db.atomic():
                        drop_legacy_tables(build.db)
                        copy_run(ledger, build.db, build.run_id)
                        stats, counts = write_talks(build, when, talks)
                        _record_build(build, build.db, RunRecord(status, code, stats, counts, digest))
                        build.db.table("refresh_runs").update(build.run_id, index_summary(build.db))
                    if served and served.legacy:
                        build.db.execute("vacuum")
                finally:
                    build.db.close()
            problems_run, built = build.run_id, True
        except ArchiveUnreadable as exc:  # the working copy is gone; the served index is as it was
            build.outcomes = [o for o in build.outcomes if o.name != exc.source]
            build.outcomes.append(SourceOutcome(exc.source, "failed", error=f"{exc.reason}; the index is unchanged"))
            status, code = "failed", EXIT_FAILED  # nothing this run fetched reached the index either
            stats = WriteStats()
            counts, problems_run, built = (served.counts, served.run_id, False) if served else (None, None, False)
    with ledger.atomic():
        _record_build(build, ledger, RunRecord(status, code, stats, counts, digest if built else None,
                                               problems_run=problems_run, built=built))
    return RunReport(build.run_id, status, code, build.outcomes, stats, build.problems, build.requests)


def index_summary(db: sqlite_utils.Database) -> dict[str, int]:
    """The numbers the home page shows, counted once per build instead of once per page view."""
    talks, series, hours = db.execute(
        "select count(*), count(distinct series), coalesce(sum(duration_s), 0) / 3600 from talks "
        "where gone_since is null").fetchone()
    return {"live_talks": talks, "series_count": series, "video_hours": hours}


@dataclass(frozen=True)
class RunRecord:
    """How a run ended, as its row says: its status and exit code, what it wrote, the counts,
    the digest of its inputs (when it built), the run whose problems stand, and whether it built."""

    status: str
    code: int
    stats: WriteStats
    counts: str | None
    digest: str | None
    problems_run: int | None = None
    built: bool = True


def _carry_problems(ledger: sqlite_utils.Database, run_id: int, problems: list[Problem]) -> None:
    """This build's problems in the archive: one the last build found too keeps its row, whose
    last run becomes this one; only new ones are new rows (127 warnings stood night after night:
    half of the archive's growth)."""
    last = ledger.execute("select problems_run from refresh_runs where finished_at is not null and id < ? "
                          "and problems_run is not null order by id desc limit 1", [run_id]).fetchone()
    standing: dict[tuple, list[int]] = {}
    if last:
        for row_id, *key in ledger.execute(
                "select id, source, item, severity, reason from problems "
                "where ? between run_id and coalesce(last_run_id, run_id)", [last[0]]):
            standing.setdefault(tuple(key), []).append(row_id)
    again, new = [], []
    for p in problems:
        rows = standing.get((p.source, p.item, p.severity, p.reason))
        if rows:
            again.append(rows.pop())
        else:
            new.append({"run_id": run_id, "source": p.source, "item": p.item, "severity": p.severity,
                        "reason": p.reason, "last_run_id": run_id, "builds": 1})
    ledger.conn.executemany("update problems set last_run_id = ?, builds = coalesce(builds, 1) + 1 where id = ?",
                       [(run_id, row_id) for row_id in again])
    if new:
        ledger.table("problems").insert_all(new)


def _record_build(build: Build, db: sqlite_utils.Database, record: RunRecord) -> None:
    """The run's row (and, when it built, its problems) in the archive or the served index. The
    served index keeps the latest build's problems only (the runs keep their counts): 127 rows a
    night made it the largest table of the file readers download."""
    status, code, stats = record.status, record.code, record.stats
    if record.built and db is build.db:
        db.execute("delete from problems where run_id != ?", [build.run_id])
    if record.built and build.problems:
        if db is build.db:
            db.table("problems").insert_all(
                {"run_id": build.run_id, "source": p.source, "item": p.item, "severity": p.severity,
                 "reason": p.reason} for p in build.problems)
        else:
            _carry_problems(db, build.run_id, build.problems)
    db.table("refresh_runs").update(build.run_id, {
        "finished_at": utc_now(), "status": status, "exit_code": code,
        "sources": json.dumps({o.name: {"status": o.status, "items": o.items, "documents": o.documents,
                                        "error": o.error} for o in build.outcomes}),
        "counts": record.counts, "talks_written": stats.talks_written, "changes": stats.changes,
        "requests": build.requests, "bytes": build.received,
        "inputs": record.digest, "problems_run": record.problems_run or build.run_id})

