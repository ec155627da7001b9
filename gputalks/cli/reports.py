"""`gputalks status` and `gputalks changes`: what the index holds and what changed, read from it
alone (quick: no source and no server is loaded)."""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from dataclasses import asdict

import click

from gputalks.cli.common import DB_OPTION, CliError, open_index
from gputalks.durations import human_duration
from gputalks.index.changes import ChangedTalk, changed_talks, recent_changes
from gputalks.index.runs import index_status
from gputalks.index.store import IndexFiles, failure_of, read_archive
from gputalks.tables.export import escape_markdown, markdown_link


@click.command()
@DB_OPTION
@click.option("--all", "show_all", is_flag=True, help="List every problem, notes included.")
def status(db_path, show_all) -> None:
    """Counts per source, the last run, linked/unlinked counts and problems found."""
    db, path = open_index(db_path)
    try:
        found = index_status(db, read_archive(IndexFiles.of(path)))
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    except sqlite3.DatabaseError as exc:
        raise CliError(failure_of(path, exc)) from exc
    if found is None:
        raise CliError(f"{path}: no finished refresh yet")
    run = found.run
    click.echo(f"last run {run['id']} ({run['mode']}): {run['status']}, started {run['started_at']}, "
               f"finished {run['finished_at']}, exit code {run['exit_code']}")
    if found.unfinished_after:
        click.echo(f"  {found.unfinished_after} later run(s) did not finish (killed or still running)")
    for name, info in found.sources.items():
        click.echo(f"  {name:8} {info['status']:7} {info['items']} items"
                   + (f"  {info['error']}" if info.get("error") else ""))
    click.echo(f"talks: {found.talks} ({found.gone} no longer seen)")
    click.echo("linked / unlinked per source:")
    for count in found.links:
        click.echo(f"  {count.source:8} {count.linked} linked to another source, "
                   f"{count.items - count.linked} on their own, of {count.items}")
    by_severity: dict[str, list] = {}
    for p in found.problems:
        by_severity.setdefault(p["severity"], []).append(p)
    for severity in ("error", "warning", "unlinked", "note"):
        listed = by_severity.get(severity, [])
        if not listed:
            continue
        click.echo(f"{severity}s: {len(listed)}")
        if severity == "note" and not show_all:
            click.echo("  (notes hidden; --all lists them)")
            continue
        for p in listed:
            click.echo(f"  {p['source']:8} {p['item'] or '-'}: {p['reason']}")


@click.command()
@DB_OPTION
@click.option("--since", type=click.DateTime(formats=["%Y-%m-%d"]), metavar="YYYY-MM-DD",
              help="Only changes on or after this date.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True,
              help="text: a line per change; markdown: talk by talk, new, changed, gone and back, with title, "
                   "series or event, length, speakers and link (the nightly's pull request); json: the same as data.")
def changes(db_path, since, fmt) -> None:
    """What changed in the index, refresh by refresh."""
    since = since.strftime("%Y-%m-%d") if since else None
    db, _ = open_index(db_path)
    if fmt != "text":
        groups = changed_talks(db, since)
        if fmt == "json":
            click.echo(json.dumps({"since": since, **{kind: [asdict(t) for t in talks] for kind, talks in groups.items()}},
                                  ensure_ascii=False, indent=1))
        else:
            click.echo(changes_markdown(groups, since), nl=False)
        return
    rows = recent_changes(db, since)
    if not rows:
        click.echo("no changes" + (f" since {since}" if since else ""))
    for row in rows:
        label = {"_new": "new talk", "_gone": "no longer seen", "_back": "seen again"}.get(row["field"])
        what = label or f"{row['field']}: {_short(row['old_value'])} -> {_short(row['new_value'])}"
        facts = talk_facts(row["place"], row["duration_s"], row["speaker_names"])
        talk = _short(row["title"] or "(no title)", 80) + (f" ({_short(' · '.join(facts), 80)})" if facts else "")
        click.echo(f"{row['changed_at'][:10]}  {row['talk_id']}  {what}  {talk}")


def talk_facts(place: str | None, duration_s: int | None, speakers: str | None) -> list[str]:
    """What a change line says of its talk: series or event, length, speakers (those known)."""
    return [part for part in (place, human_duration(duration_s) if duration_s else None, speakers) if part]


HEADINGS = {"new": "New talks", "changed": "Changed", "gone": "No longer listed by any source", "back": "Listed again"}


def changes_markdown(groups: dict[str, list[ChangedTalk]], since: str | None) -> str:
    """The changes as a reviewer reads them: a section per kind, a line per talk, its facts
    escaped as every exported cell is."""
    lines = []
    for kind, talks in groups.items():
        if not talks:
            continue
        lines += [f"### {HEADINGS[kind]} ({len(talks)})", ""]
        for talk in talks:
            facts = [escape_markdown(part) for part in talk_facts(talk.where, talk.duration_s, talk.speakers)]
            lines.append(f"- {markdown_link(talk.title or talk.id, talk.url)}" + (f" ({' · '.join(facts)})" if facts else "")
                         + f" `{talk.id}`")
            lines += [f"  - {escape_markdown(name)}: {escape_markdown(_short(old))} → {escape_markdown(_short(new))}"
                      for name, old, new in talk.fields]
        lines.append("")
    return "\n".join(lines) if lines else "No changes" + (f" since {since}" if since else "") + ".\n"


def _short(value: str | None, width: int = 60) -> str:
    if value is None:
        return "(none)"
    value = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in value)  # no newlines nor terminal escapes
    return value if len(value) <= width else value[: width - 1] + "…"
