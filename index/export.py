"""Curated tables: the docs' tables, written from the index.

A curation file (`config/curation/*.toml`) names the talks of each table by a
stable key and holds the curator's own cells; titles, links and durations
come from the index. Output is deterministic: the same index and curation give
byte-identical tables, so a nightly job's diff is empty when nothing changed.
`update_markdown` rewrites only the regions between
`<!-- gputalks:table ID -->` and `<!-- /gputalks -->` (the cog pattern).
"""

from __future__ import annotations

import csv
import io
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from .history import sync_rows
from .paths import CURATION_DIR

INDEX_COLUMNS = {"number", "title", "speakers", "series", "event", "year", "date", "duration"}
MISSING = {"fr": "(introuvable)", "en": "(missing)"}
UNKNOWN_DURATION = {"fr": "durée inconnue", "en": "unknown length"}
OPEN_RE = re.compile(r"<!--\s*gputalks:table\s+(?P<id>[\w.-]+)(?:\s+lang=(?P<lang>\w+))?\s*-->")
CLOSE_RE = re.compile(r"<!--\s*/gputalks\s*-->")
ANY_MARKER_RE = re.compile(r"<!--\s*/?gputalks\b[^>]*-->")


class ExportError(ValueError):
    """A curation or marker problem; the message names the table, row and key."""


@dataclass
class Column:
    key: str
    header: dict[str, str]


@dataclass
class CuratedRow:
    position: int
    key: str | None  # "gpumode:12", "youtube:ID", "gtc:SLUG", "talk:ID"; None = curator's own line
    cells: dict[str, Any]  # text, or {lang: text}
    group: Any = None


@dataclass
class CuratedTable:
    id: str
    title: Any
    kind: str  # table | path
    columns: list[Column]
    rows: list[CuratedRow]
    lang: str
    source: Path


@dataclass
class ResolvedRow:
    row: CuratedRow
    talk: dict[str, Any] | None
    problem: str | None = None


def _text(value: Any, lang: str) -> str:
    if isinstance(value, dict):
        return str(value.get(lang) or next(iter(value.values()), ""))
    return "" if value is None else str(value)


def load_curation(paths: list[Path] | None = None) -> dict[str, CuratedTable]:
    """Every table of every curation file, by id; bad files are clear errors."""
    paths = paths if paths is not None else sorted(CURATION_DIR.glob("*.toml"))
    tables: dict[str, CuratedTable] = {}
    for path in paths:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ExportError(f"{path}: cannot read curation ({exc})") from exc
        for n, spec in enumerate(data.get("tables", []), 1):
            if "id" not in spec or not spec.get("columns"):
                raise ExportError(f"{path}: table {n} needs an id and columns")
            if spec["id"] in tables:
                raise ExportError(f"{path}: table id {spec['id']!r} is also in {tables[spec['id']].source}")
            columns = [Column(c["key"], c.get("header") or {"en": c["key"]}) for c in spec["columns"]]
            rows = []
            for position, raw in enumerate(spec.get("rows", []), 1):
                raw = dict(raw)
                key = raw.pop("talk", None)
                if key is not None and not re.fullmatch(r"(gpumode|youtube|gtc|talk):\S+", key):
                    raise ExportError(f"{path}: table {spec['id']}, row {position}: key {key!r} is not "
                                      "gpumode:N, youtube:ID, gtc:SLUG or talk:ID")
                group = raw.pop("group", None)
                rows.append(CuratedRow(position, key, raw, group))
            tables[spec["id"]] = CuratedTable(spec["id"], spec.get("title", spec["id"]),
                                              spec.get("kind", "table"), columns, rows,
                                              data.get("lang", "en"), Path(path))
    return tables


def resolve_key(db: sqlite_utils.Database, key: str) -> str | None:
    """The talk id a curation key points at, through the links of `talk_sources`."""
    kind, _, value = key.partition(":")
    if kind == "talk":
        found = db.execute("select id from talks where id = ?", [value]).fetchone()
    elif kind == "gpumode":
        found = db.execute(
            "select talk_id from talk_sources where source = 'github' and item_key = ?",
            [f"lecture-{int(value):03d}"]).fetchone() if value.isdigit() else None
    elif kind == "youtube":
        found = db.execute("select talk_id from talk_sources where source = 'youtube' and item_key = ?",
                           [value]).fetchone()
    elif kind == "gtc":
        found = db.execute("select talk_id from talk_sources where source = 'gtc' and item_key = ?",
                           [value.lower()]).fetchone()
    else:
        found = None
    return found[0] if found else None


