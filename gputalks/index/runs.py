"""Runs: one refresh at a time (the lock), the run and source-run rows, exit
codes, and the status a maintainer reads afterwards.

Exit codes: 0 every selected source ok or unchanged; 1 some source partial
(some items failed and kept their last version) or failed (it kept its last
good data); 3 every selected source failed; 4 another refresh holds the lock;
2 a usage or configuration error; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import sqlite_utils

from gputalks.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_PARTIAL
from gputalks.scraper.records import Problem, utc_now
from gputalks.index.carry import SourceState
from gputalks.index.stats import WriteStats
from gputalks.index.store import read_only

# ok: fetched and parsed; unchanged: asked, and every answer was the same as
# its last good run's (304s, identical documents); partial: some items failed
# and kept their last version; failed: nothing usable came back (every request
# failed, the listing could not be read, the layout changed, a deadline
# passed): it kept its last good data; kept: not selected this run.
SourceStatus = Literal["ok", "unchanged", "partial", "failed", "kept"]
GOOD = ("ok", "unchanged", "partial")  # a source run whose documents are good
RunStatus = Literal["ok", "partial", "failed"]


class RefreshLocked(RuntimeError):
    pass


@dataclass
class SourceOutcome:
    name: str
    status: SourceStatus
    items: int = 0
    documents: int = 0
    error: str | None = None
    note: str | None = None  # what a maintainer should know about a good run (items carried)


@dataclass
class RunReport:
    run_id: int
    status: RunStatus
    exit_code: int
    outcomes: list[SourceOutcome] = field(default_factory=list)
    stats: WriteStats = field(default_factory=WriteStats)
    problems: list[Problem] = field(default_factory=list)
    requests: int = 0


def run_status(outcomes: list[SourceOutcome]) -> tuple[RunStatus, int]:
    """The run's status and exit code from its sources' outcomes."""
    failed = [o for o in outcomes if o.status == "failed"]
    if failed and len(failed) == len(outcomes):
        return "failed", EXIT_FAILED
    if failed or any(o.status == "partial" for o in outcomes):
        return "partial", EXIT_PARTIAL
    return "ok", EXIT_OK


LOCK_POLL_S = 0.2


@contextmanager
def refresh_lock(db_path: str | Path, wait: float | bool = 0.0) -> Iterator[None]:
    """One refresh at a time per database: the second waits up to `wait` seconds (True: for as
    long as it takes) or refuses. Give it the real path (`IndexFiles.index`): through a symlink,
    the same lock."""
    lock_path = Path(f"{db_path}.lock")
    patience = math.inf if wait is True else float(wait or 0)
    give_up = time.monotonic() + patience
    with open(lock_path, "a+") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < give_up:
                    time.sleep(min(LOCK_POLL_S, max(0.0, give_up - time.monotonic())))
                    continue
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                waited = f"waited {patience:g} s; " if patience else ""
                raise RefreshLocked(f"another refresh of {db_path} is running ({holder}); {waited}"
                                    "try again later or pass --wait [SECONDS]") from None
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


def start_run(db: sqlite_utils.Database, mode: str) -> int:
    with db.atomic():
        return db.table("refresh_runs").insert({"started_at": utc_now(), "mode": mode,
                                                "status": "running"}).last_pk


def record_source_run(db: sqlite_utils.Database, run_id: int, outcome: SourceOutcome,
                      state: SourceState | None, when: str) -> None:
    """A source's part of a run; with `state` (a good run) what it read and carries."""
    columns = state.columns() if state else {"document_ids": "[]"}
    db.table("source_runs").insert({"run_id": run_id, "source": outcome.name, "status": outcome.status,
                                    "items": outcome.items, "error": outcome.error, "started_at": when,
                                    "finished_at": when, **columns})


def last_good_run(db: sqlite_utils.Database, source: str) -> SourceState | None:
    """What the source's newest good run read and carries."""
    marks = ", ".join("?" * len(GOOD))
    row = next(iter(db.query(f"select * from source_runs where source = ? and status in ({marks}) "
                             "order by id desc limit 1", [source, *GOOD])), None)
    return SourceState.from_row(row) if row else None


def copy_run(ledger: sqlite_utils.Database, db: sqlite_utils.Database, run_id: int) -> None:
    """The run's row from the archive's ledger into the index it builds (history rows point at it)."""
    db.table("refresh_runs").insert(ledger.table("refresh_runs").get(run_id), replace=True)


@dataclass(frozen=True)
class ServedBuild:
    """What the served index says about the run that built it."""

    run_id: int
    inputs: str | None
    counts: str | None
    legacy: bool  # it still holds the raw documents (written before the archive had its own file)


def served_build(path: Path) -> ServedBuild | None:
    """Read without writing (a read-only connection); None when there is no built index."""
    if not path.exists():
        return None
    with closing(read_only(path)) as conn:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type = 'table'")}
        if "refresh_runs" not in tables:
            return None
        row = conn.execute("select id, inputs, counts from refresh_runs where inputs is not null "
                           "order by id desc limit 1").fetchone()
    return ServedBuild(row[0], row[1], row[2], "raw_documents" in tables) if row else None


# ---- status ----------------------------------------------------------------

@dataclass
class LinkCount:
    source: str
    linked: int
    items: int


@dataclass
class IndexStatus:
    """What `gputalks status` prints: the last finished run and the index around it."""

    run: dict[str, Any]
    unfinished_after: int
    sources: dict[str, dict[str, Any]]
    talks: int
    gone: int
    links: list[LinkCount]
    problems: list[dict[str, Any]]


def index_status(db: sqlite_utils.Database, ledger: sqlite_utils.Database) -> IndexStatus | None:
    """From the served index and the archive's ledger; None before the first finished refresh."""
    run = next(iter(ledger.query("select * from refresh_runs where status != 'running' order by id desc limit 1")),
               None)
    if run is None:
        return None
    unfinished = ledger.execute("select count(*) from refresh_runs where status = 'running' and id > ?",
                                [run["id"]]).fetchone()[0]
    links = [LinkCount(**row) for row in db.query(
        "select s.source, sum(case when (select count(distinct source) from talk_sources x "
        "where x.talk_id = s.talk_id) > 1 then 1 else 0 end) as linked, count(*) as items "
        "from talk_sources s group by s.source order by s.source")]
    problems = list(ledger.query("select source, item, severity, reason from problems "
                                 "where :run between run_id and coalesce(last_run_id, run_id) "
                                 "order by severity, source, item", {"run": run["problems_run"] or run["id"]}))
    return IndexStatus(run=run, unfinished_after=unfinished, sources=json.loads(run["sources"] or "{}"),
                       talks=db.table("talks").count,
                       gone=db.execute("select count(*) from talks where gone_since is not null").fetchone()[0],
                       links=links, problems=problems)
