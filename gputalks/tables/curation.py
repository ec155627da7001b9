"""Curation: the docs' tables as their curators declare them, and the talks they point at.

A curation file (`curation/*.toml` of a project) names the talks of each table
by a stable key (`gpumode:12`, `youtube:ID`, `gtc:SLUG`, `talk:ID`) and holds
the curator's own cells; `resolve` finds each row's talk through
`talk_sources`. The refresh mirrors the curation into `curated_tables` /
`curated_rows` so Datasette shows it; `export.py` renders the tables.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from gputalks.durations import parse_length
from gputalks.project.resources import DEFAULT_CURATION
from gputalks.project.validation import ConfigError, CurationFile, validated


class CurationError(ValueError):
    """A curation problem; the message names the file or the table, row and key."""


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


def cell_text(value: Any, lang: str) -> str:
    if isinstance(value, dict):
        return str(value.get(lang) or next(iter(value.values()), ""))
    return "" if value is None else str(value)


def load_curation(paths: list[Path] | None = None) -> dict[str, CuratedTable]:
    """Every table of every curation file, by id; bad files are clear errors."""
    paths = paths if paths is not None else sorted(DEFAULT_CURATION.glob("*.toml"))
    tables: dict[str, CuratedTable] = {}
    for path in paths:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CurationError(f"{path}: cannot read curation ({exc})") from exc
        try:
            data = validated(CurationFile, data, path)
        except ConfigError as exc:
            raise CurationError(str(exc)) from None
        for spec in data.get("tables", []):
            if spec["id"] in tables:
                raise CurationError(f"{path}: table id {spec['id']!r} is also in {tables[spec['id']].source}")
            columns = [Column(c["key"], c.get("header") or {"en": c["key"]}) for c in spec["columns"]]
            rows = []
            for position, raw in enumerate(spec.get("rows", []), 1):
                raw = dict(raw)
                key = raw.pop("talk", None)
                if key is not None and not re.fullmatch(r"(gpumode|youtube|gtc|talk):\S+", key):
                    raise CurationError(f"{path}: table {spec['id']}, row {position}: key {key!r} is not "
                                      "gpumode:N, youtube:ID, gtc:SLUG or talk:ID")
                group = raw.pop("group", None)
                if raw.get(LENGTH_CELL) is not None and parse_length(cell_text(raw[LENGTH_CELL], "en")) is None:
                    raise CurationError(f"{path}: table {spec['id']}, row {position}: length "
                                        f"{raw[LENGTH_CELL]!r} is not like \"12 h\", \"1 h 05\" or \"45 min\"")
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


# A row's `length = "12 h"`: the length of a talk whose sources give none (the index's wins).
LENGTH_CELL = "length"


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
        if talk is not None and talk.get("duration_s") is None and row.cells.get(LENGTH_CELL):
            # the curator's length for a talk the sources never measured ("12 h")
            talk = {**talk, "duration_s": parse_length(cell_text(row.cells[LENGTH_CELL], table.lang))}
        resolved.append(ResolvedRow(row, talk, problem))
    return resolved