def resolve(db: sqlite_utils.Database, table: CuratedTable) -> list[ResolvedRow]:
    resolved = []
    for row in table.rows:
        if row.key is None:
            resolved.append(ResolvedRow(row, None))
            continue
        talk_id = resolve_key(db, row.key)
        found = list(db.query("select * from talks where id = ?", [talk_id])) if talk_id else []
        talk = found[0] if found else None
        problem = None
        if talk is None:
            problem = f"table {table.id}, row {row.position} ({row.key}): no talk in the index matches"
        elif talk.get("gone_since"):
            problem = (f"table {table.id}, row {row.position} ({row.key}): talk {talk['id']} is no longer "
                       f"listed by its sources (gone since {talk['gone_since']})")
        resolved.append(ResolvedRow(row, talk, problem))
    return resolved


def human_duration(seconds: int | None, lang: str) -> str:
    """4334 -> "1 h 12" (fr) / "1 h 12 min" (en); 2700 -> "45 min"; 43200 -> "12 h"."""
    if seconds is None:
        return UNKNOWN_DURATION.get(lang, UNKNOWN_DURATION["en"])
    minutes = round(seconds / 60)
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    if not rest:
        return f"{hours} h"
    return f"{hours} h {rest:02d}" + (" min" if lang == "en" else "")


def _cell(column: Column, item: ResolvedRow, lang: str, markdown: bool) -> str:
    row, talk = item.row, item.talk
    if column.key in row.cells:  # the curator's cell wins (and is the only source for own lines)
        return _text(row.cells[column.key], lang)
    if column.key not in INDEX_COLUMNS:
        return ""
    if talk is None:
        return MISSING.get(lang, MISSING["en"]) if item.problem else ""
    if column.key == "duration":
        return human_duration(talk["duration_s"], lang)
    if column.key == "speakers":
        return ", ".join(json.loads(talk["speakers"] or "[]"))
    if column.key == "title" and markdown and talk.get("url"):
        return f"[{_escape_md(talk['title'])}]({talk['url']})"
    value = talk.get(column.key)
    return "" if value is None else str(value)


def _escape_md(text: str) -> str:
    return re.sub(r"([\[\]|\\`*_])", r"\\\1", text)


def _cell_md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def check(table: CuratedTable, resolved: list[ResolvedRow], allow_missing: bool) -> list[str]:
    """Missing talks: an ExportError, or warnings when allowed. Unknown
    durations are always warnings (the cell says so too)."""
    problems = [r.problem for r in resolved if r.problem]
    if problems and not allow_missing:
        raise ExportError("; ".join(problems) + " (--allow-missing prints a placeholder instead)")
    if any(c.key == "duration" for c in table.columns):
        problems += [f"table {table.id}, row {r.row.position} ({r.row.key}): talk {r.talk['id']} has no "
                     "duration in the index" for r in resolved if r.talk and r.talk["duration_s"] is None]
    return problems


