"""Facets for the gputalks index: a lean facet for JSON array columns
(speakers, sources, topics) and one for plain columns (series, event, year,
length), each type counting all its facets in one query; and counts kept in
memory while an immutable file is served.

Datasette's own array facet de-duplicates whole rows (`distinct j.value,
inner.*`), which copies every column of every row: 180 ms on 10,000 talks.
This one counts array items directly, about 15 ms; that is right because the
index writes these arrays without repeats (index/merge.py). It is the
`items` facet type (`{"items": "speakers"}` in metadata.json, or
`?_facet_items=speakers`); selecting a value filters with `_item_<column>=value`
(below: a range of the `talk_items` index), where the built-in `__arraycontains` (still
available) reads every row's JSON.

For a column with few distinct arrays (sources: a handful of combinations)
`{"items": {"column": "sources", "grouped": true}}` counts the arrays with
an indexed GROUP BY and adds them up in Python: 10 ms instead of 120 ms on
100,000 talks.

`{"value": "series"}` counts a plain column as Datasette's column facet does.
A page's facets of one type read the matching rows once, not once per facet.

A table whose metadata names its facet keys (`"facet_keys": {"keys": ...,
"values": ...}`, written by the index) has its configured facets counted
from those instead: each matching row's facet values are one short string of
one-character keys, so the 7 facets of a search for a common word at 100,000
talks are one count of the characters of 14,000 short strings (20-30 ms),
where the queries above take 80-110 ms.
"""

from __future__ import annotations

import json
import re
from collections import Counter, OrderedDict
from urllib.parse import parse_qsl, urlencode
from weakref import WeakKeyDictionary

from datasette.database import QueryInterrupted
from datasette.facets import Facet
from datasette.filters import FilterArguments

from gputalks.index.facet_keys import FACET_KEYS


def identifier(name: str) -> str:
    """A table or column name quoted for SQL (SQLite's double quotes)."""
    return '"' + name.replace('"', '""') + '"'


class Toggles:
    """The links that select or unselect a facet value on this page. The page's query string is
    parsed and encoded once, where Datasette's path_with_added_args does both again for every
    value listed (70 on a talks page: a tenth of a search page's time)."""

    def __init__(self, ds, request) -> None:
        # a "Next" page's cursor is dropped: a value selected there lists its talks from the first
        self.pairs = [pair for pair in parse_qsl(request.query_string) if pair[0] != "_next"]
        self.chosen = set(self.pairs)
        self.encoded = urlencode(self.pairs)
        self.page = ds.absolute_url(request, ds.urls.path(request.path))

    def selected(self, key: str, value: str) -> bool:
        return (key, value) in self.chosen

    def toggle_url(self, key: str, value: str) -> str:
        if self.selected(key, value):
            return self.without(key, value)
        query = "&".join(filter(None, (self.encoded, urlencode([(key, value)]))))
        return f"{self.page}?{query}"

    def without(self, key: str, value: str) -> str:
        """This page without `key=value` (a facet hidden, a value unselected)."""
        query = urlencode([pair for pair in self.pairs if pair != (key, value)])
        return f"{self.page}?{query}" if query else self.page


