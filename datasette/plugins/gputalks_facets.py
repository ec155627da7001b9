"""Facets for the gputalks index: a lean facet for JSON array columns
(speakers, sources, topics), and facet counts kept in memory while an
immutable file is served.

Datasette's own array facet de-duplicates whole rows (`distinct j.value,
inner.*`), which copies every column of every row: 180 ms on 10,000 talks.
This one counts array items directly, about 15 ms; that is right because the
index writes these arrays without repeats (index/merge.py). It is the
`items` facet type (`{"items": "speakers"}` in metadata.json, or
`?_facet_items=speakers`); selecting a value filters with `__arraycontains`,
as the built-in `_facet_array` (still available) does.

For a column with few distinct arrays (sources: a handful of combinations)
`{"items": {"column": "sources", "grouped": true}}` counts the arrays with
an indexed GROUP BY and adds them up in Python: 10 ms instead of 120 ms on
100,000 talks.
"""

from __future__ import annotations

import json
from collections import Counter, OrderedDict
from urllib.parse import parse_qsl, urlencode

from datasette import hookimpl
from datasette.facets import Facet
from datasette.utils import escape_sqlite, path_with_removed_args
from datasette.database import QueryInterrupted


class Toggles:
    """The links that select or unselect a facet value on this page. The page's query string is
    parsed and encoded once, where Datasette's path_with_added_args does both again for every
    value listed (70 on a talks page: a tenth of a search page's time)."""

    def __init__(self, ds, request) -> None:
        self.pairs = parse_qsl(request.query_string)
        self.chosen = set(self.pairs)
        self.encoded = urlencode(self.pairs)
        self.page = ds.absolute_url(request, ds.urls.path(request.path))

    def selected(self, key: str, value: str) -> bool:
        return (key, value) in self.chosen

    def toggle_url(self, key: str, value: str) -> str:
        if self.selected(key, value):
            query = urlencode([pair for pair in self.pairs if pair != (key, value)])
        else:
            query = "&".join(filter(None, (self.encoded, urlencode([(key, value)]))))
        return f"{self.page}?{query}" if query else self.page


class CountedFacet(Facet):
    """A facet whose counts come from `count(column, config, size)`: (value, count) pairs, most
    first; selecting a value adds `filter_key(column)=value` to the page's URL."""

    async def suggest(self):
        return []  # Datasette's own column and array facets suggest these columns already

    async def facet_results(self):
        results, timed_out = [], []
        size = self.get_facet_size()
        toggles = Toggles(self.ds, self.request)
        for source_and_config in self.get_configs():
            config = source_and_config["config"]
            column = config.get("column") or config["simple"]
            try:
                counted = await self.count(column, config, size)
            except QueryInterrupted:
                timed_out.append(column)
                continue
            key = self.filter_key(column)
            values = [{"value": value, "label": value, "count": count, "selected": toggles.selected(key, str(value)),
                       "toggle_url": toggles.toggle_url(key, str(value))} for value, count in counted[:size]]
            results.append({"name": column, "type": self.type, "results": values,
                            "hideable": source_and_config["source"] != "metadata",
                            "toggle_url": self.ds.urls.path(path_with_removed_args(
                                self.request, {f"_facet_{self.type}": column})),
                            "truncated": len(counted) > size})
        return results, timed_out

    def filter_key(self, column: str) -> str:
        raise NotImplementedError

    async def count(self, column: str, config: dict, size: int) -> list[tuple]:
        raise NotImplementedError

    async def _run(self, sql: str):
        return await self.ds.execute(self.database, sql, self.params, truncate=False,
                                     custom_time_limit=self.ds.setting("facet_time_limit_ms"))


class ValueFacet(CountedFacet):
    """A column's values, as Datasette's column facet counts them (`{"value": "series"}`), with
    the page's links built once (Toggles); the talks table's plain columns use it."""

    type = "value"

    def filter_key(self, column: str) -> str:
        return f"{column}__exact" if column.startswith("_") else column

    async def count(self, column: str, config: dict, size: int) -> list[tuple]:
        rows = await self._run(f"""
            select {escape_sqlite(column)} as value, count(*) as count from ({self.sql})
            where {escape_sqlite(column)} is not null
            group by {escape_sqlite(column)} order by count desc, value limit {size + 1}""")
        return [(row["value"], row["count"]) for row in rows.rows]


