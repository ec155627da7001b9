"""A build in progress, and the making of its talks: the archived documents of each source
parsed (in a forked worker when they come from the archive), linked, merged and written
beside each other (worker.py), then the curation mirrored. pipeline.py decides when a build
runs; this is what it runs.
"""

from __future__ import annotations

import ctypes
import gc
import json
import sqlite3
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial

import sqlite_utils

from gputalks.scraper.sources import SOURCES as REGISTRY
from gputalks.scraper.records import ParseError, ParseResult, Problem
from gputalks.index.carry import SourceState, parse_state
from gputalks.project.settings import Settings
from gputalks.index.curated import save_curation
from gputalks.tables.curation import CurationError, load_curation
from gputalks.index.enrich import SearchWords, Vocabulary, write_search_vocabulary
from gputalks.index.group_stats import write_group_stats
from gputalks.index.hand_facts import apply_facts
from gputalks.index.history import CHUNK, WriteStats, apply_talks
from gputalks.index.link import LastLink, link_talks
from gputalks.index.merge import MergedTalk, json_list, merge_talk
from gputalks.index.overrides import Overrides
from gputalks.index.related import Facts, ranked, write_related
from gputalks.index.runs import SourceOutcome, last_good_run
from gputalks.index.facet_keys import FacetCoder
from gputalks.index.schema import index_transcripts, transcripts_indexed
from gputalks.index.similarity import forget_titles
from gputalks.index.store import IndexFiles, read_archive, read_only
from gputalks.index.worker import FLUSH, Returning, run_beside

# Each source's module (fetch, parse), by name, in the registry's order.
SOURCES = {name: source.load() for name, source in REGISTRY.items()}
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
    keep: bool = False  # the archive was missing: mark nothing gone, drop no row (history.Writing)


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
    the worker the others. Linking starts 1.9 -> 1.5 s after the worker does, at 100,000
    talks. Parsing YouTube here too and handing its items over (0.3 s to send, 0.2 s to take)
    started linking 0.1-0.5 s sooner (rebuilds 0.95x, median of 9 pairs) but raised the
    build's peak from 388 to 520 MiB at 100,000 talks, and past 1 GiB at 300,000."""
    documents = {name: len(last.document_ids) for name in SOURCES if name in build.settings.sources
                 and (last := last_good_run(build.ledger, name)) is not None}
    if not documents:
        return [], list(SOURCES)
    smallest = min(documents, key=documents.__getitem__)
    return [smallest], [name for name in SOURCES if name != smallest]


# The forked worker pays from about this many items (the sources' last good runs together):
# below it, forking and handing talks over cost more than the second core gives back
# (bench/fork.py: docs/design.md, "The worker").
FORK_FROM_ITEMS = 2000


def _worth_forking(build: Build) -> bool:
    return sum(len(last.item_keys) for name in SOURCES
               if (last := last_good_run(build.ledger, name)) is not None) >= FORK_FROM_ITEMS


def talks_beside(build: Build) -> Returning[MergedTalk | None, MadeTalks]:
    """The build's talks, parsed, linked and merged in a worker process beside this one (forked
    now), when the documents come from the archive and are many; read them to have them made."""
    # Fresh parses first (as they were fetched), then the other sources: the order of the counts.
    order = [name for name, done in build.fresh.items() if done.parsed is not None]
    order += [name for name in SOURCES if name not in order]
    here, there = _parse_split(build)
    # A refresh that parsed fresh documents holds them here: a worker reading them would
    # copy every page it touched, so they are linked and merged in this process.
    return Returning(run_beside(partial(_make_talks, build, order, there), build.report, batch=CHUNK,
                                forked=False if build.fresh or not _worth_forking(build) else None,
                                handed=partial(_parse_sources, build, here)))


def write_talks(build: Build, when: str, talks: Returning[MergedTalk | None, MadeTalks]) -> tuple[WriteStats, str]:
    """Write the talks as they are made, then (their indexes built meanwhile) their related talks,
    which the worker ranks once it has sent the last talk; (stats, counts JSON)."""
    stats = apply_talks(build.db, build.run_id, when, _until_the_end(talks), keep=build.keep)
    curation = _write_rest(build, stats)
    for _ in talks:  # the rest: nothing but the worker's result
        pass
    made: MadeTalks = talks.value
    build.outcomes.extend(made.outcomes)
    build.problems.extend(made.problems + curation)
    # The rows as made are the live talks' rows, unless the writing kept older values in them or
    # kept talks this build did not make: then the search's words are read back from the index.
    write_search_vocabulary(build.db, Vocabulary.load(build.settings.topics),
                            None if build.keep or stats.kept_values else made.words)
    write_related(build.db, made.related, keep=build.keep)
    return stats, made.counts


