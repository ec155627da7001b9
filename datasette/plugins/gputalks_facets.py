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

from datasette import hookimpl
from datasette.facets import Facet
from datasette.utils import escape_sqlite, path_with_added_args, path_with_removed_args
from datasette.database import QueryInterrupted


class ItemsFacet(Facet):
    type = "items"

    async def suggest(self):
        return []  # suggested by Datasette's own array facet already

    async def facet_results(self):
        results, timed_out = [], []
        size = self.get_facet_size()
        pairs = self.get_querystring_pairs()
        for source_and_config in self.get_configs():
            config = source_and_config["config"]
            column = config.get("column") or config["simple"]
            try:
                counted = await (self._grouped(column) if config.get("grouped") else self._items(column, size))
            except QueryInterrupted:
                timed_out.append(column)
                continue
            values = []
            for value, count in counted[:size]:
                value = str(value)
                key = f"{column}__arraycontains"
                selected = (key, value) in pairs
                toggle = (path_with_removed_args(self.request, {key: value}) if selected
                          else path_with_added_args(self.request, {key: value}))
                values.append({"value": value, "label": value, "count": count, "selected": selected,
                               "toggle_url": self.ds.absolute_url(self.request, toggle)})
            results.append({"name": column, "type": self.type, "results": values,
                            "hideable": source_and_config["source"] != "metadata",
                            "toggle_url": self.ds.urls.path(path_with_removed_args(
                                self.request, {"_facet_items": column})),
                            "truncated": len(counted) > size})
        return results, timed_out

    async def _run(self, sql: str):
        return await self.ds.execute(self.database, sql, self.params, truncate=False,
                                     custom_time_limit=self.ds.setting("facet_time_limit_ms"))

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
    return [ItemsFacet]


FACET_CACHE_ENTRIES = 512
FACET_CACHE_MAX_ROWS = 1000


@hookimpl
def startup(datasette):
    """Facet counts of an immutable file never change while it is served: each facet query
    (Datasette's and ours, recognised by the facet time limits they run under) runs once
    and is answered from memory afterwards. Mutable databases are never cached."""
    execute = datasette.execute
    facet_limits = {datasette.setting("facet_time_limit_ms"), datasette.setting("facet_suggest_time_limit_ms")}
    cache: OrderedDict = OrderedDict()

    async def execute_with_facet_cache(db_name, sql, params=None, truncate=False, custom_time_limit=None,
                                       page_size=None, log_sql_errors=True):
        db = datasette.databases.get(db_name)
        if custom_time_limit not in facet_limits or db is None or db.is_mutable:
            return await execute(db_name, sql, params=params, truncate=truncate,
                                 custom_time_limit=custom_time_limit, page_size=page_size,
                                 log_sql_errors=log_sql_errors)
        frozen = tuple(sorted(params.items())) if isinstance(params, dict) else tuple(params or ())
        key = (db_name, sql, frozen, truncate, page_size)
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        results = await execute(db_name, sql, params=params, truncate=truncate,
                                custom_time_limit=custom_time_limit, page_size=page_size,
                                log_sql_errors=log_sql_errors)
        if len(results.rows) <= FACET_CACHE_MAX_ROWS:
            cache[key] = results
            if len(cache) > FACET_CACHE_ENTRIES:
                cache.popitem(last=False)
        return results

    datasette.execute = execute_with_facet_cache
