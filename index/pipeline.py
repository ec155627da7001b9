"""The refresh: fetch each source, archive what it returned, parse, link, merge, write.

    refresh()  -> lock, the archive (talks.archive.db), run row   (runs.py, store.py)
      per source: fetch (scraper/<source>.py through scraper/http.py, which asks
                  the archive for last versions: store.SqliteArchive)
                  -> archive (store.archive) -> parse (scraper/<source>.py)
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

import ctypes
import gc
import hashlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import sqlite_utils

from ..scraper import github, gtc, youtube
from ..scraper.http import FetchError, FetchPolicy, Fetcher, make_client, utc_now
from ..scraper.records import ParseError, ParseResult, Problem
from ..scraper.snapshot import Snapshot
from .config import Settings
from .curation import CurationError, load_curation, save_curation
from .enrich import Vocabulary, date_key, search_labels, search_terms, write_search_vocabulary
from .history import CHUNK, WriteStats, apply_talks
from .link import link_talks
from .merge import MergedTalk, json_list, merge_talk
from .overrides import Overrides
from .resources import CODE
from .validation import ConfigError, RefreshConfig
from .carry import SourceState, carried_items, next_carry, parse_state, restrict
from .runs import (EXIT_FAILED, EXIT_OK, RunReport, SourceOutcome, SourceStatus, copy_run, last_good_run,
                   record_source_run, refresh_lock, run_status, served_build, start_run)
from .schema import FacetCoder, index_transcripts, transcripts_indexed
from .similarity import forget_titles
from .store import (IndexFiles, SqliteArchive, archive, building_copy, drop_legacy_tables, open_archive,
                    open_working_copy, read_archive)
from .worker import Returning, run_beside

SOURCES = {module.NAME: module for module in (github, youtube, gtc)}
# A source yielding fewer than this share of its last good item count has
# most likely broken (a layout change), and is treated as failed.
SHRINK_LIMIT = 0.5
Report = Callable[[str], None]


def _quiet(message: str) -> None:
    pass


@dataclass(frozen=True)
class Progress:
    """Where a long run says what it is doing: a line per step, one per request,
    and notices the user must see (a first run, a missing archive)."""

    report: Report = _quiet
    on_request: Report | None = None
    notice: Report = _quiet


@dataclass
class SourceRefresh:
    """What fetching one source gave: its outcome, the parsed items when the
    documents changed (None when unchanged or failed), the archived ids, problems."""

    outcome: SourceOutcome
    parsed: ParseResult | None = None
    ids: list[int] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    state: SourceState | None = None  # what to record as the source's last good run


@dataclass
class Build:
    """One refresh or rebuild in progress: its run in the archive (`ledger`)
    and, once it writes, the working copy of the served index (`db`)."""

    ledger: sqlite_utils.Database
    files: IndexFiles
    run_id: int
    settings: Settings
    report: Report = _quiet
    db: sqlite_utils.Database | None = None
    fresh: dict[str, SourceRefresh] = field(default_factory=dict)
    outcomes: list[SourceOutcome] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    requests: int = 0
    received: int = 0


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
    with refresh_lock(files.index, wait=options.wait):
        ledger, news = open_archive(files)
        if news:
            progress.notice(news)
        build = Build(ledger, files, start_run(ledger, "snapshot" if snapshot else "live"), settings, report)
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
        fetched = module.fetch(fetcher, config)
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
    with closing(sqlite_utils.Database(sqlite3.connect(files.index.as_uri() + "?mode=ro", uri=True))) as db:
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
    files += [path for folder in CODE for path in sorted(folder.glob("*.py"))]
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
            with collector_paused(), closing(_talks_beside(build)) as talks, \
                    building_copy(build.files.index) as work_path:
                build.db = open_working_copy(work_path)
                try:
                    with build.db.atomic():
                        drop_legacy_tables(build.db)
                        copy_run(ledger, build.db, build.run_id)
                        stats, counts = _build(build, when, talks)
                        _record_build(build, build.db, status, code, stats, counts, digest)
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
        _record_build(build, ledger, status, code, stats, counts, digest if built else None,
                      problems_run=problems_run, problems=built)
    return RunReport(build.run_id, status, code, build.outcomes, stats, build.problems, build.requests)


def index_summary(db: sqlite_utils.Database) -> dict[str, int]:
    """The numbers the home page shows, counted once per build instead of once per page view."""
    talks, series, hours = db.execute(
        "select count(*), count(distinct series), coalesce(sum(duration_s), 0) / 3600 from talks "
        "where gone_since is null").fetchone()
    return {"live_talks": talks, "series_count": series, "video_hours": hours}


def _record_build(build: Build, db: sqlite_utils.Database, status: str, code: int, stats: WriteStats,
                  counts: str, digest: str | None, problems_run: int | None = None,
                  problems: bool = True) -> None:
    """The run's row (and, when it built, its problems) in the archive or the served index. The
    served index keeps the latest build's problems only (the runs keep their counts): 127 rows a
    night made it the largest table of the file readers download."""
    if problems and db is build.db:
        db.execute("delete from problems where run_id != ?", [build.run_id])
    if problems and build.problems:
        db.table("problems").insert_all(
            {"run_id": build.run_id, "source": p.source, "item": p.item, "severity": p.severity,
             "reason": p.reason} for p in build.problems)
    db.table("refresh_runs").update(build.run_id, {
        "finished_at": utc_now(), "status": status, "exit_code": code,
        "sources": json.dumps({o.name: {"status": o.status, "items": o.items, "documents": o.documents,
                                        "error": o.error} for o in build.outcomes}),
        "counts": counts, "talks_written": stats.talks_written, "changes": stats.changes,
        "requests": build.requests, "bytes": build.received,
        "inputs": digest, "problems_run": problems_run or build.run_id})


class ArchiveUnreadable(Exception):
    """A source's kept documents no longer parse (a parser changed, an archive damaged).
    Building without its items would mark every talk of the source gone, so the build stops
    and the served index stays as it was; the run says which source and why."""

    def __init__(self, source: str, reason: str):
        super().__init__(source, reason)
        self.source, self.reason = source, reason

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


@dataclass
class SourceParse:
    """One source's items for a build, and what parsing them adds to the run: the source's
    outcome when its documents were kept from the archive, and the problems found."""

    parsed: ParseResult
    outcome: SourceOutcome | None = None
    problems: list[Problem] = field(default_factory=list)


def _parse_sources(build: Build, names: list[str]) -> dict[str, SourceParse]:
    """Those of `names` the build has items of: a fresh parse (handed over: the build is its
    only holder from here), else the last good documents of the source, parsed again."""
    reported = {o.name for o in build.outcomes}
    found: dict[str, SourceParse] = {}
    for name in names:
        done = build.fresh.get(name)
        if done is not None and done.parsed is not None:
            found[name], done.parsed = SourceParse(done.parsed), None
            continue
        last = last_good_run(build.ledger, name) if name in build.settings.sources else None
        if last is None:
            continue
        try:
            parsed = parse_state(build.ledger, SOURCES[name], last, build.settings.sources[name])
        except (ParseError, ValueError, KeyError, TypeError) as exc:
            raise ArchiveUnreadable(name, f"archived documents no longer parse: {exc}") from exc
        if lost := _items_lost(last, parsed):
            raise ArchiveUnreadable(name, lost)
        kept = None if name in reported else SourceOutcome(name, "kept", items=len(parsed.items),
                                                          documents=len(last.document_ids))
        found[name] = SourceParse(parsed, kept, list(parsed.problems))
    return found


def _items_lost(last: SourceState, parsed: ParseResult) -> str | None:
    """Why the documents of a good run, parsed again, no longer give items they gave, or None.
    One damaged document (a catalog page) is an item error to a parse; here it would mark
    its talks gone, so it stops the build like a source that no longer parses at all.
    Items dropped without an error (a parser now skipping what is not a talk) are not lost."""
    errors = [p for p in parsed.problems if p.severity == "error"]
    if not errors:
        return None
    missing = set(last.item_keys).difference(item.key for item in parsed.items)
    if not missing:
        return None
    first = errors[0]
    return (f"archived documents no longer give {len(missing)} of the {len(last.item_keys)} items they gave "
            f"({first.item + ': ' if first.item else ''}{first.reason})")


def _parse_split(build: Build) -> tuple[list[str], list[str]]:
    """The sources this process parses while the worker starts, and those the worker parses.
    This process takes the source with the fewest archived documents (GitHub's README and
    tree: 0.4 s of Markdown at 100,000 talks, 2,000 items that cost nothing to hand over);
    the worker the others. Handing over a larger source's items would cost about what
    parsing them does, and raise this process's peak (by 160 MiB at 100,000 talks).
    Linking starts 1.9 -> 1.5 s after the worker does, at 100,000 talks."""
    documents = {name: len(last.document_ids) for name in SOURCES if name in build.settings.sources
                 and (last := last_good_run(build.ledger, name)) is not None}
    if not documents:
        return [], list(SOURCES)
    smallest = min(documents, key=documents.__getitem__)
    return [smallest], [name for name in SOURCES if name != smallest]


def _talks_beside(build: Build) -> Returning[MergedTalk, MadeTalks]:
    """The build's talks, parsed, linked and merged in a worker process beside this one (forked
    now), when the documents come from the archive; read them to have them made."""
    # Fresh parses first (as they were fetched), then the other sources: the order of the counts.
    order = [name for name, done in build.fresh.items() if done.parsed is not None]
    order += [name for name in SOURCES if name not in order]
    here, there = _parse_split(build)
    # A refresh that parsed fresh documents holds them here: a worker reading them would
    # copy every page it touched, so they are linked and merged in this process.
    return Returning(run_beside(partial(_make_talks, build, order, there), build.report, batch=CHUNK,
                                forked=False if build.fresh else None,
                                handed=partial(_parse_sources, build, here)))


def _build(build: Build, when: str, talks: Returning[MergedTalk, MadeTalks]) -> tuple[WriteStats, str]:
    """Write the talks as they are made; (stats, counts JSON)."""
    stats = apply_talks(build.db, build.run_id, when, _with_search_terms(talks))
    made: MadeTalks = talks.value
    build.outcomes.extend(made.outcomes)
    build.problems.extend(made.problems)
    if stats.transcripts_changed or not transcripts_indexed(build.db):
        build.report("indexing transcripts")
        index_transcripts(build.db)
    build.problems.extend(_mirror_curation(build))
    write_search_vocabulary(build.db, Vocabulary.load(build.settings.topics))
    return stats, made.counts


@dataclass
class MadeTalks:
    """What making the talks found besides them: the outcomes of the sources kept from
    the archive, the problems parsing and linking found, and the counts (JSON)."""

    outcomes: list[SourceOutcome]
    problems: list[Problem]
    counts: str


def _make_talks(build: Build, order: list[str], there: list[str], report: Report,
                received: Callable[[], dict[str, SourceParse]]) -> Generator[MergedTalk, None, MadeTalks]:
    """Parsed, linked and merged talks, one at a time: the sources `there`, parsed here, and
    the others, `received()` from the build's process. It may run in a forked worker
    (`worker.py`), so it reads the archive through a connection of its own and adds to
    copies of the build's lists, whose new entries it returns."""
    with closing(read_archive(build.files)) as ledger:
        mine = replace(build, ledger=ledger, db=None, outcomes=list(build.outcomes), problems=[])
        parses = _parse_sources(mine, there)
        parses.update(received())
        parsed_by_source: dict[str, ParseResult] = {}
        for name in (name for name in order if name in parses):
            source = parses.pop(name)
            parsed_by_source[name] = source.parsed
            if source.outcome is not None:
                mine.outcomes.append(source.outcome)
            mine.problems.extend(source.problems)
        release_freed_memory()
        report("linking and writing the index")
        counts = yield from _linked_and_merged(mine, parsed_by_source)
    return MadeTalks(mine.outcomes[len(build.outcomes):], mine.problems, counts)


