"""The facet keys: each talk's facet values coded as one short string, and each talk under each
of its topics, speakers and sources in the default order, kept in step with `talks` by triggers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import sqlite_utils

# Each talk's facet values as one short string, kept in step with `talks` by triggers: the
# served index counts a search's facets from these in one pass (datasette/facets.py), not by
# grouping the matching talks once per facet. Every (facet, value) has a code, and its `key`,
# one character (code point code + 256, past the surrogates): counting the matching talks' keys'
# characters counts their facets (a test holds metadata.json's talks facets to these columns).
# `talk_items`: each talk under each of its topics, speakers and sources in the default order
# (newest_first): a filter on one, or a topic's newest talks, is a range of an index, not a scan.
FACET_KEYS: dict[str, Any] = {"keys": "talk_facet_keys", "values": "talk_facet_values", "items": "talk_items",
                              "of": "talks", "columns": ["series", "event", "year", "duration_bucket"],
                              "item_columns": ["topics", "speakers", "sources"]}
FACET_KEY_TRIGGERS = {"ai": "after insert", "au": "after update", "ad": "after delete"}


def facet_values_sql(alias: str, source: str = "", items_only: bool = False) -> str:
    """SQL for (facet, value) rows of the row `alias` of a trigger (`new`), or of every row of `source`."""
    tables = f"[{source}] {alias}, " if source else ""
    # `+column`: values without the column's affinity, compared as they are stored (2024 = 2024)
    rows = [f"select '{column}' as facet, +{alias}.[{column}] as value {'from ' + tables[:-2] if source else ''} "
            f"where {alias}.[{column}] is not null" for column in FACET_KEYS["columns"]]
    rows += [f"select '{column}' as facet, j.value as value from {tables}json_each(iif(json_valid({alias}.[{column}]), "
             f"{alias}.[{column}], '[]')) j" for column in FACET_KEYS["item_columns"]]
    return " union all ".join(rows[len(FACET_KEYS["columns"]):] if items_only else rows)


def facet_keys_sql(alias: str) -> str:
    """SQL for the keys of the talk `alias` (a table alias, or `new` in a trigger)."""
    return (f"(select group_concat(v.key, '') from ({facet_values_sql(alias)}) n "
            f"join [{FACET_KEYS['values']}] v on v.facet = n.facet and v.value = n.value)")


def talk_items_sql(alias: str, source: str = "") -> str:
    """SQL for the `talk_items` rows (code, newest_first, talk) of the talk `alias`, or of every row of `source`, never
    looping over the values (a join did: 0.25 ms a trigger, 48 s to fill at 100k): codes looked up, talks first."""
    values = FACET_KEYS["values"]
    if not source:
        return (f"select (select v.code from [{values}] v where v.facet = n.facet and v.value = n.value) as code, "
                f"{alias}.newest_first, {alias}.rowid from ({facet_values_sql(alias, items_only=True)}) n")
    return " union all ".join(
        f"select v.code, {alias}.newest_first, {alias}.rowid from [{source}] {alias} cross join json_each("
        f"iif(json_valid({alias}.[{column}]), {alias}.[{column}], '[]')) j cross join [{values}] v "
        f"on v.facet = '{column}' and v.value = j.value" for column in FACET_KEYS["item_columns"])


def index_facet_keys(db: sqlite_utils.Database) -> None:
    """Write every talk's facet keys again and (re)create the triggers that keep them in step."""
    create_facet_tables(db)
    _fill_facet_keys(db)
    _create_facet_triggers(db)


def create_facet_tables(db: sqlite_utils.Database) -> None:
    """The facet keys' tables, empty, without the triggers that would fill them."""
    keys, values, items = FACET_KEYS["keys"], FACET_KEYS["values"], FACET_KEYS["items"]
    for suffix in FACET_KEY_TRIGGERS:
        db.execute(f"drop trigger if exists [{keys}_{suffix}]")
    db.execute(f"drop table if exists [{keys}]")
    db.execute(f"drop table if exists [{values}]")
    db.execute(f"drop table if exists [{items}]")
    # newest_first descending: a filter's `rowid in (select talk ...)` reads a code's talks oldest first, so
    # mostly in rowid order (a build writes talks by id), whose look-up list SQLite builds twice as fast (100k
    # talks: 4 ms, not 8.6, for a topic of 25,000); a topic's newest talks are the same range read backwards
    db.execute(f"create table [{items}] (code integer not null, newest_first text not null, talk integer not null, "
               "primary key (code, newest_first desc, talk)) without rowid")
    db.execute(f"""create table [{values}] (code integer primary key, facet text not null, value,
                   key text generated always as (char(code + 256 + iif(code + 256 >= 55296, 2048, 0))) virtual,
                   unique (facet, value))""")
    db.execute(f"create table [{keys}] (rowid integer primary key, keys text)")