class CountedFacet(Facet):
    """Facets whose counts all come from one query over the page's rows: each matching row is
    read once for all of this type's facets, where one query per facet reads them all again
    (14,000 rows for a common word at 100,000 talks). Selecting a value adds
    `filter_key(column)=value` to the page's URL."""

    async def suggest(self):
        return []  # Datasette's own column and array facets suggest these columns already

    async def facet_results(self):
        configs = [(item, item["config"].get("column") or item["config"]["simple"]) for item in self.get_configs()]
        if not configs:
            return [], []
        size = self.get_facet_size()
        try:
            keyed = await facet_keys(self)
            if keyed is not None and all(item["source"] == "metadata" for item, _ in configs):
                counted = [keyed.get(column, []) for _, column in configs]
            else:
                counted = await self._count([(column, item["config"]) for item, column in configs], size)
        except QueryInterrupted:
            return [], [column for _, column in configs]
        toggles = Toggles(self.ds, self.request)
        results = []
        for (item, column), values in zip(configs, counted):
            key = self.filter_key(column)
            values = [(self.shown(value), count) for value, count in values]
            results.append({"name": column, "type": self.type, "hideable": item["source"] != "metadata",
                            "results": [{"value": value, "label": value, "count": count,
                                         "selected": toggles.selected(key, str(value)),
                                         "toggle_url": toggles.toggle_url(key, str(value))}
                                        for value, count in values[:size]],
                            "toggle_url": toggles.without(f"_facet_{self.type}", column),
                            "truncated": len(values) > size})
        return results, []

    def filter_key(self, column: str) -> str:
        raise NotImplementedError

    def counting(self, number: int, column: str, config: dict) -> str:
        """SQL for one facet over `inner`: rows of (facet number, value, count)."""
        raise NotImplementedError

    def summed(self, config: dict) -> bool:
        """Whether the facet's rows count whole JSON arrays, whose items are summed here."""
        return False

    def shown(self, value):
        return value

    async def _count(self, facets: list[tuple[str, dict]], size: int) -> list[list[tuple]]:
        """(value, count) pairs for each facet, most first (then by value), `size` + 1 at most."""
        columns = ", ".join(dict.fromkeys(identifier(column) for column, _ in facets))
        summed = [number for number, (_, config) in enumerate(facets) if self.summed(config)]
        parts = " union all ".join(self.counting(number, column, config)
                                   for number, (column, config) in enumerate(facets))
        sql, params = whole_list(self)
        rows = (await self.ds.execute(self.database, f"""
            with inner as materialized (select {columns} from ({sql})),
            counted as ({parts})
            select facet, value, count from (
                select facet, value, count,
                       row_number() over (partition by facet order by count desc, value) as place
                from counted)
            where place <= {size + 1} or facet in ({", ".join(map(str, summed)) or "null"})
            order by facet, place""", params, truncate=False,
            custom_time_limit=self.ds.setting("facet_time_limit_ms"))).rows
        counted: list[list[tuple]] = [[] for _ in facets]
        for row in rows:
            counted[row["facet"]].append((row["value"], row["count"]))
        for number in summed:
            counted[number] = summed_items(counted[number])
        return counted


def summed_items(arrays: list[tuple]) -> list[tuple]:
    """Counts of JSON arrays -> counts of their items, most first."""
    totals: Counter = Counter()
    for items, count in arrays:
        try:
            for value in json.loads(items):
                totals[value] += count
        except (TypeError, ValueError):
            continue
    return sorted(totals.items(), key=lambda pair: (-pair[1], str(pair[0])))


class ValueFacet(CountedFacet):
    """A column's values, counted as Datasette's column facet counts them (`{"value": "series"}`);
    the talks table's plain columns use it."""

    type = "value"

    def filter_key(self, column: str) -> str:
        return f"{column}__exact" if column.startswith("_") else column

    def counting(self, number: int, column: str, config: dict) -> str:
        return value_counts(number, column)


def value_counts(number: int, column: str) -> str:
    """Facet `number`'s rows: each non-null value of the column in `inner`, and how many times."""
    column = identifier(column)
    return (f"select {number} as facet, {column} as value, count(*) as count from inner "
            f"where {column} is not null group by {column}")


class ItemsFacet(CountedFacet):
    type = "items"

    def filter_key(self, column: str) -> str:
        return f"{ITEM_FILTER}{column}"

    def summed(self, config: dict) -> bool:
        return bool(config.get("grouped"))

    def shown(self, value) -> str:
        return str(value)

    def counting(self, number: int, column: str, config: dict) -> str:
        if self.summed(config):  # whole arrays, summed by summed_items
            return value_counts(number, column)
        return (f"select {number} as facet, j.value as value, count(*) as count "
                f"from inner join json_each(inner.{identifier(column)}) j group by j.value")