class ItemsFacet(CountedFacet):
    type = "items"

    def filter_key(self, column: str) -> str:
        return f"{column}__arraycontains"

    async def count(self, column: str, config: dict, size: int) -> list[tuple]:
        counted = await (self._grouped(column) if config.get("grouped") else self._items(column, size))
        return [(str(value), count) for value, count in counted]

    async def _items(self, column: str, size: int) -> list[tuple[str, int]]:
        rows = await self._run(f"""
            with inner as ({self.sql})
            select j.value as value, count(*) as count
            from inner join json_each(inner.{escape_sqlite(column)}) j
            group by j.value order by count(*) desc, j.value limit {size + 1}""")
        return [(row["value"], row["count"]) for row in rows.rows]

    async def _grouped(self, column: str) -> list[tuple[str, int]]:
        rows = await self._run(f"""
            select {escape_sqlite(column)} as items, count(*) as count from ({self.sql})
            where {escape_sqlite(column)} is not null group by {escape_sqlite(column)}""")
        totals: Counter = Counter()
        for row in rows.rows:
            try:
                for value in json.loads(row["items"]):
                    totals[value] += row["count"]
            except (TypeError, ValueError):
                continue
        return sorted(totals.items(), key=lambda pair: (-pair[1], str(pair[0])))


@hookimpl
def register_facet_classes():
    return [ItemsFacet, ValueFacet]


CACHE_ENTRIES = 512
CACHE_MAX_ROWS = 1000


class CountCache:
    """The answers of count queries on immutable files, least recently used dropped first."""

    def __init__(self) -> None:
        self.answers: OrderedDict = OrderedDict()

    async def answer(self, key: tuple, run):
        if key in self.answers:
            self.answers.move_to_end(key)
            return self.answers[key]
        results = await run()
        if len(results.rows) <= CACHE_MAX_ROWS:
            self.answers[key] = results
            if len(self.answers) > CACHE_ENTRIES:
                self.answers.popitem(last=False)
        return results


def frozen(params) -> tuple:
    return tuple(sorted(params.items())) if isinstance(params, dict) else tuple(params or ())


@hookimpl
def startup(datasette):
    """Counts of an immutable file never change while it is served: each facet query (Datasette's
    and ours, recognised by the facet time limits they run under) and each table page's row
    count (`select count(*) from ...`, which Datasette runs on the database itself) runs once
    and is answered from memory afterwards. Mutable databases are never cached."""
    cache = CountCache()
    facet_limits = {datasette.setting("facet_time_limit_ms"), datasette.setting("facet_suggest_time_limit_ms")}
    execute = datasette.execute

    async def execute_with_facet_cache(db_name, sql, params=None, truncate=False, custom_time_limit=None,
                                       page_size=None, log_sql_errors=True):
        db = datasette.databases.get(db_name)

        def run():
            return execute(db_name, sql, params=params, truncate=truncate, custom_time_limit=custom_time_limit,
                           page_size=page_size, log_sql_errors=log_sql_errors)

        if custom_time_limit not in facet_limits or db is None or db.is_mutable:
            return await run()
        return await cache.answer((db_name, sql, frozen(params), truncate, page_size), run)

    datasette.execute = execute_with_facet_cache
    for name, db in datasette.databases.items():
        if not db.is_mutable and not db.is_memory:
            db.execute = counted(db, db.execute, cache)


def counted(db, execute, cache: CountCache):
    """`db.execute` answering `select count(*) ...` from the cache."""
    async def execute_with_count_cache(sql, params=None, truncate=False, custom_time_limit=None, page_size=None,
                                       log_sql_errors=True):
        def run():
            return execute(sql, params=params, truncate=truncate, custom_time_limit=custom_time_limit,
                           page_size=page_size, log_sql_errors=log_sql_errors)

        if not sql.startswith("select count(*) from "):
            return await run()
        return await cache.answer((db.name, sql, frozen(params), truncate, page_size), run)

    return execute_with_count_cache