def release_freed_memory() -> None:
    """Give back to the system what parsing freed (the raw documents, their JSON) and C's
    allocator kept for reuse: linking's smaller objects seldom reuse it, so it would add to the
    build's peak (23 MiB at 100,000 talks). glibc's malloc_trim; elsewhere nothing to do."""
    if not sys.platform.startswith("linux"):
        return
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # musl has none
    if trim is not None:
        trim(0)


@contextmanager
def collector_paused():
    """Parsing, linking and writing make millions of small acyclic objects that Python's
    cyclic collector would scan again and again: it is off until the writing is done, and
    what existed before is frozen out of its sight (13.34 -> 12.46 s at 100k, medians
    of 4 alternating runs; raising its thresholds instead gained nothing measurable). The
    one cyclic structure parsing builds, an HTML page's tree, is taken apart when read.
    Paused before the worker is forked: it inherits the pause, and neither process touches
    the other's shared pages to freeze them (forking first, then pausing in each: no gain)."""
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def _linked_and_merged(build: Build, parsed_by_source: dict[str, ParseResult]) -> Generator[MergedTalk, None, str]:
    """Merged talks; returns the counts (JSON). Parsed items are held by their clusters
    alone once linked (emptying `parsed_by_source`), and each cluster is let go of once
    merged: the build holds the parsed items and one chunk of merged talks, never every
    merged row as well."""
    counts: dict[str, int] = {name: len(parsed.items) for name, parsed in parsed_by_source.items()}
    items = [item for parsed in parsed_by_source.values() for item in parsed.items]
    parsed_by_source.clear()
    linked = link_talks(items, Overrides.load(build.settings.overrides))
    del items
    forget_titles()
    build.problems.extend(linked.problems)
    counts["talks"] = len(linked.clusters)
    vocabulary, coder = Vocabulary.load(build.settings.topics), FacetCoder()
    clusters = linked.clusters[::-1]
    linked.clusters.clear()
    while clusters:
        talk = merge_talk(clusters.pop())
        talk.row["topics"] = json_list(tuple(vocabulary.topics_for(talk)))
        talk.facet_keys, talk.facet_values = coder.code(talk.row)
        yield talk
    return json.dumps(counts)


def _with_search_terms(talks: Iterable[MergedTalk]) -> Iterator[MergedTalk]:
    """The talks with their search fields and order key, added in the build's process: merging beside writing,
    the worker is the slower side (it waited 0.6 s for the worker at 100,000 talks)."""
    for talk in talks:
        talk.row["search_terms"] = search_terms(talk.row["title"])
        talk.row["search_labels"] = search_labels(talk.row)
        talk.row["date_key"] = date_key(talk.row)
        yield talk


def _mirror_curation(build: Build) -> list[Problem]:
    """The docs' curated tables, mirrored into the index so Datasette shows them."""
    try:
        unresolved = save_curation(build.db, load_curation(list(build.settings.curation)))
    except CurationError as exc:
        return [Problem("curation", None, str(exc))]
    return [Problem("curation", None, reason, severity="warning") for reason in unresolved]