def _fill_facet_keys(db: sqlite_utils.Database) -> None:
    """Every talk's facet keys, from its row, in SQL."""
    keys, values, source = FACET_KEYS["keys"], FACET_KEYS["values"], FACET_KEYS["of"]
    db.execute(f"insert or ignore into [{values}] (facet, value) {facet_values_sql('t', source)}")
    db.execute(f"insert into [{keys}] (rowid, keys) select t.rowid, {facet_keys_sql('t')} from [{source}] t")
    _fill_talk_items(db)


def _fill_talk_items(db: sqlite_utils.Database) -> None:
    db.execute(f"insert or ignore into [{FACET_KEYS['items']}] {talk_items_sql('t', FACET_KEYS['of'])}")


def _create_facet_triggers(db: sqlite_utils.Database) -> None:
    keys, values, items, source = (FACET_KEYS[name] for name in ("keys", "values", "items", "of"))
    written = (f"insert or ignore into [{values}] (facet, value) {facet_values_sql('new')}; "
               f"insert or replace into [{keys}] (rowid, keys) values (new.rowid, {facet_keys_sql('new')}); "
               f"insert or ignore into [{items}] (code, newest_first, talk) {talk_items_sql('new')};")
    removed = f"delete from [{items}] where talk = old.rowid and newest_first = old.newest_first and code in " \
              f"(select code from ({talk_items_sql('old')}));"
    bodies = {"after insert": written, "after update": removed + " " + written,
              "after delete": f"delete from [{keys}] where rowid = old.rowid; {removed}"}
    for suffix, event in FACET_KEY_TRIGGERS.items():
        db.execute(f"create trigger [{keys}_{suffix}] {event} on [{source}] begin {bodies[event]} end")


def facet_key(code: int) -> str:
    """The one character of a facet value's code: the values table's `key` column, in Python."""
    return chr(code + 256 + (2048 if code + 256 >= 55296 else 0))


@lru_cache(maxsize=16384)
def _json_items(text: str | None) -> tuple[Any, ...]:
    """What SQLite's json_each gives of a column's JSON (nothing of what is not JSON), read
    once for each distinct text: a build's talks share few lists of topics and sources."""
    try:
        value = json.loads(text) if text is not None else []
    except (ValueError, TypeError):
        return ()
    if isinstance(value, list):
        return tuple(value)
    return tuple(value.values()) if isinstance(value, dict) else (value,)


def facet_values(row: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """A talks row's (facet, value) pairs with a key: what `facet_values_sql` gives, less null items."""
    for column in FACET_KEYS["columns"]:
        if (value := row.get(column)) is not None:
            yield column, value
    for column in FACET_KEYS["item_columns"]:
        for value in _json_items(row.get(column)):
            if value is not None:
                yield column, value


class FacetCoder:
    """Codes each (facet, value) the first time a row has it (1, 2, ...), and gives each row its
    keys and the (code, facet, value) rows it coded first. A build codes its talks as they are
    made and writes their keys with them, instead of `index_facet_keys` reading every row
    again in SQL once they are loaded (1.5 s at 100,000 talks)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, Any], str] = {}

    def code(self, row: dict[str, Any]) -> tuple[str, tuple[tuple[int, str, Any], ...]]:
        keys, found, new = self.keys, [], []
        for pair in facet_values(row):
            key = keys.get(pair)
            if key is None:
                code = len(keys) + 1
                key = keys[pair] = facet_key(code)
                new.append((code, *pair))
            found.append(key)
        return "".join(found), tuple(new)


def write_facet_keys(db: sqlite_utils.Database, keys: list[tuple[str, str]],
                     values: list[tuple[int, str, Any]]) -> None:
    """Write talks' facet keys, (keys, talk id), coded by a `FacetCoder` whose new (code, facet,
    value) rows are `values`, inside a `bulk_load` of the talks."""
    db.conn.executemany(f"insert into [{FACET_KEYS['values']}] (code, facet, value) values (?, ?, ?)", values)
    db.conn.executemany(f"insert into [{FACET_KEYS['keys']}] (rowid, keys) "
                        f"select rowid, ? from [{FACET_KEYS['of']}] where id = ?", keys)


def complete_facet_keys(db: sqlite_utils.Database) -> None:
    """After a bulk load: the facet keys in SQL, unless every talk's were written with it
    (`write_facet_keys`); then the triggers."""
    keys, source = FACET_KEYS["keys"], FACET_KEYS["of"]
    written, talks = db.execute(f"select (select count(*) from [{keys}]), (select count(*) from [{source}])").fetchone()
    if written != talks:
        db.execute(f"delete from [{keys}]")
        db.execute(f"delete from [{FACET_KEYS['values']}]")
        db.execute(f"delete from [{FACET_KEYS['items']}]")
        _fill_facet_keys(db)
    else:
        _fill_talk_items(db)
    _create_facet_triggers(db)