async def facet_keys(facet: Facet) -> dict[str, list[tuple]] | None:
    """Every keyed facet's (value, count) pairs for the facet's rows, most first, counted in one
    pass over the table's facet keys (metadata `facet_keys`: each row's facet values as one
    string of one-character keys, and each key's facet and value; the index's triggers keep
    them in step). None when the table has none. One count serves every facet type of the
    page; on an immutable file it is kept while the file is served."""
    tables = (facet.metadata or {}).get("facet_keys") or {}
    db = facet.ds.get_database(facet.database)
    list_sql, params = whole_list(facet)
    if not tables or not facet.table or not await db.table_exists(tables["values"]):
        return None
    keys = await db.primary_keys(facet.table) or ["rowid"]
    if len(keys) != 1:
        return None
    table, key = identifier(facet.table), identifier(keys[0])
    rowids = f"select rowid from {table} where {key} in (select {key} from ({list_sql}))"
    sql = f"select group_concat(keys, '') from {identifier(tables['keys'])} where rowid in ({rowids})"
    limit = facet.ds.setting("facet_time_limit_ms")

    async def run() -> dict[str, list[tuple]]:
        keys = (await db.execute(sql, params, custom_time_limit=limit)).first()[0] or ""
        meanings = await db.execute(f"select key, facet, value from {identifier(tables['values'])}",
                                    custom_time_limit=limit)
        return counted_keys(Counter(keys), {key: (name, value) for key, name, value in meanings.rows})

    memo = facet.request.scope.setdefault("gputalks_facet_keys", {})
    key = (facet.database, sql, frozen(params))
    if key not in memo:
        cache = CACHES.get(facet.ds)
        memo[key] = await (cache.answer(facet.database, sql, params, False, None, run)
                           if cache is not None and not db.is_mutable else run())
    return memo[key]


# Datasette's cursor of a "Next" page, the last clause of its WHERE: after the sort column's
# value (or its null), then the primary key's (views/table.py, utils.compound_keys_after_sql).
_COLUMN, _KEY = r"(\[[^\]]+\]|\w+)", r"(?:rowid > :p\d+|\(\(.*\)\))"
CURSOR = re.compile(rf"\({_COLUMN} [<>] :p\d+(?: or \1 is null)? or \(\1 = :p\d+ and {_KEY}\)\)"
                    rf"|\({_COLUMN} is null and {_KEY}\)|\({_COLUMN} is not null or \(\3 is null and {_KEY}\)\)"
                    rf"|{_KEY}", re.S)


def whole_list(facet: Facet) -> tuple[str, object]:
    """The facet's SQL and parameters for the whole list, without a "Next" page's cursor: Datasette
    counts a next page's facets over the talks after its first (counts that shrank page by page),
    and each page's count was new (0.4x bare Datasette's next pages at 100,000 talks); the list's
    counts are the first page's, cached on an immutable file. Any other SQL is kept as it is."""
    sql, params = facet.sql, facet.params
    if "_next" not in facet.request.args or not isinstance(params, dict):
        return sql, params
    depth, quote, cut = 0, "", None
    for position, char in enumerate(sql):  # the WHERE's last clause: after its last top-level " and "
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif depth == 0 and sql.startswith((" where ", " and "), position):
            cut = position
    if cut is None:
        return sql, params
    head, clause = sql[:cut] + " ", sql[cut:].split(" ", 2)[2].strip()
    if not CURSOR.fullmatch(clause):
        return sql, params
    dropped = set(re.findall(r":(p\d+)", clause)) - set(re.findall(r":(p\d+)", head))
    return head, {name: value for name, value in params.items() if name not in dropped}


def counted_keys(counts: Counter, meanings: dict[str, tuple]) -> dict[str, list[tuple]]:
    """Counts of keys -> each facet's (value, count) pairs, most first, ties in SQLite's order
    (numbers before text)."""
    facets: dict[str, list[tuple]] = {}
    for key, number in counts.items():
        if key in meanings:
            name, value = meanings[key]
            facets.setdefault(name, []).append((value, number))
    for pairs in facets.values():
        pairs.sort(key=lambda pair: (-pair[1], isinstance(pair[0], str), pair[0]))
    return facets


# `?_item_topics=Triton`: the talks one of whose topics is Triton, a range of the `talk_items`
# index (each talk under each of its topics, speakers and sources), where `topics__arraycontains`
# opens every talk's JSON (40-100 ms at 100,000 talks). Several values' ranges are compared by
# their first RANGE_PROBE talks at most.
ITEM_FILTER, RANGE_PROBE = "_item_", 1000
# Datasette's own filter on a JSON array column, and the columns talk_items files talks under.
ARRAY_FILTER = "__arraycontains"
ITEM_COLUMNS = FACET_KEYS["item_columns"]


def item_code(tables: dict, number: int) -> str:
    """SQL for the code of chosen value `number` (parameters :gt_item_N, :gt_value_N)."""
    return (f"(select code from {identifier(tables['values'])} "
            f"where facet = :gt_item_{number} and value = :gt_value_{number})")