def render(db: sqlite_utils.Database, table: CuratedTable, fmt: str = "markdown", lang: str | None = None,
           allow_missing: bool = False) -> tuple[str, list[str]]:
    """(the table as text, warnings)."""
    lang = lang or table.lang
    resolved = resolve(db, table)
    warnings = check(table, resolved, allow_missing)
    headers = [_text(c.header, lang) for c in table.columns]
    rows = [[_cell(c, r, lang, fmt == "markdown") for c in table.columns] for r in resolved]
    if fmt == "json":
        return json.dumps({"id": table.id, "title": _text(table.title, lang), "kind": table.kind,
                           "rows": [{"talk_id": r.talk["id"] if r.talk else None, "key": r.row.key,
                                     **({"group": _text(r.row.group, lang)} if r.row.group else {}),
                                     "duration_s": r.talk["duration_s"] if r.talk else None,
                                     "url": r.talk["url"] if r.talk else None,
                                     **dict(zip([c.key for c in table.columns], cells))}
                                    for r, cells in zip(resolved, rows)]},
                          ensure_ascii=False, indent=2) + "\n", warnings
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow((["group"] if table.kind == "path" else []) + headers)
        for r, cells in zip(resolved, rows):
            writer.writerow(([_text(r.row.group, lang)] if table.kind == "path" else []) + cells)
        return out.getvalue(), warnings
    if fmt != "markdown":
        raise ExportError(f"unknown format {fmt!r}: markdown, csv or json")
    if table.kind == "path":
        return _render_path(table, resolved, rows, lang), warnings
    lines = ["| " + " | ".join(_cell_md(h) for h in headers) + " |",
             "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell_md(c) for c in cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n", warnings


def _render_path(table: CuratedTable, resolved: list[ResolvedRow], rows: list[list[str]], lang: str) -> str:
    """Groups (weeks) in order, each with its total, then the path's total."""
    keys = [c.key for c in table.columns]
    groups: dict[str, list[tuple[ResolvedRow, dict[str, str]]]] = {}
    for r, cells in zip(resolved, rows):
        groups.setdefault(_text(r.row.group, lang), []).append((r, dict(zip(keys, cells))))
    total_label = {"fr": "Total", "en": "Total"}.get(lang, "Total")
    out, grand, grand_unknown = [], 0, False
    for name, members in groups.items():
        seconds = sum(r.talk["duration_s"] or 0 for r, _ in members if r.talk)
        unknown = any(r.talk and r.talk["duration_s"] is None for r, _ in members)
        grand += seconds
        grand_unknown = grand_unknown or unknown
        total = _total(seconds, unknown, lang)
        out.append(f"**{name}** ({total})\n")
        for r, cells in members:
            who = cells.get("who", "")
            extra = ", ".join(x for x in (cells.get("duration") if r.talk else "", cells.get("note")) if x)
            line = f"- {who}, {cells.get('title', '')}" if who else f"- {cells.get('title', '')}"
            out.append(line + (f" ({extra})" if extra else ""))
        out.append("")
    separator = " : " if lang == "fr" else ": "
    out.append(f"{total_label}{separator}{_total(grand, grand_unknown, lang)}")
    return "\n".join(out) + "\n"


def _total(seconds: int, unknown: bool, lang: str) -> str:
    """A sum of durations; when some are unknown it says so ("47 min + durée inconnue")."""
    known = human_duration(seconds, lang) if seconds or not unknown else ""
    unknown_text = UNKNOWN_DURATION.get(lang, UNKNOWN_DURATION["en"]) if unknown else ""
    return " + ".join(x for x in (known, unknown_text) if x)


def update_markdown(text: str, render_table) -> str:
    """Replace each marked region's body with render_table(id, lang); every
    other byte is kept. Unbalanced, nested or unknown markers fail before
    anything is replaced (render_table raises ExportError for unknown ids)."""
    regions = []
    open_match = None
    for match in ANY_MARKER_RE.finditer(text):
        if CLOSE_RE.fullmatch(match.group(0)):
            if open_match is None:
                raise ExportError(f"line {_line(text, match.start())}: closing <!-- /gputalks --> "
                                  "without an opening marker")
            regions.append((open_match, match))
            open_match = None
        elif OPEN_RE.fullmatch(match.group(0)):
            if open_match is not None:
                raise ExportError(f"line {_line(text, match.start())}: marker opened before the one at line "
                                  f"{_line(text, open_match.start())} was closed")
            open_match = OPEN_RE.match(text, match.start())
        else:
            raise ExportError(f"line {_line(text, match.start())}: unknown marker {match.group(0)!r}")
    if open_match is not None:
        raise ExportError(f"line {_line(text, open_match.start())}: marker is never closed")
    bodies = [render_table(o["id"], o["lang"]) for o, _ in regions]  # all rendered before any change
    out, last = [], 0
    for (opening, closing), body in zip(regions, bodies):
        out.append(text[last:opening.end()])
        out.append("\n" + body)
        last = closing.start()
    out.append(text[last:])
    return "".join(out)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def save_curation(db: sqlite_utils.Database, tables: dict[str, CuratedTable]) -> list[str]:
    """Mirror the curation into `curated_tables` / `curated_rows` (for Datasette);
    returns the rows whose key matches no talk. Call inside a transaction."""
    problems = []
    table_rows, row_rows = [], []
    for position, table in enumerate(sorted(tables.values(), key=lambda t: (str(t.source), t.id))):
        table_rows.append({"id": table.id, "title": _text(table.title, table.lang), "page": table.source.name,
                           "kind": table.kind, "position": position,
                           "columns": json.dumps([c.key for c in table.columns])})
        for item in resolve(db, table):
            if item.problem:
                problems.append(item.problem)
            row_rows.append({"table_id": table.id, "position": item.row.position, "key": item.row.key,
                             "talk_id": item.talk["id"] if item.talk else None,
                             "group_name": _text(item.row.group, table.lang) if item.row.group else None,
                             "cells": json.dumps(item.row.cells, ensure_ascii=False, sort_keys=True)})
    # Foreign keys: rows of dropped tables go first, tables before their rows.
    wanted_ids = [t["id"] for t in table_rows]
    marks = ",".join("?" * len(wanted_ids)) or "''"
    db.execute(f"delete from curated_rows where table_id not in ({marks})", wanted_ids)
    sync_rows(db, "curated_tables", ["id"], table_rows)
    sync_rows(db, "curated_rows", ["table_id", "position"], row_rows)
    return problems
