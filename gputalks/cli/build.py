"""`gputalks refresh` and `gputalks rebuild`: the long jobs, with progress on a terminal, one-line
errors, and Ctrl-C, SIGTERM and SIGHUP stopping them through every cleanup."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path

import click

from gputalks.cli.common import (CONFIG_OPTION, DB_OPTION, LENIENT_OPTION, OVERRIDES_OPTION, WAIT_OPTION, CliError,
                                 config_error, db_path_for, settings_for)
from gputalks.cli.status_line import StatusLine
from gputalks.index import pipeline
from gputalks.index.build import Progress
from gputalks.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_LOCKED
from gputalks.index.runs import RefreshLocked, RunReport
from gputalks.index.store import StoreError, failure_of
from gputalks.index.worker import WorkerDied
from gputalks.project.files import ProjectError
from gputalks.project.validation import ConfigError
from gputalks.scraper.http import threads_waiting


@click.command()
@DB_OPTION
@click.option("--snapshot", type=click.Path(exists=True, file_okay=False),
              help="Replay a recorded refresh (a directory with manifest.json) instead of the network.")
@click.option("--source", "sources", multiple=True, type=click.Choice(list(pipeline.SOURCES)),
              help="Refresh only this source (repeatable); the others keep their last good data.")
@CONFIG_OPTION
@OVERRIDES_OPTION
@WAIT_OPTION
@LENIENT_OPTION
def refresh(db_path, snapshot, sources, config_path, overrides_path, wait, lenient) -> None:
    """Fetch the sources, archive the raw documents (in TALKS.archive.db beside
    the index), rebuild the index when anything changed.

    A source that fails keeps its last good data; the others still refresh.
    Exit codes: 0 every source ok or unchanged; 1 some source partial or
    failed; 2 usage or configuration error; 3 every source failed; 4 another
    refresh is running; 130 interrupted. The index is unchanged unless the
    run finished.
    """
    settings, project = settings_for(config_path, overrides_path)
    options = pipeline.RefreshOptions(sources=list(sources) or None, snapshot=snapshot, wait=wait, lenient=lenient)
    path = db_path_for(db_path, project)
    run_with_progress(path, lambda progress: pipeline.refresh(path, settings, options, progress))


@click.command()
@DB_OPTION
@CONFIG_OPTION
@OVERRIDES_OPTION
@WAIT_OPTION
@LENIENT_OPTION
def rebuild(db_path, config_path, overrides_path, wait, lenient) -> None:
    """Re-parse the archived raw documents and rebuild the index (no network).

    Exit codes: 0 rebuilt; 3 the build failed and the index is unchanged (a
    source's archived documents no longer parse, or no longer give talks they
    gave: `gputalks status` says which and why; a full disk); 2 usage or
    configuration error; 4 a refresh is running; 130 interrupted."""
    settings, project = settings_for(config_path, overrides_path)
    path = db_path_for(db_path, project)
    run_with_progress(path, lambda progress: pipeline.rebuild(path, settings, wait=wait, lenient=lenient,
                                                              progress=progress))


def print_report(report: RunReport) -> None:
    for outcome in report.outcomes:
        line = f"{outcome.name:8} {outcome.status:7} {outcome.items:5} items  {outcome.documents:4} documents"
        if outcome.error or outcome.note:
            line += f"  {outcome.error or outcome.note}"
        click.echo(line)
    errors = [p for p in report.problems if p.severity == "error"]
    unlinked = [p for p in report.problems if p.severity == "unlinked"]
    kept = f", {report.stats.kept_values} known values kept (the sources gave none)" \
        if report.stats.kept_values else ""
    click.echo(f"run {report.run_id}: {report.status}; {report.stats.talks_written} talk rows written, "
               f"{report.stats.changes} changes ({report.stats.new} new, {report.stats.gone} gone){kept}, "
               f"{report.requests} requests; {len(errors)} item errors, {len(unlinked)} unlinked "
               "(see `gputalks status`)")


class Stopped(Exception):
    """SIGTERM or SIGHUP during a command: stop as Ctrl-C does, through every cleanup."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum, frame) -> None:
    raise Stopped(signum)


def _end_now(message: str, code: int) -> None:
    """Exit at once after an interruption: every cleanup (the working copy, the lock) has run on
    the way here; threads still waiting on a host or a retry's backoff are not waited for."""
    if message:
        click.echo(message, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_with_progress(db_path: Path, work) -> None:
    for stop in (signal.SIGTERM, signal.SIGHUP):  # a service manager's stop, a closed terminal
        signal.signal(stop, _stop)
    status = StatusLine()
    status.update("starting")
    try:
        report = work(Progress(status.update, lambda url: status.update(f"fetching {url}"),
                               lambda notice: status.notice(f"gputalks: {notice}")))
    except RefreshLocked as exc:
        status.clear()
        click.echo(f"gputalks: {exc}", err=True)
        sys.exit(EXIT_LOCKED)
    except KeyboardInterrupt:
        status.clear()
        _end_now("gputalks: interrupted; the index is unchanged", EXIT_INTERRUPTED)
    except Stopped as exc:
        status.clear()
        _end_now(f"gputalks: stopped by {exc}; the index is unchanged", 128 + exc.signum)
    except (ConfigError, ProjectError, StoreError) as exc:
        status.clear()
        raise config_error(exc) from exc
    except (FileNotFoundError, ValueError) as exc:
        status.clear()
        raise CliError(str(exc)) from exc
    except WorkerDied as exc:
        status.clear()
        raise CliError(f"{exc}; the last good index is unchanged", EXIT_FAILED) from exc
    except (sqlite3.Error, OSError) as exc:  # a full disk, an I/O error: the swap never happened
        status.clear()
        raise CliError(f"{failure_of(db_path, exc)}; the last good index is unchanged", EXIT_FAILED) from exc
    status.clear()
    print_report(report)
    if report.exit_code:
        failed = "; ".join(f"{o.name}: {o.error or o.note}" for o in report.outcomes
                           if o.status in ("failed", "partial"))
        click.echo(f"gputalks: {report.status}: {failed or 'see gputalks status'}", err=True)  # one line
    if threads_waiting():  # a source abandoned at its deadline: its threads are not waited for
        _end_now("", report.exit_code)
    sys.exit(report.exit_code)