def _write_rest(build: Build, stats: WriteStats) -> list[Problem]:
    """What hangs off the talks besides them: transcripts' index, the talks' statistics and
    curation; the curation's problems."""
    if stats.transcripts_changed or not transcripts_indexed(build.db):
        build.report("indexing transcripts")
        index_transcripts(build.db)
    # How many talks each index value has, for SQLite's planner (sqlite_stat1; 0.1 s at 100,000
    # talks). Without it, a series, a topic and a speaker read the series' 62,000 talks where the
    # speaker's few should lead: 8 ms a query, 0.2 ms with it.
    build.db.execute("analyze talks")
    write_group_stats(build.db)
    return _mirror_curation(build)


@dataclass
class MadeTalks:
    """What making the talks found besides them: the outcomes of the sources kept from
    the archive, the problems parsing and linking found, and the counts (JSON)."""

    outcomes: list[SourceOutcome]
    problems: list[Problem]
    counts: str
    related: list[tuple[str, str]]  # (talk id, JSON of its related talks' ids): related.py
    words: set[str]  # the search's vocabulary, as the talks were made (enrich.SearchWords)


def _make_talks(build: Build, order: list[str], there: list[str], report: Report,
                received: Callable[[], dict[str, SourceParse]]) -> Generator[MergedTalk | None, None, MadeTalks]:
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
        counts, facts, words = yield from _linked_and_merged(mine, parsed_by_source)
        yield None  # the talks end here: the writer indexes them while their related talks are ranked
        yield FLUSH
        release_freed_memory()  # what merging freed, before ranking needs more
        related = list(ranked(facts))
    return MadeTalks(mine.outcomes[len(build.outcomes):], mine.problems, counts, related, words)


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


def _linked_and_merged(build: Build, parsed_by_source: dict[str, ParseResult]
                       ) -> Generator[MergedTalk, None, tuple[str, Facts, set[str]]]:
    """Merged talks; returns the counts (JSON), what ranking related talks reads of them and their words.
    Parsed items are held by their clusters alone once linked (emptying `parsed_by_source`),
    and each cluster is let go of once merged: the build holds the parsed items and one chunk
    of merged talks, never every merged row as well."""
    counts: dict[str, int] = {name: len(parsed.items) for name, parsed in parsed_by_source.items()}
    items = [item for parsed in parsed_by_source.values() for item in parsed.items]
    parsed_by_source.clear()
    overrides = Overrides.load(build.settings.overrides)
    linked = link_talks(items, overrides, previous_talks(build.files))
    del items
    forget_titles()
    build.problems.extend(linked.problems)
    counts["talks"] = len(linked.clusters)
    vocabulary, coder = Vocabulary.load(build.settings.topics), FacetCoder()
    clusters = linked.clusters[::-1]
    linked.clusters.clear()
    facts, words = Facts(), SearchWords()
    while clusters:
        talk = merge_talk(clusters.pop())
        talk.row["topics"] = json_list(tuple(vocabulary.topics_for(talk)))
        if hand := overrides.facts.get(talk.row["id"]):
            build.problems.extend(apply_facts(talk, hand, overrides.path.name if overrides.path else "overrides"))
        talk.facet_keys, talk.facet_values = coder.code(talk.row)
        facts.add(talk.row)
        words.add(talk.row)
        yield talk
    return json.dumps(counts), facts, words.all()


def previous_talks(files: IndexFiles) -> dict[str, LastLink]:
    """The served index's items that belonged to a talk not their own (a video linked to a
    lecture): item ref -> that talk and the link's score. Nothing when there is no index yet."""
    if not files.index.exists():
        return {}
    try:
        with closing(read_only(files.index)) as served:
            rows = served.execute("select source, item_key, talk_id, score from talk_sources where talk_id != "
                                  "iif(source = 'github', 'gpumode-', source || '-') || item_key")
            return {f"{source}:{key}": LastLink(talk_id, score or 0.0) for source, key, talk_id, score in rows}
    except sqlite3.Error:  # an index from before talk_sources, or not readable: no memory of links
        return {}


def _until_the_end(talks: Iterable[MergedTalk | None]) -> Iterator[MergedTalk]:
    """The talks up to the None that ends them (the worker goes on to rank their related talks)."""
    for talk in talks:
        if talk is None:
            return
        yield talk


def _mirror_curation(build: Build) -> list[Problem]:
    """The docs' curated tables, mirrored into the index so Datasette shows them."""
    try:
        unresolved = save_curation(build.db, load_curation(list(build.settings.curation)))
    except CurationError as exc:
        return [Problem("curation", None, str(exc))]
    return [Problem("curation", None, reason, severity="warning") for reason in unresolved]