def item_rowids(tables: dict, numbers: list[int]) -> str:
    """SQL for the rowids of the talks filed under every chosen value: the first value's range of
    `talk_items` is read and each of its talks looked up under the others by its whole key. A
    `rowid in` per value built each value's whole list (100,000 talks, a topic of 21,000 with a
    speaker of 107: 7.6 ms a query, 0.2 ms this way)."""
    items = identifier(tables["items"])
    others = "".join(f" and exists (select 1 from {items} o where o.code = {item_code(tables, n)} "
                     "and o.newest_first = i.newest_first and o.talk = i.talk)" for n in numbers[1:])
    return f"select i.talk from {items} i where i.code = {item_code(tables, numbers[0])}{others}"


def range_sizes(tables: dict, count: int) -> str:
    """SQL for one row: how many talks each chosen value has, up to RANGE_PROBE."""
    items = identifier(tables["items"])
    return "select " + ", ".join(f"(select count(*) from (select 1 from {items} where code = "
                                 f"{item_code(tables, n)} limit {RANGE_PROBE}))" for n in range(count))


def item_filters(request, database, table, datasette):
    """The `_item_<column>=value` filters of a table whose metadata names its facet keys, as one
    clause that reads the smallest of their ranges."""
    tables = (datasette.table_metadata(database, table) or {}).get("facet_keys") or {}
    if not tables:
        return None
    chosen = [(key[len(ITEM_FILTER):], value) for key in request.args if key.startswith(ITEM_FILTER)
              for value in request.args.getlist(key)]
    # Datasette's own `topics__arraycontains=Triton` (what API clients use) reads every talk's
    # JSON; the same range of talk_items beside it leaves that filter a handful of rows to check.
    contained = [(key[:-len(ARRAY_FILTER)], value) for key in request.args if key.endswith(ARRAY_FILTER)
                 and key[:-len(ARRAY_FILTER)] in ITEM_COLUMNS for value in request.args.getlist(key)]
    if not chosen and not contained:
        return None
    params = {f"gt_{part}_{number}": given for number, pair in enumerate(chosen + contained)
              for part, given in zip(("item", "value"), pair)}
    chosen += contained
    descriptions = [f'{column} has "{value}"' for column, value in chosen[:len(chosen) - len(contained)]]

    async def smallest_range_first() -> FilterArguments:
        db = datasette.get_database(database)
        if not all([await db.table_exists(tables["items"]), await db.table_exists(tables["values"])]):
            # an index without them: each `_item_` value read from the talk's JSON (Datasette's own
            # array filters need nothing more)
            own = [n for n in range(len(chosen) - len(contained)) if chosen[n][0] in ITEM_COLUMNS]
            return FilterArguments([f":gt_value_{n} in (select value from json_each({identifier(chosen[n][0])}))"
                                    for n in own], params=params, human_descriptions=descriptions)
        numbers = list(range(len(chosen)))
        if len(chosen) > 1:
            sizes = (await datasette.get_database(database).execute(range_sizes(tables, len(chosen)), params)).first()
            numbers.sort(key=lambda number: sizes[number])
        return FilterArguments([f"rowid in ({item_rowids(tables, numbers)})"], params=params,
                               human_descriptions=descriptions)

    return smallest_range_first


CACHE_ENTRIES = 512
CACHE_MAX_ROWS = 1000


class CountCache:
    """Facet-key counts of an immutable file (which never change while it is served), least
    recently used dropped first: at most CACHE_ENTRIES answers of at most CACHE_MAX_ROWS rows."""

    def __init__(self) -> None:
        self.answers: OrderedDict = OrderedDict()

    async def answer(self, db_name: str, sql: str, params, truncate: bool, page_size, run):
        """`run()`'s results for this query, run once while they stay in the cache."""
        key = (db_name, sql, frozen(params), truncate, page_size)
        if key in self.answers:
            self.answers.move_to_end(key)
            return self.answers[key]
        results = await run()
        if len(getattr(results, "rows", ())) <= CACHE_MAX_ROWS:
            self.answers[key] = results
            if len(self.answers) > CACHE_ENTRIES:
                self.answers.popitem(last=False)
        return results


# Each served Datasette's cache.
CACHES: WeakKeyDictionary = WeakKeyDictionary()


def frozen(params) -> tuple:
    return tuple(sorted(params.items())) if isinstance(params, dict) else tuple(params or ())


def start(datasette) -> None:
    """Each served Datasette's cache of facet-key counts (only immutable files are cached)."""
    CACHES[datasette] = CountCache()
