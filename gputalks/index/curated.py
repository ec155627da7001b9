"""The docs' curated tables mirrored in the index (`curated_tables`, `curated_rows`), so
Datasette shows which talks each table of the docs holds; the tables themselves are read by
gputalks.tables.curation."""

from __future__ import annotations

import json

import sqlite_utils

from gputalks.index.history import sync_rows
from gputalks.tables.curation import CuratedTable, cell_text, resolve


def save_curation(db: sqlite_utils.Database, tables: dict[str, CuratedTable]) -> list[str]:
    """Mirror the curation into `curated_tables` / `curated_rows` (for Datasette);
    returns the rows whose key matches no talk. Call inside a transaction."""
    problems = []
    table_rows, row_rows = [], []
    for position, table in enumerate(sorted(tables.values(), key=lambda t: (str(t.source), t.id))):
        table_rows.append({"id": table.id, "title": cell_text(table.title, table.lang), "page": table.source.name,
                           "kind": table.kind, "position": position,
                           "columns": json.dumps([c.key for c in table.columns])})
        for item in resolve(db, table):
            if item.problem:
                problems.append(item.problem)
            row_rows.append({"table_id": table.id, "position": item.row.position, "key": item.row.key,
                             "talk_id": item.talk["id"] if item.talk else None,
                             "group_name": cell_text(item.row.group, table.lang) if item.row.group else None,
                             "cells": json.dumps(item.row.cells, ensure_ascii=False, sort_keys=True)})
    # Foreign keys: rows of dropped tables go first, tables before their rows.
    wanted_ids = [t["id"] for t in table_rows]
    marks = ",".join("?" * len(wanted_ids)) or "''"
    db.execute(f"delete from curated_rows where table_id not in ({marks})", wanted_ids)
    sync_rows(db, "curated_tables", ["id"], table_rows)
    sync_rows(db, "curated_rows", ["table_id", "position"], row_rows)
    return problems
